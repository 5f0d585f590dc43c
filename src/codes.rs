//! The error-code table: every code CaptchaAI (or this engine) can report, with its class, what
//! the engine does when it meets it at submit and while polling, and a retry-after hint.
//!
//! This is the single place that decides how a code is handled; the state machine only reads it.
//! Sources and the reasoning behind each row are in `../shared/docs/captchaai-api.md` §2.

/// What a failure means for the caller. In JSON: its [`Class::as_str`] name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Fix the key, plan, account or task before trying again; retrying unchanged cannot help.
    Permanent,
    /// Worth trying again later (see `retry_after_ms`).
    Transient,
    /// The service gave up on the captcha; a fresh task may succeed.
    Unsolvable,
}

impl Class {
    /// The snake_case name used in JSON, WIT and vectors.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Permanent => "permanent",
            Class::Transient => "transient",
            Class::Unsolvable => "unsolvable",
        }
    }

    /// The class with this name.
    pub fn parse(name: &str) -> Option<Class> {
        [Class::Permanent, Class::Transient, Class::Unsolvable].into_iter().find(|c| c.as_str() == name)
    }
}

/// What the engine does when a code arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The task is not solved yet: poll again after the poll interval.
    PollAgain,
    /// Stop with a failure of the row's class.
    Fail,
    /// Try the same step again after a backoff (bounded by retry budgets and the deadline).
    Retry,
    /// ERROR_ZERO_BALANCE: ask `threadsinfo` whether every thread is busy (wait and resubmit)
    /// or threads are free (no active plan: permanent).
    DiagnoseThreads,
    /// Wait for a free thread, then resubmit (within the deadline).
    WaitForThread,
    /// Drop this task id and submit a fresh task (bounded), then fail as unsolvable.
    Resubmit,
}

/// Who produces a code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Documented by CaptchaAI (docs, official SDK or live observation).
    Api,
    /// A 2captcha code CaptchaAI is not known to send; handled defensively.
    Legacy,
    /// Produced by this engine (validation, transport, deadlines, unreadable replies).
    Engine,
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// The code exactly as it appears on the wire (or the engine's own name).
    pub code: &'static str,
    /// Who produces the code.
    pub source: Source,
    /// The class of the failure when this code ends a solve.
    pub class: Class,
    /// What happens when the code answers an `in.php` submit.
    pub on_submit: Action,
    /// What happens when the code answers a `res.php` poll.
    pub on_poll: Action,
    /// How long to wait before trying again, where known.
    pub retry_after_ms: Option<u64>,
    /// What the code means, for humans.
    pub meaning: &'static str,
}

const fn row(
    code: &'static str,
    source: Source,
    class: Class,
    on_submit: Action,
    on_poll: Action,
    retry_after_ms: Option<u64>,
    meaning: &'static str,
) -> CodeInfo {
    CodeInfo { code, source, class, on_submit, on_poll, retry_after_ms, meaning }
}

use Action::*;
use Class::*;
use Source::*;

/// Engine code: the task failed validation before anything was sent.
pub const INVALID_TASK: &str = "INVALID_TASK";
/// Engine code: the configuration failed validation before anything was sent.
pub const INVALID_CONFIG: &str = "INVALID_CONFIG";
/// Engine code: the API key is malformed (checked locally; never sent).
pub const INVALID_KEY: &str = "INVALID_KEY";
/// Engine code: the host reported a transport error (or a request timed out).
pub const TRANSPORT_ERROR: &str = "TRANSPORT_ERROR";
/// Engine code: a reply that is neither an answer nor a known code (HTML page, empty body...).
pub const UNEXPECTED_REPLY: &str = "UNEXPECTED_REPLY";
/// Engine code: the solve's deadline passed before an answer arrived.
pub const DEADLINE_EXCEEDED: &str = "DEADLINE_EXCEEDED";
/// Wire code: CaptchaAI's (misspelled) "not ready yet".
pub const NOT_READY: &str = "CAPCHA_NOT_READY";
/// Wire code: no free thread (busy plan) or no plan at all.
pub const ZERO_BALANCE: &str = "ERROR_ZERO_BALANCE";
/// Wire code: the service gave up on the captcha.
pub const UNSOLVABLE: &str = "ERROR_CAPTCHA_UNSOLVABLE";

/// Retry-after for IP_BANNED: the ban lifts after five minutes.
pub const BAN_RETRY_AFTER_MS: u64 = 300_000;
/// How long to wait for a busy thread before resubmitting (the SDK's ~8 s).
pub const BUSY_WAIT_MS: u64 = 8_000;

/// The table. Order: not-ready, account, input, proxy, server, task, engine, legacy.
pub const TABLE: &[CodeInfo] = &[
    row(NOT_READY, Api, Transient, Retry, PollAgain, Some(5_000), "not solved yet (spelled without the T)"),
    row("CAPTCHA_NOT_READY", Api, Transient, Retry, PollAgain, Some(5_000), "not solved yet (defensive spelling)"),
    row("ERROR_WRONG_USER_KEY", Api, Permanent, Fail, Fail, None, "the key is malformed (must be 32 characters)"),
    row("ERROR_KEY_DOES_NOT_EXIST", Api, Permanent, Fail, Fail, None, "the key is unknown, or the account has no plan"),
    row(
        ZERO_BALANCE,
        Api,
        Transient,
        DiagnoseThreads,
        Retry,
        Some(BUSY_WAIT_MS),
        "no free threads: all busy, or no active plan",
    ),
    row(
        "IP_BANNED",
        Api,
        Permanent,
        Fail,
        Fail,
        Some(BAN_RETRY_AFTER_MS),
        "this IP is banned for 5 minutes after repeated bad-key requests",
    ),
    row("ERROR_PAGEURL", Api, Permanent, Fail, Fail, None, "pageurl is missing or invalid"),
    row("ERROR_GOOGLEKEY", Api, Permanent, Fail, Fail, None, "the sitekey is missing or blank"),
    row("ERROR_WRONG_GOOGLEKEY", Api, Permanent, Fail, Fail, None, "the sitekey is malformed"),
    row(
        "ERROR_BAD_TOKEN_OR_PAGEURL",
        Api,
        Permanent,
        Fail,
        Fail,
        None,
        "the sitekey and pageurl do not belong together (an iframe on another domain?)",
    ),
    row(
        "ERROR_BAD_PARAMETERS",
        Api,
        Permanent,
        Fail,
        Fail,
        None,
        "required parameters are missing or have the wrong type",
    ),
    row("ERROR_ZERO_CAPTCHA_FILESIZE", Api, Permanent, Fail, Fail, None, "the image is too small"),
    row("ERROR_TOO_BIG_CAPTCHA_FILESIZE", Api, Permanent, Fail, Fail, None, "the image is too big"),
    row("ERROR_IMAGE_DIMENSIONS_TOO_LARGE", Api, Permanent, Fail, Fail, None, "the image has too many pixels per side"),
    row("ERROR_WRONG_FILE_EXTENSION", Api, Permanent, Fail, Fail, None, "the image is not jpg, png or gif"),
    row("ERROR_IMAGE_TYPE_NOT_SUPPORTED", Api, Permanent, Fail, Fail, None, "the image type is not recognised"),
    row("ERROR_UPLOAD", Api, Permanent, Fail, Fail, None, "malformed upload or invalid base64"),
    row("ERROR_BAD_PROXY", Api, Permanent, Fail, Fail, None, "the proxy is marked bad: use another one"),
    row(
        "ERROR_PROXY_CONNECTION_FAILED",
        Api,
        Transient,
        Retry,
        Retry,
        Some(10_000),
        "the solver could not connect through the proxy",
    ),
    row("ERROR_SERVER_ERROR", Api, Transient, Retry, Retry, Some(10_000), "transient server error"),
    row("ERROR_INTERNAL_SERVER_ERROR", Api, Transient, Retry, Retry, Some(10_000), "transient internal server error"),
    row(
        UNSOLVABLE,
        Api,
        Unsolvable,
        Resubmit,
        Resubmit,
        None,
        "the service gave up on this captcha; a fresh task may work",
    ),
    row("ERROR_WRONG_ID_FORMAT", Api, Permanent, Fail, Fail, None, "the task id is not numeric (a client bug)"),
    row("ERROR_WRONG_CAPTCHA_ID", Api, Permanent, Fail, Fail, None, "the task id is unknown or expired"),
    row("ERROR_EMPTY_ACTION", Api, Permanent, Fail, Fail, None, "res.php was called without an action (a client bug)"),
    row(INVALID_TASK, Engine, Permanent, Fail, Fail, None, "the task failed validation; nothing was sent"),
    row(INVALID_CONFIG, Engine, Permanent, Fail, Fail, None, "the configuration failed validation; nothing was sent"),
    row(INVALID_KEY, Engine, Permanent, Fail, Fail, None, "the API key is malformed; nothing was sent"),
    row(TRANSPORT_ERROR, Engine, Transient, Retry, Retry, Some(5_000), "the request failed in transport or timed out"),
    row(
        UNEXPECTED_REPLY,
        Engine,
        Transient,
        Retry,
        Retry,
        Some(5_000),
        "a reply that is neither an answer nor a known code (HTML 5xx page, empty body)",
    ),
    row(DEADLINE_EXCEEDED, Engine, Transient, Fail, Fail, None, "no answer before the solve's deadline"),
    row("ERROR_DOMAIN_NOT_ALLOWED", Legacy, Permanent, Fail, Fail, None, "the domain is not allowed"),
    row("ERROR_CAPTCHAIMAGE_BLOCKED", Legacy, Permanent, Fail, Fail, None, "the image is marked unrecognisable"),
    row(
        "ERROR_BAD_DUPLICATES",
        Legacy,
        Unsolvable,
        Resubmit,
        Resubmit,
        None,
        "not enough matching answers within the allowed tries",
    ),
    row("ERROR_IP_NOT_ALLOWED", Legacy, Permanent, Fail, Fail, None, "this IP is not on the account's allow list"),
    row("ERROR_IP_ADDRES", Legacy, Permanent, Fail, Fail, None, "the pingback IP does not match"),
    row(
        "ERROR_TOKEN_EXPIRED",
        Legacy,
        Permanent,
        Fail,
        Fail,
        None,
        "the challenge token has expired: fetch a fresh one",
    ),
    row("ERROR_DUPLICATE_REPORT", Legacy, Permanent, Fail, Fail, None, "this task was already reported"),
    row("REPORT_NOT_RECORDED", Legacy, Permanent, Fail, Fail, None, "the report was not recorded"),
    row(
        "ERROR_NO_SLOT_AVAILABLE",
        Legacy,
        Transient,
        WaitForThread,
        Retry,
        Some(5_000),
        "no slot free (a 2captcha capacity code)",
    ),
    row("MAX_USER_TURN", Legacy, Transient, Retry, Retry, Some(10_000), "too many requests: slow down"),
    row("ERROR_TOO_MUCH_REQUESTS", Legacy, Transient, Retry, Retry, Some(10_000), "too many requests: slow down"),
    row(
        NUMBERED,
        Legacy,
        Transient,
        Retry,
        Retry,
        Some(10_000),
        "a numbered 2captcha rate-limit code (`ERROR: 1001`...)",
    ),
];

/// The row for numbered codes such as `ERROR: 1001`; matched by prefix.
pub const NUMBERED: &str = "ERROR: ";

/// The row used for codes that start with `ERROR` but are in no table: fail fast, because
/// resending an unchanged request only burns attempts.
pub const UNKNOWN: CodeInfo =
    row("ERROR_*", Api, Permanent, Fail, Fail, None, "an error code this engine does not know");

/// Looks a code up (wire or engine). Codes starting with `ERROR` that are not in the table get
/// [`UNKNOWN`]; anything else (a word that is not a code) gets `None`.
pub fn lookup(code: &str) -> Option<&'static CodeInfo> {
    TABLE.iter().find(|info| info.code == code).or_else(|| lookup_wire(code))
}

/// Looks up a code that arrived from the service. Engine codes are not wire codes, so a reply
/// reading `INVALID_TASK` is not mistaken for one.
pub fn lookup_wire(code: &str) -> Option<&'static CodeInfo> {
    if let Some(info) = TABLE.iter().find(|info| info.code == code && info.source != Source::Engine) {
        return Some(info);
    }
    if is_numbered(code) {
        return TABLE.iter().find(|info| info.code == NUMBERED);
    }
    if code.starts_with("ERROR") && is_code_shaped(code) {
        return Some(&UNKNOWN);
    }
    None
}

/// Whether `text` (already trimmed) is a bare wire code: a table code, `ERROR_*`, or `ERROR: NNNN`.
pub fn is_wire_code(text: &str) -> bool {
    lookup_wire(text).is_some()
}

fn is_numbered(code: &str) -> bool {
    code.strip_prefix(NUMBERED).is_some_and(|n| !n.is_empty() && n.len() <= 8 && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_code_shaped(code: &str) -> bool {
    code.len() <= 64 && code.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether the code is a validation failure found before anything was sent (task, config or
/// key): the caller's input is at fault.
pub fn is_validation(code: &str) -> bool {
    matches!(code, INVALID_TASK | INVALID_CONFIG | INVALID_KEY)
}

/// Where a failure comes from, so a host can answer its own clients without reading codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The task, config or key was refused before anything was sent: fix the input.
    Input,
    /// CaptchaAI answered with this code (or kept every thread busy).
    Service,
    /// No usable answer: transport errors, unreadable replies, or the deadline passed.
    NoAnswer,
}

impl Origin {
    /// The snake_case name used in JSON and vectors.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Input => "input",
            Origin::Service => "service",
            Origin::NoAnswer => "no_answer",
        }
    }
}

/// The origin of a failure with this code: engine validation codes are `Input`, the engine's
/// other codes `NoAnswer`, and every wire code (known or not) `Service`.
pub fn origin(code: &str) -> Origin {
    match TABLE.iter().find(|info| info.code == code && info.source == Source::Engine) {
        Some(_) if is_validation(code) => Origin::Input,
        Some(_) => Origin::NoAnswer,
        None => Origin::Service,
    }
}

/// Whether the code means "not ready yet" (either spelling).
pub fn is_not_ready(code: &str) -> bool {
    lookup_wire(code).is_some_and(|info| info.on_poll == Action::PollAgain)
}
