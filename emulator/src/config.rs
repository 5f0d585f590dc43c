//! Emulator configuration: accounts, faults, per-type solve times, bans, time scale.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::vocab::{CaptchaKind, SolveTime, key_well_formed};

/// One CaptchaAI account the emulator knows.
///
/// `Debug` never shows the key.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Account {
    /// The 32-character API key.
    pub key: String,
    /// Plan cap: how many tasks may be in flight at once (`threads` in threadsinfo).
    pub threads: u32,
    /// `false` models an expired/absent plan; [`Account::no_plan`] says how the service answers.
    pub plan_active: bool,
    /// What `action=getbalance` answers.
    pub balance: f64,
    /// How calls with this key are answered while `plan_active` is false (default:
    /// [`NoPlan::ZeroBalance`], the emulator's original behaviour).
    #[serde(default)]
    pub no_plan: NoPlan,
}

/// How the service answers a key whose account has no active plan. **Unconfirmed**: DOCS-ERR
/// names both `ERROR_KEY_DOES_NOT_EXIST` ("or the account has no threads") and
/// `ERROR_ZERO_BALANCE`; no live observation says which one, or what threadsinfo shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum NoPlan {
    /// Submits get `ERROR_ZERO_BALANCE`; threadsinfo shows the plan's threads, all free.
    #[default]
    ZeroBalance,
    /// Every call with the key (submit, poll, threadsinfo, getbalance) gets
    /// `ERROR_KEY_DOES_NOT_EXIST`, as for an unknown key (and counts towards an IP ban).
    KeyDoesNotExist,
    /// Submits get `ERROR_ZERO_BALANCE`; threadsinfo reports `threads` 0 and `working_threads` 0.
    ZeroThreads,
}

/// What `in.php` answers when every thread of an active plan is busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum BusyThreads {
    /// `ERROR_ZERO_BALANCE` (the docs' reading; the emulator's original behaviour).
    #[default]
    ZeroBalance,
    /// The task is accepted and waits, first in first out, for a free thread of its account,
    /// answering `CAPCHA_NOT_READY` meanwhile; its solve time starts when it gets the thread
    /// (the official SDK's comment: "the API queues tasks silently ... never returns
    /// ERROR_ZERO_BALANCE"). **Unconfirmed** against the live service.
    SilentQueue,
}

/// What `in.php` answers for a `method` it does not solve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum UnknownMethod {
    /// `ERROR_SERVER_ERROR`: the one live observation (`method=hcaptcha`, any sitekey).
    #[default]
    ServerError,
    /// `ERROR_BAD_PARAMETERS` (the emulator's answer before; what the docs' wording suggests).
    BadParameters,
}

impl Account {
    /// An account with an active plan of `threads` threads and a balance of 10.0.
    pub fn new(key: impl Into<String>, threads: u32) -> Self {
        Account { key: key.into(), threads, plan_active: true, balance: 10.0, no_plan: NoPlan::ZeroBalance }
    }

    /// An account whose plan is not active (submits always get `ERROR_ZERO_BALANCE`).
    pub fn without_plan(key: impl Into<String>, threads: u32) -> Self {
        Account { plan_active: false, ..Account::new(key, threads) }
    }

    /// An account whose plan is not active, answered as `no_plan` says.
    pub fn without_plan_answering(key: impl Into<String>, threads: u32, no_plan: NoPlan) -> Self {
        Account { no_plan, ..Account::without_plan(key, threads) }
    }
}

impl fmt::Debug for Account {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Account")
            .field("key", &"[REDACTED]")
            .field("threads", &self.threads)
            .field("plan_active", &self.plan_active)
            .field("balance", &self.balance)
            .field("no_plan", &self.no_plan)
            .finish()
    }
}

/// Random fault rates, drawn per protocol request from the seeded RNG (at most one fault per
/// request; checked in the order drop, html_502, plain_text, slow). Control endpoints
/// (`/_emulator/...`) never get faults.
///
/// JSON form (for `POST /_emulator/faults`): every field optional, e.g. `{"drop_rate":0.1}`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Reply a bare plain-text code even though `json=1` was sent, without processing the
    /// request: `CAPCHA_NOT_READY` for `res.php?action=get`, `ERROR_SERVER_ERROR` otherwise.
    pub plain_text_rate: f64,
    /// Reply HTTP 502 with an nginx HTML page, without processing the request.
    pub html_502_rate: f64,
    /// Process the request normally but delay the reply by `slow_ms` (virtual).
    pub slow_rate: f64,
    /// Delay for `slow_rate` faults, in virtual milliseconds.
    pub slow_ms: u64,
    /// Close the connection without a response, without processing the request.
    pub drop_rate: f64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults { plain_text_rate: 0.0, html_502_rate: 0.0, slow_rate: 0.0, slow_ms: 5_000, drop_rate: 0.0 }
    }
}

impl Faults {
    /// No faults at all.
    pub fn none() -> Self {
        Faults::default()
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        for (name, r) in [
            ("plain_text_rate", self.plain_text_rate),
            ("html_502_rate", self.html_502_rate),
            ("slow_rate", self.slow_rate),
            ("drop_rate", self.drop_rate),
        ] {
            if !(0.0..=1.0).contains(&r) {
                return Err(format!("{name} must be within [0, 1]"));
            }
        }
        if self.plain_text_rate + self.html_502_rate + self.slow_rate + self.drop_rate > 1.0 + 1e-9 {
            return Err("fault rates must add up to at most 1".into());
        }
        Ok(())
    }
}

/// A scripted fault for [`crate::Emulator::force_next`]. Applies to the next protocol
/// request(s) (in.php / res.php / solve.php) in arrival order, before any random fault.
///
/// JSON form (externally tagged): `{"code":"ERROR_SERVER_ERROR"}`, `"html_502"`,
/// `{"plain_text":"CAPCHA_NOT_READY"}`, `"drop"`, `{"slow":500}`, `{"status":[503,"body"]}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Reply this error code in the request's reply format (`{"status":0,"request":CODE}` with
    /// `json=1`, bare `CODE` without). The request is not processed.
    Code(String),
    /// HTTP 502 with an nginx HTML page. The request is not processed.
    #[serde(rename = "html_502")]
    Html502,
    /// HTTP 200 with exactly this text (`text/html`), whatever `json` says. Not processed. An
    /// empty text means the endpoint's default: `CAPCHA_NOT_READY` for `res.php?action=get`,
    /// `ERROR_SERVER_ERROR` otherwise.
    PlainText(String),
    /// Close the connection without a response. Not processed.
    Drop,
    /// Process normally, delay the reply by this many virtual milliseconds.
    Slow(u64),
    /// Reply this HTTP status and body. Not processed.
    Status(u16, String),
}

impl Fault {
    /// Short label used in the request log (`fault` field).
    pub fn label(&self) -> String {
        match self {
            Fault::Code(c) => format!("code:{c}"),
            Fault::Html502 => "html_502".into(),
            Fault::PlainText(_) => "plain_text".into(),
            Fault::Drop => "drop".into(),
            Fault::Slow(ms) => format!("slow:{ms}"),
            Fault::Status(s, _) => format!("status:{s}"),
        }
    }
}

/// Everything the emulator needs to start. All durations are **virtual** milliseconds: the
/// emulator's clock runs `time_scale` times faster than real time.
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Seed for every random choice (task ids, solve times, answers, random faults).
    pub seed: u64,
    /// Virtual time = real elapsed time × `time_scale` (100.0 = protocol runs 100× faster).
    pub time_scale: f64,
    /// TCP port on 127.0.0.1; 0 picks a free port.
    pub port: u16,
    /// Known accounts.
    pub accounts: Vec<Account>,
    /// Random fault rates.
    pub faults: Faults,
    /// Tasks whose googlekey / sitekey / gt / captcha_id is listed end as `ERROR_CAPTCHA_UNSOLVABLE`.
    pub unsolvable_sitekeys: Vec<String>,
    /// Probability that any other task ends as `ERROR_CAPTCHA_UNSOLVABLE`.
    pub unsolvable_rate: f64,
    /// After this many bad-key requests (`ERROR_WRONG_USER_KEY` / `ERROR_KEY_DOES_NOT_EXIST`) from
    /// one client IP, every request from it gets `IP_BANNED` for `ban_ms`. 0 disables bans.
    pub ban_after_bad_keys: u32,
    /// Ban duration.
    pub ban_ms: u64,
    /// How long a finished (solved/unsolvable) task stays queryable; afterwards
    /// `ERROR_WRONG_CAPTCHA_ID`.
    pub retention_ms: u64,
    /// Per-kind solve-time overrides (kinds not listed use [`CaptchaKind::default_solve_time`]).
    pub solve_times: BTreeMap<CaptchaKind, SolveTime>,
    /// Maximum request-log entries kept (default 200,000; the oldest are dropped first and
    /// counted in [`crate::Stats::log_dropped`]). Lower it for load runs.
    pub log_limit: usize,
    /// What a submit gets when every thread of an active plan is busy.
    pub busy_threads: BusyThreads,
    /// What a submit with an unknown (or [`EmulatorConfig::unsupported_methods`]) method gets.
    pub unknown_method: UnknownMethod,
    /// `in.php` methods answered as unknown although the emulator could solve them: models the
    /// service not (or no longer) solving a type a client knows, as with hCaptcha.
    pub unsupported_methods: Vec<String>,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            seed: 1,
            time_scale: 1.0,
            port: 0,
            accounts: Vec::new(),
            faults: Faults::default(),
            unsolvable_sitekeys: Vec::new(),
            unsolvable_rate: 0.0,
            ban_after_bad_keys: 5,
            ban_ms: 300_000,
            retention_ms: 600_000,
            solve_times: BTreeMap::new(),
            log_limit: 200_000,
            busy_threads: BusyThreads::ZeroBalance,
            unknown_method: UnknownMethod::ServerError,
            unsupported_methods: Vec::new(),
        }
    }
}

impl EmulatorConfig {
    /// Sets the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Sets the time scale (must be finite and > 0).
    pub fn with_time_scale(mut self, scale: f64) -> Self {
        self.time_scale = scale;
        self
    }
    /// Sets the port (0 = any free port).
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }
    /// Adds an account with an active plan.
    pub fn with_account(mut self, key: impl Into<String>, threads: u32) -> Self {
        self.accounts.push(Account::new(key, threads));
        self
    }
    /// Adds an account without an active plan.
    pub fn with_account_without_plan(mut self, key: impl Into<String>, threads: u32) -> Self {
        self.accounts.push(Account::without_plan(key, threads));
        self
    }
    /// Adds an account without an active plan, answered as `no_plan` says.
    pub fn with_account_without_plan_answering(
        mut self,
        key: impl Into<String>,
        threads: u32,
        no_plan: NoPlan,
    ) -> Self {
        self.accounts.push(Account::without_plan_answering(key, threads, no_plan));
        self
    }
    /// Sets what a submit gets when every thread is busy.
    pub fn with_busy_threads(mut self, busy: BusyThreads) -> Self {
        self.busy_threads = busy;
        self
    }
    /// Sets what a submit with an unknown method gets.
    pub fn with_unknown_method(mut self, answer: UnknownMethod) -> Self {
        self.unknown_method = answer;
        self
    }
    /// Answers `method` as unknown (see [`EmulatorConfig::unsupported_methods`]).
    pub fn with_unsupported_method(mut self, method: impl Into<String>) -> Self {
        self.unsupported_methods.push(method.into());
        self
    }
    /// Sets the random fault rates.
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }
    /// Marks a sitekey (googlekey / sitekey / gt / captcha_id) as unsolvable.
    pub fn with_unsolvable_sitekey(mut self, sitekey: impl Into<String>) -> Self {
        self.unsolvable_sitekeys.push(sitekey.into());
        self
    }
    /// Sets the random unsolvable rate.
    pub fn with_unsolvable_rate(mut self, rate: f64) -> Self {
        self.unsolvable_rate = rate;
        self
    }
    /// Sets the ban policy (0 bad keys = never ban).
    pub fn with_ban(mut self, after_bad_keys: u32, ban_ms: u64) -> Self {
        self.ban_after_bad_keys = after_bad_keys;
        self.ban_ms = ban_ms;
        self
    }
    /// Sets how long finished tasks stay queryable.
    pub fn with_retention_ms(mut self, ms: u64) -> Self {
        self.retention_ms = ms;
        self
    }
    /// Overrides one kind's solve-time range.
    pub fn with_solve_time(mut self, kind: CaptchaKind, min_ms: u64, max_ms: u64) -> Self {
        self.solve_times.insert(kind, SolveTime { min_ms, max_ms });
        self
    }
    /// Sets every kind's solve time to the same range.
    pub fn with_all_solve_times(mut self, min_ms: u64, max_ms: u64) -> Self {
        for k in CaptchaKind::ALL {
            self.solve_times.insert(k, SolveTime { min_ms, max_ms });
        }
        self
    }

    /// The effective solve-time range for `kind`.
    pub fn solve_time(&self, kind: CaptchaKind) -> SolveTime {
        self.solve_times.get(&kind).copied().unwrap_or_else(|| kind.default_solve_time())
    }

    /// Checks the configuration; messages never contain keys.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err("time_scale must be finite and > 0".into());
        }
        self.faults.validate()?;
        if !(0.0..=1.0).contains(&self.unsolvable_rate) {
            return Err("unsolvable_rate must be within [0, 1]".into());
        }
        for (i, a) in self.accounts.iter().enumerate() {
            if !key_well_formed(&a.key) {
                return Err(format!("account #{i}: key must be 32 ASCII letters/digits"));
            }
        }
        for (k, t) in &self.solve_times {
            if t.min_ms > t.max_ms {
                return Err(format!("solve time for {k:?}: min_ms > max_ms"));
            }
        }
        Ok(())
    }
}
