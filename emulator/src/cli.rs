//! The emulator as a standalone process (`captchaai-emulator`, also `captchaai emulator`), for
//! tests written in other languages. Prints `emulator listening on http://127.0.0.1:PORT` on stdout, then serves until
//! SIGINT/SIGTERM. Keys given on the command line are never printed (not even in errors).

use clap::Args;

use crate::{
    Account, BusyThreads, CaptchaKind, Emulator, EmulatorConfig, Faults, NoPlan, UnknownMethod, key_well_formed,
};

/// Flags of `captchaai-emulator` / `captchaai emulator`. (No `Debug`: it holds keys.)
#[derive(Args)]
pub struct EmulatorArgs {
    /// Port on 127.0.0.1 (0 = pick a free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Seed for every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Virtual time runs this many times faster than real time.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// An account with an active plan: 32-character key, colon, thread count. Repeatable.
    #[arg(long = "key", value_name = "KEY:THREADS")]
    pub keys: Vec<String>,
    /// An account without an active plan (threads default to 1; the answer defaults to
    /// `--no-plan-answer`). Repeatable.
    #[arg(long = "no-plan-key", value_name = "KEY[:THREADS[:ANSWER]]")]
    pub no_plan_keys: Vec<String>,
    /// How `--no-plan-key` accounts are answered unless their spec says otherwise (all three
    /// unconfirmed): `zero-balance` (submits ERROR_ZERO_BALANCE, threadsinfo shows free
    /// threads), `key-does-not-exist` (every call ERROR_KEY_DOES_NOT_EXIST), `zero-threads`
    /// (submits ERROR_ZERO_BALANCE, threadsinfo 0 threads).
    #[arg(long, value_enum, default_value_t = NoPlan::ZeroBalance)]
    pub no_plan_answer: NoPlan,
    /// What a submit gets when every thread of an active plan is busy: `zero-balance`
    /// (ERROR_ZERO_BALANCE) or `silent-queue` (accepted; waits for a free thread answering
    /// CAPCHA_NOT_READY; the official SDK's reading, unconfirmed).
    #[arg(long, value_enum, default_value_t = BusyThreads::ZeroBalance)]
    pub busy_threads: BusyThreads,
    /// What a submit with an unknown method gets: `server-error` (ERROR_SERVER_ERROR, as observed
    /// live for hcaptcha) or `bad-parameters` (ERROR_BAD_PARAMETERS).
    #[arg(long, value_enum, default_value_t = UnknownMethod::ServerError)]
    pub unknown_method: UnknownMethod,
    /// An in.php method answered as unknown although the emulator solves it (models the service
    /// not solving a type a client knows). Repeatable.
    #[arg(long = "unsupported-method", value_name = "METHOD")]
    pub unsupported_methods: Vec<String>,
    /// Rate of bare plain-text replies despite json=1.
    #[arg(long, default_value_t = 0.0)]
    pub plain_text_rate: f64,
    /// Rate of HTTP 502 nginx pages.
    #[arg(long = "html-502-rate", default_value_t = 0.0)]
    pub html_502_rate: f64,
    /// Rate of slow replies.
    #[arg(long, default_value_t = 0.0)]
    pub slow_rate: f64,
    /// Delay of slow replies, virtual ms.
    #[arg(long, default_value_t = 5_000)]
    pub slow_ms: u64,
    /// Rate of dropped connections.
    #[arg(long, default_value_t = 0.0)]
    pub drop_rate: f64,
    /// A sitekey (googlekey/sitekey/gt/captcha_id) whose tasks end unsolvable. Repeatable.
    #[arg(long = "unsolvable-sitekey", value_name = "SITEKEY")]
    pub unsolvable_sitekeys: Vec<String>,
    /// Rate at which other tasks end unsolvable.
    #[arg(long, default_value_t = 0.0)]
    pub unsolvable_rate: f64,
    /// Bad-key requests from one IP before IP_BANNED (0 = never).
    #[arg(long, default_value_t = 5)]
    pub ban_after_bad_keys: u32,
    /// Ban duration, virtual ms.
    #[arg(long, default_value_t = 300_000)]
    pub ban_ms: u64,
    /// How long finished tasks stay queryable, virtual ms.
    #[arg(long, default_value_t = 600_000)]
    pub retention_ms: u64,
    /// Solve-time override for one kind, virtual ms, e.g. `recaptcha_v2=1000:2000`. Kinds: image,
    /// grid, bls, recaptcha_v2, recaptcha_v3, turnstile, cloudflare_challenge, geetest,
    /// captcha_fox, friendly_captcha, lemin, or `all`. Repeatable.
    #[arg(long = "solve-time", value_name = "KIND=MIN:MAX")]
    pub solve_times: Vec<String>,
    /// Request-log entries kept.
    #[arg(long, default_value_t = 200_000)]
    pub log_limit: usize,
}

fn parse_account(spec: &str, default_threads: Option<u32>, flag: &str, n: usize) -> anyhow::Result<(String, u32)> {
    let (key, threads, answer) = parse_account_spec(spec, default_threads, false, flag, n)?;
    debug_assert!(answer.is_none());
    Ok((key, threads))
}

/// `KEY[:THREADS][:ANSWER]` (the answer only where `with_answer`).
fn parse_account_spec(
    spec: &str,
    default_threads: Option<u32>,
    with_answer: bool,
    flag: &str,
    n: usize,
) -> anyhow::Result<(String, u32, Option<NoPlan>)> {
    use clap::ValueEnum as _;
    // Errors name the flag and its position, never the value.
    let bad = || {
        let answer =
            if with_answer { " (then optionally ':' and zero-balance|key-does-not-exist|zero-threads)" } else { "" };
        anyhow::anyhow!("{flag} #{n}: expected a 32-character key (letters/digits), ':', and a thread count{answer}")
    };
    let mut parts = spec.split(':');
    let key = parts.next().unwrap_or("").trim();
    let threads = match parts.next() {
        Some(t) => t.trim().parse::<u32>().map_err(|_| bad())?,
        None => default_threads.ok_or_else(bad)?,
    };
    let answer = match parts.next() {
        Some(a) if with_answer => Some(NoPlan::from_str(a.trim(), false).map_err(|_| bad())?),
        Some(_) => return Err(bad()),
        None => None,
    };
    if parts.next().is_some() || !key_well_formed(key) {
        return Err(bad());
    }
    Ok((key.to_owned(), threads, answer))
}

fn parse_solve_time(spec: &str) -> anyhow::Result<(Vec<CaptchaKind>, u64, u64)> {
    let bad = || anyhow::anyhow!("--solve-time {spec:?}: expected KIND=MIN:MAX (virtual ms)");
    let (kind, range) = spec.split_once('=').ok_or_else(bad)?;
    let (min, max) = range.split_once(':').ok_or_else(bad)?;
    let (min, max) = (min.trim().parse::<u64>().map_err(|_| bad())?, max.trim().parse::<u64>().map_err(|_| bad())?);
    let kinds = if kind.trim() == "all" {
        CaptchaKind::ALL.to_vec()
    } else {
        vec![
            serde_json::from_value::<CaptchaKind>(serde_json::Value::String(kind.trim().to_owned()))
                .map_err(|_| bad())?,
        ]
    };
    Ok((kinds, min, max))
}

impl EmulatorArgs {
    /// The emulator configuration these flags describe.
    pub fn to_config(&self) -> anyhow::Result<EmulatorConfig> {
        let mut cfg = EmulatorConfig {
            seed: self.seed,
            time_scale: self.time_scale,
            port: self.port,
            faults: Faults {
                plain_text_rate: self.plain_text_rate,
                html_502_rate: self.html_502_rate,
                slow_rate: self.slow_rate,
                slow_ms: self.slow_ms,
                drop_rate: self.drop_rate,
            },
            unsolvable_sitekeys: self.unsolvable_sitekeys.clone(),
            unsolvable_rate: self.unsolvable_rate,
            ban_after_bad_keys: self.ban_after_bad_keys,
            ban_ms: self.ban_ms,
            retention_ms: self.retention_ms,
            log_limit: self.log_limit,
            busy_threads: self.busy_threads,
            unknown_method: self.unknown_method,
            unsupported_methods: self.unsupported_methods.clone(),
            ..EmulatorConfig::default()
        };
        for (i, spec) in self.keys.iter().enumerate() {
            let (key, threads) = parse_account(spec, None, "--key", i + 1)?;
            cfg.accounts.push(Account::new(key, threads));
        }
        for (i, spec) in self.no_plan_keys.iter().enumerate() {
            let (key, threads, answer) = parse_account_spec(spec, Some(1), true, "--no-plan-key", i + 1)?;
            cfg.accounts.push(Account::without_plan_answering(key, threads, answer.unwrap_or(self.no_plan_answer)));
        }
        for spec in &self.solve_times {
            let (kinds, min, max) = parse_solve_time(spec)?;
            for k in kinds {
                cfg = cfg.with_solve_time(k, min, max);
            }
        }
        cfg.validate().map_err(|m| anyhow::anyhow!("{m}"))?;
        Ok(cfg)
    }
}

async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Starts the emulator, prints its URL, serves until SIGINT/SIGTERM.
pub async fn run(args: EmulatorArgs) -> anyhow::Result<()> {
    let cfg = args.to_config()?;
    let emu = Emulator::start(cfg).await?;
    println!("emulator listening on {}", emu.base_url());
    terminated().await;
    emu.shutdown().await;
    Ok(())
}
