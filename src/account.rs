//! Account calls as pure builders and parsers (`threadsinfo`, `getbalance`), and the thread-budget
//! gate that sizes concurrent solves to the plan, as both seeds do with an orchestrator pool.

use std::collections::VecDeque;

use thiserror::Error;

use crate::codes::{self, Class};
use crate::config::{Config, REQUEST_TIMEOUT_MS, endpoint_url, normalise_base_url};
use crate::error::{ValidationError, invalid_config};
use crate::http::{self, ApiKey, HttpRequest, RequestKind, TransportError};
use crate::outcome::Failure;
use crate::registry::ACCOUNT_ANSWER_FROM;
use crate::reply::{self, Field, Reply};

/// The plan's thread cap and how many threads are busy now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadsInfo {
    /// The plan's thread cap.
    pub threads: u64,
    /// Threads busy now.
    pub working_threads: u64,
}

impl ThreadsInfo {
    /// A plan of `threads` with `working_threads` busy (a host rendering its own share of a plan).
    pub const fn new(threads: u64, working_threads: u64) -> ThreadsInfo {
        ThreadsInfo { threads, working_threads }
    }

    /// Threads free right now.
    pub fn free(&self) -> u64 {
        self.threads.saturating_sub(self.working_threads)
    }
}

/// The `threadsinfo` request (id 0, due at once) for `config`'s base URL and timeout.
pub fn threads_info_request(key: &ApiKey, config: &Config) -> Result<HttpRequest, ValidationError> {
    account_request(key, config, RequestKind::ThreadsInfo, "threadsinfo")
}

/// The `getbalance` request (id 0, due at once).
pub fn balance_request(key: &ApiKey, config: &Config) -> Result<HttpRequest, ValidationError> {
    account_request(key, config, RequestKind::Balance, "getbalance")
}

fn account_request(
    key: &ApiKey,
    config: &Config,
    kind: RequestKind,
    action: &str,
) -> Result<HttpRequest, ValidationError> {
    let base = normalise_base_url(&config.base_url)?;
    REQUEST_TIMEOUT_MS.check(config.request_timeout_ms)?;
    let body = http::FormWriter::new(&http::KeySlot::Key(key.clone()), 32).pair("action", action).finish();
    Ok(HttpRequest::form(0, kind, 0, endpoint_url(base, "/res.php"), body, config.request_timeout_ms))
}

/// The failure for an account request (`kind`) that got no reply: the code table's
/// `TRANSPORT_ERROR` row, transient.
pub fn transport_failure(kind: RequestKind, error: TransportError) -> Failure {
    let info = codes::lookup(codes::TRANSPORT_ERROR).unwrap_or(&codes::UNKNOWN);
    Failure {
        code: info.code.to_owned(),
        class: info.class,
        message: format!("{}: {} ({})", kind.as_str(), info.meaning, error.as_str()),
        retry_after_ms: info.retry_after_ms,
        field: None,
        task_id: None,
    }
}

/// Reads a `threadsinfo` reply; codes become failures classed by the code table. The body is
/// read as text (invalid UTF-8 becomes U+FFFD), as every host of the component passes it. Not
/// given the key, the account parsers quote no run of letters and digits as long as a key.
pub fn parse_threads_info(status: u16, body: &[u8]) -> Result<ThreadsInfo, Failure> {
    let text = crate::text::redact_key_shaped(String::from_utf8_lossy(body));
    match reply::parse(status, &text, ACCOUNT_ANSWER_FROM) {
        Reply::Threads { threads, working } => Ok(ThreadsInfo { threads, working_threads: working }),
        other => Err(reply_failure(other, "threadsinfo")),
    }
}

/// Reads a `getbalance` reply (JSON `request` or a bare decimal); the body is read as text.
pub fn parse_balance(status: u16, body: &[u8]) -> Result<f64, Failure> {
    let text = crate::text::redact_key_shaped(String::from_utf8_lossy(body));
    let bare = crate::text::number(&text);
    if let Some(balance) = bare.filter(|b| b.is_finite() && (200..300).contains(&status)) {
        return Ok(balance);
    }
    let reply = reply::parse(status, &text, ACCOUNT_ANSWER_FROM);
    let number = match &reply {
        Reply::Ok { value: Field::Str(s), .. } => crate::text::number(s),
        Reply::Ok { value: Field::Json(n), .. } => n.as_f64(),
        _ => None,
    };
    number.filter(|n| n.is_finite()).ok_or_else(|| reply_failure(reply, "getbalance"))
}

/// The failure for an account reply that is not the answer: its code, classed by the code table
/// (never unsolvable), or UNEXPECTED_REPLY.
pub(crate) fn reply_failure(reply: Reply, action: &str) -> Failure {
    let (info, code) = match &reply {
        Reply::Code { code, .. } => (codes::lookup_wire(code).unwrap_or(&codes::UNKNOWN), code.clone()),
        _ => {
            let info = codes::lookup(codes::UNEXPECTED_REPLY).unwrap_or(&codes::UNKNOWN);
            (info, info.code.to_owned())
        }
    };
    let what = match reply {
        Reply::Unexpected { status, what } => format!("HTTP {status} with {what}"),
        Reply::Code { .. } => info.meaning.to_owned(),
        _ => "a reply of the wrong kind".to_owned(),
    };
    Failure {
        code,
        // Not a row: "unsolvable" is about a captcha, and no fresh task can answer an account call.
        class: if info.class == Class::Unsolvable { Class::Permanent } else { info.class },
        message: format!("{action}: {what}"),
        retry_after_ms: info.retry_after_ms,
        field: None,
        task_id: None,
    }
}

/// A ticket handed out by [`ThreadGate::enter`].
pub type Ticket = u64;

/// Whether a solve may start. Not `#[non_exhaustive]` on purpose: a host acts on both answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Start now: a thread is reserved for it.
    Admitted,
    /// Wait: `position` solves are ahead of it (0 = next).
    Queued {
        /// Solves ahead of this one.
        position: u64,
    },
}

/// A ticket the gate does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("ticket {0} is not held by this gate")]
pub struct UnknownTicket(pub Ticket);

/// Admits at most `plan threads - reserve` solves at once and queues the rest in arrival order.
/// Pure bookkeeping: the host calls `enter` before a solve and `leave` after it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadGate {
    plan_threads: u64,
    reserve: u64,
    running: Vec<Ticket>,
    queue: VecDeque<Ticket>,
    next_ticket: Ticket,
}

impl ThreadGate {
    /// A gate for a plan of `plan_threads` keeping `reserve` threads spare (for manual runs or
    /// other clients of the same key). At least one thread must remain.
    pub fn new(plan_threads: u64, reserve: u64) -> Result<ThreadGate, ValidationError> {
        check_plan(plan_threads, reserve)?;
        Ok(ThreadGate { plan_threads, reserve, running: Vec::new(), queue: VecDeque::new(), next_ticket: 1 })
    }

    /// How many solves may run at once.
    pub fn capacity(&self) -> u64 {
        self.plan_threads - self.reserve
    }

    /// Solves running now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Solves waiting for a thread.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Asks to start a solve.
    pub fn enter(&mut self) -> (Ticket, Admission) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if self.queue.is_empty() && (self.running.len() as u64) < self.capacity() {
            self.running.push(ticket);
            return (ticket, Admission::Admitted);
        }
        self.queue.push_back(ticket);
        (ticket, Admission::Queued { position: self.queue.len() as u64 - 1 })
    }

    /// Where a ticket stands now.
    pub fn admission(&self, ticket: Ticket) -> Result<Admission, UnknownTicket> {
        if self.running.contains(&ticket) {
            return Ok(Admission::Admitted);
        }
        let position = self.queue.iter().position(|t| *t == ticket).ok_or(UnknownTicket(ticket))?;
        Ok(Admission::Queued { position: position as u64 })
    }

    /// Ends a running solve or withdraws a queued one; returns the tickets admitted as a result.
    pub fn leave(&mut self, ticket: Ticket) -> Result<Vec<Ticket>, UnknownTicket> {
        if let Some(i) = self.running.iter().position(|t| *t == ticket) {
            self.running.swap_remove(i);
        } else if let Some(i) = self.queue.iter().position(|t| *t == ticket) {
            self.queue.remove(i);
        } else {
            return Err(UnknownTicket(ticket));
        }
        Ok(self.admit_waiting())
    }

    /// Applies a new plan size (from a fresh `threadsinfo`); returns newly admitted tickets.
    /// Shrinking never stops running solves; it only delays admissions.
    pub fn set_plan(&mut self, plan_threads: u64) -> Result<Vec<Ticket>, ValidationError> {
        check_plan(plan_threads, self.reserve)?;
        self.plan_threads = plan_threads;
        Ok(self.admit_waiting())
    }

    fn admit_waiting(&mut self) -> Vec<Ticket> {
        let mut admitted = Vec::new();
        while (self.running.len() as u64) < self.capacity() {
            let Some(ticket) = self.queue.pop_front() else { break };
            self.running.push(ticket);
            admitted.push(ticket);
        }
        admitted
    }
}

fn check_plan(plan_threads: u64, reserve: u64) -> Result<(), ValidationError> {
    if plan_threads <= reserve {
        return Err(invalid_config(
            "reserve",
            format!("a reserve of {reserve} leaves no thread of a {plan_threads}-thread plan"),
        ));
    }
    Ok(())
}
