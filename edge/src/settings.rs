//! Deployment settings from Spin variables (see spin.toml), read once per instance. Values are
//! secrets where marked and are never logged; a setting that cannot be used is a
//! [`SettingsError`] naming the variable (never its value), answered by every route that needs
//! the settings and by `/healthz`.

use std::sync::{Arc, OnceLock};

use crate::engine::{self, Config};

/// The wait a client gets when it asks for none, seconds.
pub const DEFAULT_WAIT_S: u64 = 4;
/// The longest wait a request may ask for, seconds (hosted Spin caps a request at 10 s on Fermyon
/// Cloud and 30 s on Akamai Functions; a request lasts at most wait + the upstream timeout).
pub const MAX_WAIT_S: u64 = 25;
/// The largest request body accepted (an image task is at most ~1.4 MB of base64).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// `abandon_after_ms` unless set: how long a solve nobody drives is kept after it could last
/// have made progress (its last lease, or the engine's `ends_by`), ms.
const DEFAULT_ABANDON_AFTER_MS: u64 = 60_000;
/// The range `abandon_after_ms` may take, ms: at most a day (more is taken for a typo).
const ABANDON_AFTER_RANGE_MS: std::ops::RangeInclusive<u64> = 0..=86_400_000;
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
    /// The clients, from the comma-separated `client_tokens` variable and `client_threads`.
    pub clients: Vec<Client>,
    /// Whether `in.php` queues a task when every thread the client may use is busy (answering
    /// `OK|id` at once, as for any task), or refuses it at once (`in_php_when_busy = refuse`).
    pub queue_when_busy: bool,
    /// Whether `res.php?action=getbalance` is passed to CaptchaAI (`res_php_getbalance = pass`,
    /// the default) or refused.
    pub pass_getbalance: bool,
    /// A solve nobody drives is removed this long after its last lease ended (not yet at
    /// CaptchaAI) or after the engine's `ends_by` (at CaptchaAI), ms.
    pub abandon_after_ms: u64,
    /// The token for `GET /metrics` (secret); when unset, any client token is accepted there.
    pub metrics_token: Option<String>,
    /// The engine config for every solve: base URL, upstream timeout and deadline (the rest are
    /// the engine's defaults), checked by the engine when the settings are read.
    pub config: Config,
}

/// A client of the edge: its token, and what the edge knows of it.
pub struct Client {
    /// The token it presents (secret): `Authorization: Bearer` on `/v1`, `key` on `in.php` and
    /// `res.php`.
    pub token: String,
    /// Its name in metrics and logs: `label:` before the token in `client_tokens`, else
    /// `client<n>` by its place in the list (1-based). Never the token.
    pub label: String,
    /// At most this many of the plan's threads at once (`client_threads`), if set.
    pub threads: Option<u64>,
}

/// The longest client label, characters.
const MAX_LABEL: usize = 32;

/// A deployment problem with the variables: its message names the variable and what it must
/// be, never the value.
#[derive(Clone, Debug)]
pub struct SettingsError(String);

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SettingsError {}

/// The settings of this instance (an instance serves many requests under Spin 4.1, up to 128),
/// read at its first request that needs them. A [`SettingsError`] is kept too: the variables do
/// not change while the instance lives.
pub async fn get() -> Result<Arc<Settings>, SettingsError> {
    static SETTINGS: OnceLock<Result<Arc<Settings>, SettingsError>> = OnceLock::new();
    if let Some(settings) = SETTINGS.get() {
        return settings.clone();
    }
    let loaded = Settings::load().await.map(Arc::new);
    // Two requests of one instance may both read the variables first; the first kept wins.
    SETTINGS.get_or_init(|| loaded).clone()
}

impl Settings {
    /// Reads and checks the variables.
    async fn load() -> Result<Settings, SettingsError> {
        let var = |name: &'static str| async move { spin_sdk::variables::get(name).await.ok() };
        let missing = |name: &str| SettingsError(format!("the variable {name} is not set"));
        let api_key = var("captchaai_key").await.ok_or_else(|| missing("captchaai_key"))?;
        let tokens = var("client_tokens").await.ok_or_else(|| missing("client_tokens"))?;
        let clients = clients(&tokens, &var("client_threads").await.unwrap_or_default())?;
        let queue_when_busy = choice("in_php_when_busy", var("in_php_when_busy").await, ["queue", "refuse"])? == 0;
        let pass_getbalance = choice("res_php_getbalance", var("res_php_getbalance").await, ["pass", "refuse"])? == 0;
        // Without `api_base` the engine's default (CaptchaAI itself) applies.
        let base_url = var("api_base").await.map(|b| b.trim().to_owned()).filter(|b| !b.is_empty());
        let upstream_timeout_ms = milliseconds("upstream_timeout_ms", var("upstream_timeout_ms").await)?
            .unwrap_or(DEFAULT_UPSTREAM_TIMEOUT_MS);
        let metrics_token = var("metrics_token").await.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let abandon_after_ms =
            milliseconds("abandon_after_ms", var("abandon_after_ms").await)?.unwrap_or(DEFAULT_ABANDON_AFTER_MS);
        if !ABANDON_AFTER_RANGE_MS.contains(&abandon_after_ms) {
            return Err(SettingsError(format!(
                "the variable abandon_after_ms must be from {} to {} ms",
                ABANDON_AFTER_RANGE_MS.start(),
                ABANDON_AFTER_RANGE_MS.end()
            )));
        }
        let deadline_ms = milliseconds("solve_deadline_ms", var("solve_deadline_ms").await)?;
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
        // The engine's own check, naming the field: the variable that sets it is the problem.
        engine::check_config(&config).map_err(|failure| {
            let variable = match failure.field.as_deref() {
                Some("base_url") => "api_base",
                Some("request_timeout_ms") => "upstream_timeout_ms",
                Some("deadline_ms") => "solve_deadline_ms",
                _ => "(a setting)",
            };
            SettingsError(format!("the variable {variable} is refused by the engine: {}", failure.message))
        })?;
        Ok(Settings {
            upstream_timeout_ms,
            api_key,
            clients,
            queue_when_busy,
            pass_getbalance,
            abandon_after_ms,
            metrics_token,
            config,
        })
    }

    /// The client with this label.
    pub fn client(&self, label: &str) -> Option<&Client> {
        self.clients.iter().find(|c| c.label == label)
    }
}

/// The clients of `client_tokens` (`[label:]token`, comma-separated) with their shares from
/// `client_threads` (`label=N`, comma-separated). Errors name the variable and the label, never
/// a token.
fn clients(tokens: &str, threads: &str) -> Result<Vec<Client>, SettingsError> {
    let valid_label = |l: &str| {
        (1..=MAX_LABEL).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    let mut clients = Vec::new();
    for (n, entry) in tokens.split(',').map(str::trim).filter(|t| !t.is_empty()).enumerate() {
        let (label, token) = match entry.split_once(':') {
            Some((label, token)) if valid_label(label) => (label.to_owned(), token.trim()),
            _ => (format!("client{}", n + 1), entry),
        };
        if token.is_empty() {
            return Err(SettingsError(format!("the variable client_tokens gives {label} no token")));
        }
        if clients.iter().any(|c: &Client| c.label == label) {
            return Err(SettingsError(format!("the variable client_tokens names {label} twice")));
        }
        clients.push(Client { token: token.to_owned(), label, threads: None });
    }
    if clients.is_empty() {
        return Err(SettingsError("the variable client_tokens holds no token (comma-separated)".into()));
    }
    for entry in threads.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let bad = || {
            SettingsError("the variable client_threads must be label=N pairs (N at least 1), comma-separated".into())
        };
        let (label, n) = entry.split_once('=').ok_or_else(bad)?;
        let n: u64 = n.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(bad)?;
        let label = label.trim();
        let client = clients.iter_mut().find(|c| c.label == label).ok_or_else(|| {
            SettingsError(format!("the variable client_threads names {label:?}, which client_tokens does not label"))
        })?;
        client.threads = Some(n);
    }
    Ok(clients)
}

/// Which of `options` a choice variable holds (the first when unset or empty).
fn choice<const N: usize>(name: &str, value: Option<String>, options: [&str; N]) -> Result<usize, SettingsError> {
    let Some(value) = value.map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty()) else { return Ok(0) };
    options
        .iter()
        .position(|o| *o == value)
        .ok_or_else(|| SettingsError(format!("the variable {name} must be one of {}", options.join(", "))))
}

/// A milliseconds variable: `None` when unset or empty, else whole milliseconds (decimal digits
/// only, surrounding spaces ignored) or a [`SettingsError`] naming `name`.
fn milliseconds(name: &str, value: Option<String>) -> Result<Option<u64>, SettingsError> {
    let Some(value) = value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()) else { return Ok(None) };
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SettingsError(format!("the variable {name} must be whole milliseconds (decimal digits only)")));
    }
    value.parse().map(Some).map_err(|_| SettingsError(format!("the variable {name} is too large")))
}
