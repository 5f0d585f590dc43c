//! An independent oracle: what the README's tables say a solve must do against a scripted
//! upstream, written from README "Outcomes and error codes", "Config" and the task table, and
//! from the rows of `src/codes.rs` (as a reader of the table, not its code). It shares nothing
//! with `solve.rs` and does not read the engine's table (`captchaai_engine::codes()`): its own
//! small table below lists every code the fake upstream sends. It predicts every request (kind
//! and due time) and the outcome, for solves made from the tables alone and for solves made with
//! a learned solve-times model ([`Waits::learned`]), with a host that sends each request when it
//! is due or one that stalls once ([`Stall`]).

use captchaai_engine::{Class, Config, RequestKind, TransportError};

use crate::upstream::{Meaning, Upstream};

/// A captcha type as the README's task table gives it: first wait, poll interval, deadline and
/// token lifetime.
#[derive(Clone, Copy, Debug)]
pub struct TypeRow {
    pub name: &'static str,
    pub task_json: &'static str,
    pub first_wait_ms: u64,
    pub poll_interval_ms: u64,
    pub deadline_ms: u64,
    pub token_ttl_ms: Option<u64>,
}

/// The types the simulation solves (answers are plain text for all of them).
pub const TYPES: &[TypeRow] = &[
    TypeRow {
        name: "turnstile",
        task_json: r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#,
        first_wait_ms: 13_000,
        poll_interval_ms: 5_000,
        deadline_ms: 120_000,
        token_ttl_ms: Some(300_000),
    },
    TypeRow {
        name: "recaptcha_v2",
        task_json: r#"{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"https://example.com/form","invisible":true}"#,
        first_wait_ms: 26_000,
        poll_interval_ms: 5_000,
        deadline_ms: 120_000,
        token_ttl_ms: Some(120_000),
    },
    TypeRow {
        name: "recaptcha_v3",
        task_json: r#"{"type":"recaptcha_v3","sitekey":"6LdyC2cUAAAAACGuDKpXeDorzUDWXmdqeg-xy696","pageurl":"https://example.com/","action":"login","min_score":0.3}"#,
        first_wait_ms: 10_000,
        poll_interval_ms: 5_000,
        deadline_ms: 120_000,
        token_ttl_ms: Some(120_000),
    },
    TypeRow {
        name: "image",
        task_json: r#"{"type":"image","image":"iVBORw0KGgoAAAANSUhEUgAAAHgAAAAoCAIAAAC6iKlyAAAB4UlEQVR42u3Q1yIQAAAF0Ks0aKm0qJSG9pS0t4aEJu2lQgulPbVJOxTS0J5C0dCm0kbay2pp0J5/cZ/uJ5yDpOs376Tcf/jk+aus1+8+fP7y/ddfA8MixiVMypavVNnCslad+o2aWrds3a5jF7uevR37DnAZMnzU2PEek6b6+M6au2Dx0hX+ges2Bm0Ji9i5e9/BI1ExJ0+dPX8p8dqN2/fSHjx+9jIz523up/xvP/+gYGGj4qXKlKtoXrV6Tat6DZs0t2nVtkPnbj3s+zj3HzR42Mgx49wnTvGePnPO/EVLlq9avXbD5pDQbTsi9x44fCz6RPyZcxevXE2+dTc1/dHTFxnZb95/zPv64/e/AoWKFitZ2rSCWZVqNWrXbdC4WQvbNu07de3ey8Gp30DXoSNGu03wnOw1bcbseQv9lq0MWLN+U/DW8O279uw/dPR4bNzphAuXaX6NcPzQCMcPjXD80AjHD41w/NAIxw+NcPzQCMcPjXD80AjHD41w/NAIxw+NcPzQCMcPjXD80AjHD41w/NAIxw+NcPzQCMcPjXD80AjHD41w/NAIxw+NcPzQCMcPjXD80AjHD41w/NAIxw+NcPzQCMcPjXD80AjHD41w/NAIxw+NcPzQCMcPjXD8/wEGW82W5hSx/AAAAABJRU5ErkJggg==","numeric":1,"min_len":4}"#,
        first_wait_ms: 1_000,
        poll_interval_ms: 5_000,
        deadline_ms: 60_000,
        token_ttl_ms: None,
    },
];

/// What a code makes a solve do, per the README and the rows of `src/codes.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    /// Not ready: poll again after the poll interval.
    PollAgain,
    /// Try the same step again after a backoff (bounded).
    Retry,
    /// ERROR_ZERO_BALANCE at submit: ask threadsinfo.
    Diagnose,
    /// A capacity code at submit: wait 8 s for a thread, then submit again.
    WaitThread,
    /// Unsolvable: a fresh task (bounded), then fail as unsolvable.
    Fresh,
    Fail,
}

/// `(code, class, at submit, while polling, retry-after)`.
type Row = (&'static str, Class, Act, Act, Option<u64>);

use Act::*;
use Class::*;

/// The codes the fake upstream sends, and the engine's own codes for what is not a code.
const ROWS: &[Row] = &[
    ("CAPCHA_NOT_READY", Transient, Retry, PollAgain, Some(5_000)),
    ("CAPTCHA_NOT_READY", Transient, Retry, PollAgain, Some(5_000)),
    ("ERROR_ZERO_BALANCE", Transient, Diagnose, Retry, Some(8_000)),
    ("IP_BANNED", Permanent, Fail, Fail, Some(300_000)),
    ("ERROR_BAD_PARAMETERS", Permanent, Fail, Fail, None),
    ("ERROR_PAGEURL", Permanent, Fail, Fail, None),
    ("ERROR_KEY_DOES_NOT_EXIST", Permanent, Fail, Fail, None),
    ("ERROR_WRONG_USER_KEY", Permanent, Fail, Fail, None),
    ("ERROR_BAD_TOKEN_OR_PAGEURL", Permanent, Fail, Fail, None),
    ("ERROR_BAD_PROXY", Permanent, Fail, Fail, None),
    ("ERROR_WRONG_CAPTCHA_ID", Permanent, Fail, Fail, None),
    ("ERROR_SERVER_ERROR", Transient, Retry, Retry, Some(10_000)),
    ("ERROR_INTERNAL_SERVER_ERROR", Transient, Retry, Retry, Some(10_000)),
    ("ERROR_PROXY_CONNECTION_FAILED", Transient, Retry, Retry, Some(10_000)),
    ("ERROR_CAPTCHA_UNSOLVABLE", Unsolvable, Fresh, Fresh, None),
    ("ERROR: 1001", Transient, Retry, Retry, Some(10_000)),
    ("MAX_USER_TURN", Transient, Retry, Retry, Some(10_000)),
    ("ERROR_TOO_MUCH_REQUESTS", Transient, Retry, Retry, Some(10_000)),
    ("ERROR_NO_SLOT_AVAILABLE", Transient, WaitThread, Retry, Some(5_000)),
    ("TRANSPORT_ERROR", Transient, Retry, Retry, Some(5_000)),
    ("UNEXPECTED_REPLY", Transient, Retry, Retry, Some(5_000)),
    ("DEADLINE_EXCEEDED", Transient, Fail, Fail, None),
];

/// README: "unknown `ERROR_*` codes" are permanent.
const UNKNOWN: Row = ("ERROR_*", Permanent, Fail, Fail, None);

fn row(code: &str) -> Row {
    ROWS.iter().copied().find(|r| r.0 == code).unwrap_or(UNKNOWN)
}

/// How long every thread being busy makes a submit wait (the SDK's ~8 s).
const BUSY_WAIT_MS: u64 = 8_000;

/// A predicted failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fail {
    pub code: String,
    pub class: Class,
    pub retry_after_ms: Option<u64>,
    pub task_id: Option<String>,
}

/// A predicted outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Solved {
        answer: String,
        task_id: String,
        submitted_at: u64,
        solved_at: u64,
        polls: u32,
        attempts: u32,
        expires_at: Option<u64>,
    },
    Failed(Fail),
}

/// The prediction for one solve: every request (kind and due time, folded into `fingerprint`),
/// when the outcome is known, and the outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prediction {
    pub sends: u32,
    pub fingerprint: u64,
    pub ended_at: u64,
    pub outcome: Outcome,
    /// Whether a poll waited out a learned gap instead of the interval.
    pub gap_taken: bool,
}

/// Folds one request into a transcript fingerprint.
pub fn fold(fingerprint: u64, kind: RequestKind, at: u64) -> u64 {
    crate::rng::mix(fingerprint ^ crate::rng::mix(at.wrapping_mul(4).wrapping_add(kind as u64 + 1)))
}

/// The effective waits: config values where set, else the type's (README "Config"); with a
/// learned model, its first wait and gap.
pub struct Waits {
    pub first_wait_ms: u64,
    pub poll_interval_ms: u64,
    pub deadline_ms: u64,
    pub gap: Option<Gap>,
}

/// A learned gap (`Solve::with_solve_times`): after `after_polls` polls of the first task that
/// found nothing, the next poll waits `wait_ms`, longer than the interval, unless that would
/// reach the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    pub after_polls: u32,
    pub wait_ms: u64,
}

impl Waits {
    pub fn of(row: &TypeRow, config: &Config) -> Waits {
        Waits {
            first_wait_ms: config.initial_wait_ms.unwrap_or(row.first_wait_ms),
            poll_interval_ms: config.poll_interval_ms.unwrap_or(row.poll_interval_ms),
            deadline_ms: config.deadline_ms.unwrap_or(row.deadline_ms),
            gap: None,
        }
    }

    /// The waits of a solve created with a model whose first wait is `learned_first_wait_ms`
    /// (`SolveTimes::first_wait_ms`): used where the config sets none, kept one interval before
    /// the deadline, and dropped for the table's if that leaves it outside `initial_wait_ms`'s
    /// 1-300 s. `gap` is the one the solve was planned with; it must lie within the bounds the
    /// rule documents (`ADAPTIVE` in `registry.rs`: longer than the interval, its poll before the
    /// deadline, none from a model too young for a first wait), else the error says how.
    pub fn learned(
        row: &TypeRow,
        config: &Config,
        learned_first_wait_ms: Option<u64>,
        gap: Option<Gap>,
    ) -> Result<Waits, String> {
        let mut waits = Waits::of(row, config);
        if let (None, Some(learned)) = (config.initial_wait_ms, learned_first_wait_ms) {
            let kept = learned.min(waits.deadline_ms.saturating_sub(waits.poll_interval_ms));
            if (1_000..=300_000).contains(&kept) {
                waits.first_wait_ms = kept;
            }
        }
        if let Some(gap) = gap {
            let last_regular =
                waits.first_wait_ms + u64::from(gap.after_polls.saturating_sub(1)) * waits.poll_interval_ms;
            if gap.after_polls == 0
                || gap.wait_ms <= waits.poll_interval_ms
                || last_regular + gap.wait_ms >= waits.deadline_ms
            {
                return Err(format!(
                    "a learned gap out of bounds: {gap:?} with {:?}",
                    (waits.first_wait_ms, waits.poll_interval_ms, waits.deadline_ms)
                ));
            }
            if learned_first_wait_ms.is_none() {
                return Err(format!("a gap {gap:?} from a model that gives no first wait"));
            }
        }
        waits.gap = gap;
        Ok(waits)
    }
}

/// A host that stalls once: before sending its request number `before_send` (0-based), it sleeps
/// `ms` longer, then asks the solve for its output again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub before_send: u32,
    pub ms: u64,
}

/// When the last-poll window of a solve of `ty` submitted at `start` ends (README "The
/// contract"): the submit plus the type's token lifetime, where the table gives one and it ends
/// after the deadline. A host asking for its output at or after the deadline, the solve waiting
/// to poll its task, sends that poll once, due then, while the window is open.
pub fn window_end(ty: &TypeRow, start: u64, deadline: u64) -> Option<u64> {
    ty.token_ttl_ms.map(|ttl| start + ttl).filter(|&end| end > deadline)
}

/// Predicts a solve of `ty` under `config` with `waits` (from [`Waits::of`] or
/// [`Waits::learned`]) created at `start`, whose host may `stall`, against `upstream` (a fresh
/// one built from the solve's seed).
pub fn predict(
    ty: &TypeRow,
    config: &Config,
    waits: &Waits,
    start: u64,
    stall: Option<Stall>,
    upstream: &mut Upstream,
) -> Prediction {
    let deadline = start + waits.deadline_ms;
    let window_end = window_end(ty, start, deadline);
    let timeout = config.request_timeout_ms;
    let mut sends = 0;
    let mut fingerprint = 0;
    let mut task_id: Option<String> = None;
    let (mut attempt, mut submit_retries, mut poll_errors, mut polls) = (1u32, 0u32, 0u32, 0u32);
    let (mut kind, mut at) = (RequestKind::Submit, start);
    // The failure the solve reports if its next request cannot go out before the deadline.
    let mut pending: Option<Fail> = None;
    let mut gap_taken = false;
    let fail = |code: &str, task_id: &Option<String>| {
        let r = row(code);
        Fail { code: code.to_owned(), class: r.1, retry_after_ms: r.4, task_id: task_id.clone() }
    };
    loop {
        // When the request goes out: when due, or when a stalled host wakes. Past the deadline,
        // only the last poll goes, due when the host asked, and only while the window is open.
        let mut sent_at = at;
        let mut last_poll = false;
        if let Some(stall) = stall.filter(|stall| stall.before_send == sends) {
            sent_at = at + stall.ms;
            if sent_at >= deadline {
                if kind == RequestKind::Poll && window_end.is_some_and(|end| sent_at < end) {
                    (at, last_poll) = (sent_at, true);
                } else {
                    let failure = pending.unwrap_or_else(|| fail("DEADLINE_EXCEEDED", &task_id));
                    return Prediction {
                        sends,
                        fingerprint,
                        ended_at: sent_at,
                        outcome: Outcome::Failed(failure),
                        gap_taken,
                    };
                }
            }
        }
        sends += 1;
        fingerprint = fold(fingerprint, kind, at);
        let delivery = upstream.respond(kind, sent_at, task_id.as_deref(), timeout);
        let now = sent_at + delivery.after_ms;
        if kind == RequestKind::Poll {
            polls += 1;
        }
        // What the reply amounts to, as a code (or an answer, a task id, thread counts).
        let code: &str = match &delivery.meaning {
            Meaning::Transport(_) | Meaning::Timeout => "TRANSPORT_ERROR",
            Meaning::Unreadable => "UNEXPECTED_REPLY",
            Meaning::NotReady => "CAPCHA_NOT_READY",
            Meaning::Code(code) => code,
            Meaning::TaskId(_) | Meaning::Answer(_) | Meaning::Threads { .. } => "",
        };
        let done = move |outcome: Outcome| Prediction { sends, fingerprint, ended_at: now, outcome, gap_taken };
        // The next request: (kind, due, the failure reported if that is at or after the deadline).
        let next: (RequestKind, u64, Option<Fail>);
        match (kind, &delivery.meaning) {
            (RequestKind::Submit, Meaning::TaskId(id)) => {
                task_id = Some(id.to_string());
                poll_errors = 0;
                next = (RequestKind::Poll, now + waits.first_wait_ms, None);
            }
            // The last poll's answer may have waited since the submit: usable until the
            // window's end, and only handed out before then.
            (RequestKind::Poll, Meaning::Answer(_)) if last_poll && window_end.is_some_and(|end| now >= end) => {
                return done(Outcome::Failed(fail("DEADLINE_EXCEEDED", &task_id)));
            }
            (RequestKind::Poll, Meaning::Answer(answer)) => {
                return done(Outcome::Solved {
                    answer: answer.clone(),
                    task_id: task_id.clone().unwrap_or_default(),
                    submitted_at: start,
                    solved_at: now,
                    polls,
                    attempts: attempt,
                    expires_at: if last_poll { window_end } else { ty.token_ttl_ms.map(|ttl| now + ttl) },
                });
            }
            (RequestKind::ThreadsInfo, meaning) => {
                let busy_fail = Fail {
                    code: "ERROR_ZERO_BALANCE".into(),
                    class: Transient,
                    retry_after_ms: Some(BUSY_WAIT_MS),
                    task_id: task_id.clone(),
                };
                match meaning {
                    // Zero threads, or free threads while ERROR_ZERO_BALANCE: no active plan.
                    Meaning::Threads { threads, working } if *threads == 0 || working < threads => {
                        return done(Outcome::Failed(Fail { retry_after_ms: None, class: Permanent, ..busy_fail }));
                    }
                    // A permanent code that fails a submit fails here too (IP_BANNED, a bad key).
                    Meaning::Code(code) if row(code).1 == Permanent && row(code).2 == Fail => {
                        return done(Outcome::Failed(fail(code, &task_id)));
                    }
                    // All busy, or no usable answer: wait for a thread and submit again.
                    _ => next = (RequestKind::Submit, now + BUSY_WAIT_MS, Some(busy_fail)),
                }
            }
            (step, _) => {
                let r = row(code);
                let act = if step == RequestKind::Poll { r.3 } else { r.2 };
                let failure = fail(code, &task_id);
                next = match (act, step) {
                    (PollAgain, RequestKind::Poll) => {
                        poll_errors = 0;
                        let wait = match waits.gap {
                            Some(gap) if attempt == 1 && polls == gap.after_polls && now + gap.wait_ms < deadline => {
                                gap_taken = true;
                                gap.wait_ms
                            }
                            _ => waits.poll_interval_ms,
                        };
                        (RequestKind::Poll, now + wait, None)
                    }
                    (Retry, RequestKind::Poll) => {
                        poll_errors += 1;
                        if poll_errors > config.max_poll_errors {
                            return done(Outcome::Failed(failure));
                        }
                        (RequestKind::Poll, now + waits.poll_interval_ms.max(r.4.unwrap_or(0)), None)
                    }
                    (Retry | PollAgain, _) => {
                        if submit_retries >= config.max_submit_retries {
                            return done(Outcome::Failed(failure));
                        }
                        submit_retries += 1;
                        // README: from the code's retry-after, doubling, capped at 60 s.
                        let base = r.4.unwrap_or(5_000);
                        let wait = (base << (submit_retries - 1).min(16)).min(60_000);
                        (RequestKind::Submit, now + wait, Some(failure))
                    }
                    (Diagnose, _) => {
                        let pending = Fail {
                            code: "ERROR_ZERO_BALANCE".into(),
                            class: Transient,
                            retry_after_ms: Some(BUSY_WAIT_MS),
                            task_id: task_id.clone(),
                        };
                        (RequestKind::ThreadsInfo, now, Some(pending))
                    }
                    (WaitThread, _) => {
                        let busy = Fail {
                            code: "ERROR_ZERO_BALANCE".into(),
                            class: Transient,
                            retry_after_ms: Some(BUSY_WAIT_MS),
                            task_id: task_id.clone(),
                        };
                        (RequestKind::Submit, now + BUSY_WAIT_MS, Some(busy))
                    }
                    (Fresh, _) => {
                        if attempt > config.unsolvable_retries {
                            return done(Outcome::Failed(failure));
                        }
                        attempt += 1;
                        task_id = None;
                        submit_retries = 0;
                        poll_errors = 0;
                        (RequestKind::Submit, now, Some(Fail { task_id: None, ..failure }))
                    }
                    (Fail, _) => return done(Outcome::Failed(failure)),
                };
            }
        }
        // Nothing is ever sent at or after the deadline: the solve fails with the reason it was
        // waiting (or DEADLINE_EXCEEDED).
        if next.1 >= deadline {
            return done(Outcome::Failed(next.2.unwrap_or_else(|| fail("DEADLINE_EXCEEDED", &task_id))));
        }
        (kind, at, pending) = next;
    }
}

/// The transport error a host reports for a delivery (for the driver).
pub fn transport_of(meaning: &Meaning) -> Option<TransportError> {
    match meaning {
        Meaning::Transport(e) => Some(*e),
        Meaning::Timeout => Some(TransportError::Timeout),
        _ => None,
    }
}
