//! The CaptchaAI emulator: a loopback HTTP server speaking `in.php` / `res.php` / `solve.php`
//! as the real service does (see `shared/docs/captchaai-api.md`), with seeded solve times,
//! per-key thread accounting, IP bans, unsolvable tasks, injectable faults, a time-scale factor
//! and a key-free request log.
//!
//! # Conventions (where the service is ambiguous)
//! - Task ids are decimal integers; in `json=1` submit replies they are JSON integers for
//!   `userrecaptcha` and strings for every other method.
//! - Ready answers: `{"status":1,"request":ANSWER}`. reCAPTCHA Enterprise (`enterprise=1`) and
//!   `cloudflare_challenge` also carry `"result":ANSWER` (the same value as `request`) and
//!   `"user_agent"`; `captchafox` carries `"user_agent"`. The user agent echoes the submitted
//!   `userAgent`, else a fixed Chrome UA. Plain text: `OK|ANSWER`.
//! - Structured answers are JSON strings in `request`: grid `"[1,4,7]"` and BLS `"[2,5,9]"`
//!   (1-based cells in reading order), GeeTest v3 `{challenge,validate,seccode}`, GeeTest v4
//!   `{captcha_id,lot_number,pass_token,gen_time,captcha_output}`, Lemin `{answer,challenge_uuid}`.
//! - `threadsinfo` replies `{"status":1,"threads":"N","working_threads":M}` (`threads` a string,
//!   `working_threads` a number) in both formats (plain text omits `status`).
//! - `getbalance`: `{"status":1,"request":10.0}`, plain `10.0`.
//! - Check order for a submit: ban → key (`ERROR_WRONG_USER_KEY` for anything not 32 ASCII
//!   letters/digits, `ERROR_KEY_DOES_NOT_EXIST` for unknown) → method and parameters → plan and
//!   free threads (`ERROR_ZERO_BALANCE`).
//! - Faults other than `slow` replace processing (the request never reaches the "service");
//!   `slow` processes on arrival and delays the reply.
//! - Busy threads (an active plan with every thread working): `ERROR_ZERO_BALANCE` by default;
//!   [`BusyThreads::SilentQueue`] (`--busy-threads silent-queue`) accepts the task instead and
//!   queues it per account, first in first out: `CAPCHA_NOT_READY` until a thread frees, then
//!   its drawn solve time runs from that moment. Queued tasks are not `working_threads`; they
//!   wait while the plan is inactive and start when threads free up, the cap is raised or the
//!   plan is reactivated (through the control API). A task the client gave up on still runs.
//! - Accounts without a plan: [`NoPlan`] per account (`--no-plan-key KEY:THREADS:ANSWER`,
//!   `--no-plan-answer`): `ERROR_ZERO_BALANCE` with free threads in threadsinfo (default),
//!   `ERROR_KEY_DOES_NOT_EXIST` for every call (counted as a bad key towards a ban), or
//!   `ERROR_ZERO_BALANCE` with a threadsinfo of 0 threads.
//! - Unknown `in.php` methods (and [`EmulatorConfig::unsupported_methods`]) get
//!   `ERROR_SERVER_ERROR`, as `method=hcaptcha` does live; [`UnknownMethod::BadParameters`]
//!   restores the emulator's earlier `ERROR_BAD_PARAMETERS`. A missing `method` is
//!   `ERROR_BAD_PARAMETERS`.
//!
//! # Unconfirmed behaviour
//! A green run against the emulator is evidence about a client's handling of these answers,
//! **not** about the live service. `shared/docs/captchaai-api.md` marks the following as
//! unconfirmed (no official source or live observation); the emulator picks one answer (or
//! lets the caller pick), and tests that exercise them say so (an `unconfirmed_` name prefix or
//! a doc line):
//! - `/solve.php` (synchronous image solving): not found in any CaptchaAI doc, SDK or example.
//! - Silent queueing on busy threads (the official SDK's comment) versus `ERROR_ZERO_BALANCE`
//!   (the docs); what threadsinfo shows for queued tasks.
//! - Which answer an account without a plan gets, and its threadsinfo.
//! - Unknown methods other than `hcaptcha`; a missing `method`; an unknown `res.php` action
//!   (`ERROR_BAD_PARAMETERS` here).
//! - The threadsinfo field types and `status`; `getbalance` for thread plans.
//! - The plain-text (no `json=1`) formats, including structured answers after `OK|`.
//! - Grid via `img_type=recaptcha` (SDK) or `recaptcha=1` (examples), 1-based grid cells;
//!   `regsense` vs the SDK's `caseSensitive` (both accepted; neither checked for effect).
//! - The IP-ban threshold (5 bad keys here) and what counts towards it; the 5-minute ban is
//!   documented.
//! - Size limits where the docs disagree (100 B vs 1 KB minimum, 100 kB vs 1 MiB maximum).
//! - Task ids as JSON integers only for `userrecaptcha` (one live observation, WD).
//! - Solve-time distributions (modelled on the docs' and SDK comments' figures).

mod captcha;
pub mod cli;
mod config;
mod http;
mod log;
pub mod net;
mod protocol;
mod rng;
pub(crate) mod state;
mod vocab;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use captcha::codes;
pub use captcha::{DEFAULT_USER_AGENT, MAX_BLS_SIDE, MAX_IMAGE_BYTES, MIN_IMAGE_BYTES};
pub use config::{Account, BusyThreads, EmulatorConfig, Fault, Faults, NoPlan, UnknownMethod};
pub use http::MAX_BODY_BYTES;
pub use log::{REDACTED, RecordedRequest};
pub use state::{Stats, TaskInfo, TaskState, ThreadsInfo};
pub use vocab::{CaptchaKind, SolveTime, key_well_formed};

use http::Shared;
use state::State;

/// The account-management call named a key the emulator does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no account with that key")]
pub struct UnknownAccount;

/// A running emulator. Dropping it stops the server (without waiting); prefer
/// [`Emulator::shutdown`].
pub struct Emulator {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Emulator {
    /// Validates `cfg`, binds `127.0.0.1:cfg.port` (0 = a free port) and starts serving on the
    /// current tokio runtime. Virtual time starts now.
    pub async fn start(cfg: EmulatorConfig) -> anyhow::Result<Emulator> {
        cfg.validate().map_err(|m| anyhow::anyhow!("invalid emulator config: {m}"))?;
        let listener = TcpListener::bind(("127.0.0.1", cfg.port))
            .await
            .with_context(|| format!("binding 127.0.0.1:{}", cfg.port))?;
        let addr = listener.local_addr()?;
        let shared =
            Arc::new(Shared { state: Mutex::new(State::new(&cfg)), start: Instant::now(), time_scale: cfg.time_scale });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let server = tokio::spawn(http::serve(listener, shared.clone(), shutdown_rx));
        Ok(Emulator { shared, addr, shutdown_tx, server: Some(server) })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Virtual milliseconds since start.
    pub fn now_ms(&self) -> u64 {
        self.shared.now_ms()
    }

    /// The time-scale factor.
    pub fn time_scale(&self) -> f64 {
        self.shared.time_scale
    }

    /// Real duration of `virtual_ms` virtual milliseconds.
    pub fn real_duration(&self, virtual_ms: u64) -> std::time::Duration {
        self.shared.real_delay(virtual_ms)
    }

    /// Every protocol request received (up to `log_limit`), in arrival order. Control
    /// requests (`/_emulator/*`) are not included.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests_since(0)
    }

    /// Requests with `seq >= since`.
    pub fn requests_since(&self, since: u64) -> Vec<RecordedRequest> {
        self.shared.lock().requests_since(since)
    }

    /// Empties the request log (sequence numbers keep counting).
    pub fn clear_requests(&self) {
        self.shared.lock().clear_log();
    }

    /// Current random fault rates.
    pub fn faults(&self) -> Faults {
        self.shared.lock().faults
    }

    /// Replaces the random fault rates. Invalid rates (outside [0, 1] or summing above 1) are
    /// rejected with a message.
    pub fn set_faults(&self, faults: Faults) -> Result<(), String> {
        faults.validate()?;
        self.shared.lock().faults = faults;
        Ok(())
    }

    /// Queues `fault` for each of the next `n` protocol requests (after already queued ones).
    pub fn force_next(&self, n: usize, fault: Fault) {
        let mut st = self.shared.lock();
        for _ in 0..n {
            st.forced.push_back(fault.clone());
        }
    }

    /// Drops every queued forced fault.
    pub fn clear_forced(&self) {
        self.shared.lock().forced.clear();
    }

    /// Adds an account, or replaces the plan fields of an existing one (busy counts kept).
    pub fn add_account(&self, account: Account) -> Result<(), String> {
        if !key_well_formed(&account.key) {
            return Err("key must be 32 ASCII letters/digits".into());
        }
        let now = self.shared.now_ms();
        let mut st = self.shared.lock();
        st.advance(now);
        let key = account.key.clone();
        st.upsert_account(account);
        if let Some(i) = st.account_index(&key) {
            st.start_queued(i, now);
        }
        Ok(())
    }

    fn with_account<T>(&self, key: &str, f: impl FnOnce(&mut state::AccountState) -> T) -> Result<T, UnknownAccount> {
        let now = self.shared.now_ms();
        let mut st = self.shared.lock();
        st.advance(now);
        let i = st.account_index(key).ok_or(UnknownAccount)?;
        let out = f(st.account_mut(i));
        // Freed or added threads go to queued tasks at once.
        st.start_queued(i, now);
        Ok(out)
    }

    /// Sets the account's plan cap.
    pub fn set_threads(&self, key: &str, threads: u32) -> Result<(), UnknownAccount> {
        self.with_account(key, |a| a.account.threads = threads)
    }

    /// Activates or deactivates the account's plan.
    pub fn set_plan_active(&self, key: &str, active: bool) -> Result<(), UnknownAccount> {
        self.with_account(key, |a| a.account.plan_active = active)
    }

    /// Marks `n` more threads busy, as if used by other clients of the same account.
    pub fn occupy_threads(&self, key: &str, n: u32) -> Result<(), UnknownAccount> {
        self.with_account(key, |a| a.external_busy = a.external_busy.saturating_add(n))
    }

    /// Frees up to `n` threads previously taken with [`Emulator::occupy_threads`].
    pub fn release_threads(&self, key: &str, n: u32) -> Result<(), UnknownAccount> {
        self.with_account(key, |a| a.external_busy = a.external_busy.saturating_sub(n))
    }

    /// What threadsinfo would answer for `key` now.
    pub fn threads_info(&self, key: &str) -> Result<ThreadsInfo, UnknownAccount> {
        let now = self.shared.now_ms();
        let mut st = self.shared.lock();
        st.advance(now);
        let i = st.account_index(key).ok_or(UnknownAccount)?;
        Ok(st.threads_info(i))
    }

    /// A task's state now, or `None` when unknown or expired.
    pub fn task(&self, id: u64) -> Option<TaskInfo> {
        let now = self.shared.now_ms();
        let mut st = self.shared.lock();
        st.advance(now);
        st.task_info(id, now)
    }

    /// Counters since start.
    pub fn stats(&self) -> Stats {
        let now = self.shared.now_ms();
        let mut st = self.shared.lock();
        st.advance(now);
        st.stats
    }

    /// Stops accepting, closes every connection and waits for the server task.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(h) = self.server.take() {
            let _ = h.await;
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(h) = self.server.take() {
            h.abort();
        }
    }
}
