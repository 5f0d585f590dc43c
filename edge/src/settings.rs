//! Deployment settings from Spin variables (see spin.toml). Values are secrets where marked and
//! are never logged.

use crate::engine::Config;

/// The wait a client gets when it asks for none, seconds.
pub const DEFAULT_WAIT_S: u64 = 4;
/// The longest wait a request may ask for, seconds (hosted Spin caps a request at 10 s on Fermyon
/// Cloud and 30 s on Akamai Functions; a request lasts at most wait + the upstream timeout).
pub const MAX_WAIT_S: u64 = 25;
/// The largest request body accepted (an image task is at most ~1.4 MB of base64).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// `abandon_after_ms` unless set: how long a solve nobody drives is kept after it could last
/// have made progress (its last lease, or its deadline plus one request timeout), ms.
const DEFAULT_ABANDON_AFTER_MS: u64 = 60_000;
/// How long a finished solve's response is kept for `GET` to repeat it, ms, when the engine
/// gives no earlier expiry (a token's `expires_at` ends it sooner). `DELETE` ends it at once.
pub const RESULT_RETENTION_MS: u64 = 600_000;
/// Upstream request timeout, ms, unless the `upstream_timeout_ms` variable says otherwise.
const DEFAULT_UPSTREAM_TIMEOUT_MS: u64 = 5_000;

/// What the gateway needs from its variables.
pub struct Settings {
    /// The upstream request timeout, ms (also in `config`; it bounds leases).
    pub upstream_timeout_ms: u64,
    /// The CaptchaAI key (secret).
    pub api_key: String,
    /// Client access tokens (secret), from the comma-separated `client_tokens` variable.
    pub client_tokens: Vec<String>,
    /// A solve nobody drives is removed this long after its last lease ended (not yet at
    /// CaptchaAI) or after its deadline plus one request timeout (at CaptchaAI), ms.
    pub abandon_after_ms: u64,
    /// The token for `GET /metrics` (secret); when unset, any client token is accepted there.
    pub metrics_token: Option<String>,
    /// The engine config for every solve: base URL and upstream timeout (the rest are the
    /// engine's defaults).
    pub config: Config,
}

impl Settings {
    /// Reads the variables. A missing required variable is a deployment error (500).
    pub async fn load() -> anyhow::Result<Settings> {
        let var = |name: &'static str| async move { spin_sdk::variables::get(name).await };
        let api_key = var("captchaai_key").await.map_err(|_| anyhow::anyhow!("variable captchaai_key is not set"))?;
        let tokens = var("client_tokens").await.map_err(|_| anyhow::anyhow!("variable client_tokens is not set"))?;
        let client_tokens: Vec<String> =
            tokens.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
        // Without `api_base` the engine's default (CaptchaAI itself) applies.
        let base_url = var("api_base").await.ok();
        let upstream_timeout_ms = var("upstream_timeout_ms")
            .await
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(DEFAULT_UPSTREAM_TIMEOUT_MS);
        let metrics_token = var("metrics_token").await.ok().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let number = |value: Option<String>| value.and_then(|v| v.trim().parse::<u64>().ok());
        let abandon_after_ms = number(var("abandon_after_ms").await.ok()).unwrap_or(DEFAULT_ABANDON_AFTER_MS);
        // The engine validates it (a bad value fails every solve with the field named).
        let deadline_ms = number(var("solve_deadline_ms").await.ok());
        let config = Config {
            base_url,
            request_timeout_ms: Some(upstream_timeout_ms),
            deadline_ms,
            initial_wait_ms: None,
            poll_interval_ms: None,
            max_submit_retries: None,
            max_poll_errors: None,
            unsolvable_retries: None,
            jitter_seed: None,
            max_jitter_ms: None,
            poll_cost_ms: None,
        };
        Ok(Settings { upstream_timeout_ms, api_key, client_tokens, abandon_after_ms, metrics_token, config })
    }
}
