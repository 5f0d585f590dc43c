//! The error-code table: every code CaptchaAI (or this engine) can report, with its class, what
//! the engine does when it meets it at each step (a submit, a poll, the `threadsinfo` question),
//! a retry-after hint, and how retries are spaced.
//!
//! This is the single place that decides how a code is handled; the state machine only reads it
//! (h11's rule). Hosts read it through [`codes`]. Sources and the reasoning behind each row are in
//! `../shared/docs/captchaai-api.md` §2.

/// What a failure means for the caller. In JSON: its [`Class::as_str`] name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
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

/// Where a failure comes from, so a host can answer its own clients without reading codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

/// Who produces a code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// Documented by CaptchaAI (docs, official SDK or live observation).
    Api,
    /// A 2captcha code CaptchaAI is not known to send; handled defensively.
    Legacy,
    /// Produced by this engine (validation, transport, deadlines, unreadable replies).
    Engine,
}

/// One code as hosts see it: a read-only view of its row, listed by [`codes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode(&'static CodeInfo);

impl ErrorCode {
    /// The code exactly as it appears on the wire (or the engine's own name; `ERROR: ` stands
    /// for the numbered codes `ERROR: 1001`...).
    pub fn code(self) -> &'static str {
        self.0.code
    }

    /// Who produces the code.
    pub fn source(self) -> Source {
        self.0.source
    }

    /// The class of the failure when this code ends a solve.
    pub fn class(self) -> Class {
        self.0.class
    }

    /// Where a failure with this code comes from.
    pub fn origin(self) -> Origin {
        self.0.origin()
    }

    /// How long to wait before trying again, where known.
    pub fn retry_after_ms(self) -> Option<u64> {
        self.0.retry_after_ms
    }

    /// What the code means, for humans.
    pub fn meaning(self) -> &'static str {
        self.0.meaning
    }
}

/// Every code the engine knows, in table order: not-ready, account, input, proxy, server, task,
/// engine, legacy. A code starting with `ERROR` that is not listed is a permanent failure.
pub fn codes() -> impl ExactSizeIterator<Item = ErrorCode> + Clone {
    TABLE.iter().map(ErrorCode)
}

/// What the engine does when a code arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// The task is not solved yet: poll again after the poll interval.
    PollAgain,
    /// Stop with a failure of the row's class.
    Fail,
    /// Try the same step again after a backoff ([`SUBMIT_BACKOFF`], [`POLL_BACKOFF`]), bounded by
    /// retry budgets and the deadline.
    Retry,
    /// ERROR_ZERO_BALANCE: ask `threadsinfo` whether every thread is busy (wait and resubmit)
    /// or threads are free (no active plan: permanent).
    DiagnoseThreads,
    /// Wait [`BUSY_WAIT_MS`] for a free thread, then resubmit (within the deadline).
    WaitForThread,
    /// Drop this task id and submit a fresh task (bounded), then fail as unsolvable.
    Resubmit,
}

/// What the engine does with a code at each step of a solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Steps {
    /// The code answers an `in.php` submit.
    pub submit: Action,
    /// The code answers a `res.php` poll.
    pub poll: Action,
    /// The code answers the `threadsinfo` question asked after ERROR_ZERO_BALANCE: [`Action::Fail`]
    /// or [`Action::WaitForThread`].
    pub threads_info: Action,
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CodeInfo {
    /// The code exactly as it appears on the wire (or the engine's own name).
    pub code: &'static str,
    /// Who produces the code.
    pub source: Source,
    /// The class of the failure when this code ends a solve.
    pub class: Class,
    /// What happens at each step.
    pub on: Steps,
    /// How long to wait before trying again, where known; the first retry's wait.
    pub retry_after_ms: Option<u64>,
    /// What the code means, for humans.
    pub meaning: &'static str,
}

impl CodeInfo {
    /// The origin of a failure with this code: engine validation codes are `Input`, the engine's
    /// other codes `NoAnswer`, and every wire code (known or not) `Service`.
    pub(crate) fn origin(&self) -> Origin {
        match self.source {
            Source::Engine if is_validation(self.code) => Origin::Input,
            Source::Engine => Origin::NoAnswer,
            Source::Api | Source::Legacy => Origin::Service,
        }
    }
}

const fn row(
    code: &'static str,
    source: Source,
    class: Class,
    on: Steps,
    retry_after_ms: Option<u64>,
    meaning: &'static str,
) -> CodeInfo {
    CodeInfo { code, source, class, on, retry_after_ms, meaning }
}

use Action::*;
use Class::*;
use Source::*;

/// Fail wherever it arrives.
const FAIL: Steps = Steps { submit: Fail, poll: Fail, threads_info: Fail };
/// Try the step again (a `threadsinfo` answer that is no answer: wait for a thread).
const RETRY: Steps = Steps { submit: Retry, poll: Retry, threads_info: WaitForThread };
/// Not ready: poll on (a submit or `threadsinfo` answered so is retried or waited on).
const NOT_YET: Steps = Steps { submit: Retry, poll: PollAgain, threads_info: WaitForThread };
/// The service gave up on the task: submit a fresh one.
const RESUBMIT: Steps = Steps { submit: Resubmit, poll: Resubmit, threads_info: WaitForThread };

/// Engine code: the task failed validation before anything was sent.
pub(crate) const INVALID_TASK: &str = "INVALID_TASK";
/// Engine code: the configuration failed validation before anything was sent.
pub(crate) const INVALID_CONFIG: &str = "INVALID_CONFIG";
/// Engine code: the API key is malformed (checked locally; never sent).
pub(crate) const INVALID_KEY: &str = "INVALID_KEY";
/// Engine code: the host reported a transport error (or a request timed out).
pub(crate) const TRANSPORT_ERROR: &str = "TRANSPORT_ERROR";
/// Engine code: a reply that is neither an answer nor a known code (HTML page, empty body...).
pub(crate) const UNEXPECTED_REPLY: &str = "UNEXPECTED_REPLY";
/// Engine code: the solve's deadline passed before an answer arrived.
pub(crate) const DEADLINE_EXCEEDED: &str = "DEADLINE_EXCEEDED";
/// Wire code: CaptchaAI's (misspelled) "not ready yet".
pub(crate) const NOT_READY: &str = "CAPCHA_NOT_READY";
/// Wire code: no free thread (busy plan) or no plan at all.
pub(crate) const ZERO_BALANCE: &str = "ERROR_ZERO_BALANCE";
/// Wire code: the service gave up on the captcha.
pub(crate) const UNSOLVABLE: &str = "ERROR_CAPTCHA_UNSOLVABLE";

// Wire codes the endpoint ([`crate::endpoint`]) answers with, each a row of [`TABLE`].
pub(crate) const WRONG_USER_KEY: &str = "ERROR_WRONG_USER_KEY";
pub(crate) const KEY_DOES_NOT_EXIST: &str = "ERROR_KEY_DOES_NOT_EXIST";
pub(crate) const PAGEURL: &str = "ERROR_PAGEURL";
pub(crate) const GOOGLEKEY: &str = "ERROR_GOOGLEKEY";
pub(crate) const WRONG_GOOGLEKEY: &str = "ERROR_WRONG_GOOGLEKEY";
pub(crate) const BAD_PARAMETERS: &str = "ERROR_BAD_PARAMETERS";
pub(crate) const ZERO_CAPTCHA_FILESIZE: &str = "ERROR_ZERO_CAPTCHA_FILESIZE";
pub(crate) const TOO_BIG_CAPTCHA_FILESIZE: &str = "ERROR_TOO_BIG_CAPTCHA_FILESIZE";
pub(crate) const IMAGE_DIMENSIONS_TOO_LARGE: &str = "ERROR_IMAGE_DIMENSIONS_TOO_LARGE";
pub(crate) const WRONG_FILE_EXTENSION: &str = "ERROR_WRONG_FILE_EXTENSION";
pub(crate) const UPLOAD: &str = "ERROR_UPLOAD";
pub(crate) const BAD_PROXY: &str = "ERROR_BAD_PROXY";
pub(crate) const SERVER_ERROR: &str = "ERROR_SERVER_ERROR";
pub(crate) const WRONG_ID_FORMAT: &str = "ERROR_WRONG_ID_FORMAT";
pub(crate) const WRONG_CAPTCHA_ID: &str = "ERROR_WRONG_CAPTCHA_ID";
pub(crate) const EMPTY_ACTION: &str = "ERROR_EMPTY_ACTION";
pub(crate) const NO_SLOT_AVAILABLE: &str = "ERROR_NO_SLOT_AVAILABLE";
/// Not an error: CaptchaAI's answer to a `reportgood` / `reportbad` it recorded.
pub(crate) const REPORT_RECORDED: &str = "OK_REPORT_RECORDED";

/// Retry-after for IP_BANNED: the ban lifts after five minutes.
const BAN_RETRY_AFTER_MS: u64 = 300_000;
/// How long to wait for a busy thread before resubmitting (the SDK's ~8 s).
pub(crate) const BUSY_WAIT_MS: u64 = 8_000;

/// The table. Order: not-ready, account, input, proxy, server, task, engine, legacy.
pub(crate) const TABLE: &[CodeInfo] = &[
    row(NOT_READY, Api, Transient, NOT_YET, Some(5_000), "not solved yet (spelled without the T)"),
    row("CAPTCHA_NOT_READY", Api, Transient, NOT_YET, Some(5_000), "not solved yet (defensive spelling)"),
    row(WRONG_USER_KEY, Api, Permanent, FAIL, None, "the key is malformed (must be 32 characters)"),
    row(KEY_DOES_NOT_EXIST, Api, Permanent, FAIL, None, "the key is unknown, or the account has no plan"),
    row(
        ZERO_BALANCE,
        Api,
        Transient,
        Steps { submit: DiagnoseThreads, poll: Retry, threads_info: WaitForThread },
        Some(BUSY_WAIT_MS),
        "no free threads: all busy, or no active plan",
    ),
    row(
        "IP_BANNED",
        Api,
        Permanent,
        FAIL,
        Some(BAN_RETRY_AFTER_MS),
        "this IP is banned for 5 minutes after repeated bad-key requests",
    ),
    row(PAGEURL, Api, Permanent, FAIL, None, "pageurl is missing or invalid"),
    row(GOOGLEKEY, Api, Permanent, FAIL, None, "the sitekey is missing or blank"),
    row(WRONG_GOOGLEKEY, Api, Permanent, FAIL, None, "the sitekey is malformed"),
    row(
        "ERROR_BAD_TOKEN_OR_PAGEURL",
        Api,
        Permanent,
        FAIL,
        None,
        "the sitekey and pageurl do not belong together (an iframe on another domain?)",
    ),
    row(BAD_PARAMETERS, Api, Permanent, FAIL, None, "required parameters are missing or have the wrong type"),
    row(ZERO_CAPTCHA_FILESIZE, Api, Permanent, FAIL, None, "the image is too small"),
    row(TOO_BIG_CAPTCHA_FILESIZE, Api, Permanent, FAIL, None, "the image is too big"),
    row(IMAGE_DIMENSIONS_TOO_LARGE, Api, Permanent, FAIL, None, "the image has too many pixels per side"),
    row(WRONG_FILE_EXTENSION, Api, Permanent, FAIL, None, "the image is not jpg, png or gif"),
    row("ERROR_IMAGE_TYPE_NOT_SUPPORTED", Api, Permanent, FAIL, None, "the image type is not recognised"),
    row(UPLOAD, Api, Permanent, FAIL, None, "malformed upload or invalid base64"),
    row(BAD_PROXY, Api, Permanent, FAIL, None, "the proxy is marked bad: use another one"),
    row(
        "ERROR_PROXY_CONNECTION_FAILED",
        Api,
        Transient,
        RETRY,
        Some(10_000),
        "the solver could not connect through the proxy",
    ),
    row(SERVER_ERROR, Api, Transient, RETRY, Some(10_000), "transient server error"),
    row("ERROR_INTERNAL_SERVER_ERROR", Api, Transient, RETRY, Some(10_000), "transient internal server error"),
    row(UNSOLVABLE, Api, Unsolvable, RESUBMIT, None, "the service gave up on this captcha; a fresh task may work"),
    row(WRONG_ID_FORMAT, Api, Permanent, FAIL, None, "the task id is not numeric (a client bug)"),
    row(WRONG_CAPTCHA_ID, Api, Permanent, FAIL, None, "the task id is unknown or expired"),
    row(EMPTY_ACTION, Api, Permanent, FAIL, None, "res.php was called without an action (a client bug)"),
    row(INVALID_TASK, Engine, Permanent, FAIL, None, "the task failed validation; nothing was sent"),
    row(INVALID_CONFIG, Engine, Permanent, FAIL, None, "the configuration failed validation; nothing was sent"),
    row(INVALID_KEY, Engine, Permanent, FAIL, None, "the API key is malformed; nothing was sent"),
    row(TRANSPORT_ERROR, Engine, Transient, RETRY, Some(5_000), "the request failed in transport or timed out"),
    row(
        UNEXPECTED_REPLY,
        Engine,
        Transient,
        RETRY,
        Some(5_000),
        "a reply that is neither an answer nor a known code (HTML 5xx page, empty body)",
    ),
    row(DEADLINE_EXCEEDED, Engine, Transient, FAIL, None, "no answer before the solve's deadline"),
    row("ERROR_DOMAIN_NOT_ALLOWED", Legacy, Permanent, FAIL, None, "the domain is not allowed"),
    row("ERROR_CAPTCHAIMAGE_BLOCKED", Legacy, Permanent, FAIL, None, "the image is marked unrecognisable"),
    row(
        "ERROR_BAD_DUPLICATES",
        Legacy,
        Unsolvable,
        RESUBMIT,
        None,
        "not enough matching answers within the allowed tries",
    ),
    row("ERROR_IP_NOT_ALLOWED", Legacy, Permanent, FAIL, None, "this IP is not on the account's allow list"),
    row("ERROR_IP_ADDRES", Legacy, Permanent, FAIL, None, "the pingback IP does not match"),
    row("ERROR_TOKEN_EXPIRED", Legacy, Permanent, FAIL, None, "the challenge token has expired: fetch a fresh one"),
    row("ERROR_DUPLICATE_REPORT", Legacy, Permanent, FAIL, None, "this task was already reported"),
    row("REPORT_NOT_RECORDED", Legacy, Permanent, FAIL, None, "the report was not recorded"),
    row(
        NO_SLOT_AVAILABLE,
        Legacy,
        Transient,
        Steps { submit: WaitForThread, poll: Retry, threads_info: WaitForThread },
        Some(5_000),
        "no slot free (a 2captcha capacity code)",
    ),
    row("MAX_USER_TURN", Legacy, Transient, RETRY, Some(10_000), "too many requests: slow down"),
    row("ERROR_TOO_MUCH_REQUESTS", Legacy, Transient, RETRY, Some(10_000), "too many requests: slow down"),
    row(NUMBERED, Legacy, Transient, RETRY, Some(10_000), "a numbered 2captcha rate-limit code (`ERROR: 1001`...)"),
];

/// The row for numbered codes such as `ERROR: 1001`; matched by prefix.
pub(crate) const NUMBERED: &str = "ERROR: ";

/// The row used for codes that start with `ERROR` but are in no table: fail fast, because
/// resending an unchanged request only burns attempts.
pub(crate) const UNKNOWN: CodeInfo =
    row("ERROR_*", Api, Permanent, FAIL, None, "an error code this engine does not know");

/// `threadsinfo` (asked after ERROR_ZERO_BALANCE) shows a free thread, or a plan of none: the
/// zero balance means no active plan. Permanent, with no retry hint. Not a wire code: the
/// engine's reading of the counts, kept as a row so the verdict stays in this table.
pub(crate) const THREADS_FREE: CodeInfo = row(
    ZERO_BALANCE,
    Engine,
    Permanent,
    FAIL,
    None,
    "ERROR_ZERO_BALANCE while threadsinfo shows free threads: the plan has expired or is not active",
);

/// `threadsinfo` shows every thread of the plan busy: wait [`BUSY_WAIT_MS`] and submit again;
/// this is also the failure if the deadline passes while waiting for a thread.
pub(crate) const THREADS_BUSY: CodeInfo = row(
    ZERO_BALANCE,
    Engine,
    Transient,
    Steps { submit: WaitForThread, poll: WaitForThread, threads_info: WaitForThread },
    Some(BUSY_WAIT_MS),
    "every plan thread is busy",
);

/// Which of CaptchaAI's codes refuse an `in.php` request that gets a field wrong (a column of
/// the type registry's fields; [`refusal_code`] picks the code by what is wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Any parameter: ERROR_BAD_PARAMETERS.
    Parameter,
    /// The page URL: ERROR_PAGEURL.
    PageUrl,
    /// A site key: ERROR_GOOGLEKEY when missing, ERROR_WRONG_GOOGLEKEY when malformed.
    SiteKey,
    /// The solver's proxy: ERROR_BAD_PROXY when malformed, ERROR_BAD_PARAMETERS when missing.
    Proxy,
    /// An image: by what is wrong with it.
    Image,
}

/// What is wrong with a value a task gave, as far as CaptchaAI's codes tell cases apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Malformed, out of range, or not allowed.
    #[default]
    Invalid,
    /// Not given.
    Missing,
    /// An image under the smallest size.
    ImageTooSmall,
    /// An image over the largest size.
    ImageTooBig,
    /// Bytes that are no jpg, png or gif.
    NotAnImage,
    /// An image with a side over the limit.
    ImageTooLarge,
    /// Text that is not base64.
    NotBase64,
}

/// The code CaptchaAI answers for an `in.php` request with `problem` in a field refused as
/// `refusal` (docs/endpoint.md: the image codes follow the docs' descriptions; a missing image is
/// a zero-size one).
pub(crate) fn refusal_code(refusal: Refusal, problem: Problem) -> &'static str {
    match (refusal, problem) {
        (Refusal::PageUrl, _) => PAGEURL,
        (Refusal::SiteKey, Problem::Missing) => GOOGLEKEY,
        (Refusal::SiteKey, _) => WRONG_GOOGLEKEY,
        (Refusal::Proxy, Problem::Missing) => BAD_PARAMETERS,
        (Refusal::Proxy, _) => BAD_PROXY,
        (Refusal::Image, Problem::Missing | Problem::ImageTooSmall) => ZERO_CAPTCHA_FILESIZE,
        (Refusal::Image, Problem::ImageTooBig) => TOO_BIG_CAPTCHA_FILESIZE,
        (Refusal::Image, Problem::NotAnImage) => WRONG_FILE_EXTENSION,
        (Refusal::Image, Problem::ImageTooLarge) => IMAGE_DIMENSIONS_TOO_LARGE,
        (Refusal::Image, Problem::NotBase64) => UPLOAD,
        (Refusal::Image | Refusal::Parameter, _) => BAD_PARAMETERS,
    }
}

/// The code an endpoint client is answered with for a solve (or an account call) that ended with
/// the left code, where that is not the code itself, and why. CaptchaAI's other codes are passed
/// on as they are (an endpoint client reacts to them as to CaptchaAI's).
pub(crate) const CLIENT_CODES: &[(&str, &str)] = &[
    // No answer in time: CaptchaAI's own word for a captcha it could not solve; clients submit a
    // fresh task (the official SDK raises UnsolvableError).
    (DEADLINE_EXCEEDED, UNSOLVABLE),
    // CaptchaAI could not be reached or answered garbage: a server error, retried later.
    (TRANSPORT_ERROR, SERVER_ERROR),
    (UNEXPECTED_REPLY, SERVER_ERROR),
    // The endpoint validated the task; a refusal after that is a bad parameter all the same.
    (INVALID_TASK, BAD_PARAMETERS),
    // The host's own configuration or CaptchaAI key is at fault, not the client's key: clients
    // must not be told their key is wrong (the official SDK would raise InvalidKeyError).
    (INVALID_CONFIG, SERVER_ERROR),
    (INVALID_KEY, SERVER_ERROR),
    (WRONG_USER_KEY, SERVER_ERROR),
    (KEY_DOES_NOT_EXIST, SERVER_ERROR),
];

/// The code an endpoint client sees for a failure with `code`: [`CLIENT_CODES`], else the code
/// itself when it is a wire code that means failure, else ERROR_SERVER_ERROR (a "not ready"
/// code, or text that is no code, never ends a solve).
pub(crate) fn client_code(code: &str) -> &str {
    if let Some((_, client)) = CLIENT_CODES.iter().find(|(engine, _)| *engine == code) {
        return client;
    }
    match lookup_wire(code) {
        Some(_) if !is_not_ready(code) => code,
        _ => SERVER_ERROR,
    }
}

/// How a step is tried again after a transient code: the first retry waits the code's
/// retry-after (`default_ms` where its row has none), each later one `factor` times the one
/// before, at most `cap_ms`; with `at_least_poll_interval`, never sooner than the solve's poll
/// interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    pub default_ms: u64,
    pub factor: u64,
    pub cap_ms: u64,
    pub at_least_poll_interval: bool,
}

impl Backoff {
    /// The wait before retry `n` (1 = the first) after a code whose row says `retry_after_ms`.
    pub(crate) fn wait(&self, n: u32, retry_after_ms: Option<u64>, poll_interval_ms: u64) -> u64 {
        let first = retry_after_ms.unwrap_or(self.default_ms);
        let wait = first.saturating_mul(self.factor.saturating_pow(n.saturating_sub(1))).min(self.cap_ms);
        if self.at_least_poll_interval { wait.max(poll_interval_ms) } else { wait }
    }
}

/// Submits: the code's retry-after (5 s without one), doubling, capped at 60 s.
pub(crate) const SUBMIT_BACKOFF: Backoff =
    Backoff { default_ms: 5_000, factor: 2, cap_ms: 60_000, at_least_poll_interval: false };

/// Polls: the poll interval, or the code's retry-after where longer; no growth (polls are already
/// spaced, and the consecutive-error budget ends a run of them).
pub(crate) const POLL_BACKOFF: Backoff =
    Backoff { default_ms: 0, factor: 1, cap_ms: u64::MAX, at_least_poll_interval: true };

/// Looks a code up (wire or engine). Codes starting with `ERROR` that are not in the table get
/// [`UNKNOWN`]; anything else (a word that is not a code) gets `None`.
pub(crate) fn lookup(code: &str) -> Option<&'static CodeInfo> {
    TABLE.iter().find(|info| info.code == code).or_else(|| lookup_wire(code))
}

/// Looks up a code that arrived from the service. Engine codes are not wire codes, so a reply
/// reading `INVALID_TASK` is not mistaken for one.
pub(crate) fn lookup_wire(code: &str) -> Option<&'static CodeInfo> {
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
pub(crate) fn is_wire_code(text: &str) -> bool {
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
fn is_validation(code: &str) -> bool {
    matches!(code, INVALID_TASK | INVALID_CONFIG | INVALID_KEY)
}

/// The origin of a failure with this code (engine codes by their row; every other code,
/// known or not, `Service`).
pub(crate) fn origin(code: &str) -> Origin {
    match TABLE.iter().find(|info| info.code == code && info.source == Source::Engine) {
        Some(info) => info.origin(),
        None => Origin::Service,
    }
}

/// Whether the code means "not ready yet" (either spelling).
pub(crate) fn is_not_ready(code: &str) -> bool {
    lookup_wire(code).is_some_and(|info| info.on.poll == Action::PollAgain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_lookups_know_the_table_numbered_and_unknown_codes_but_not_engine_codes() {
        for info in TABLE.iter().filter(|info| info.source != Source::Engine && info.code != NUMBERED) {
            assert_eq!(lookup_wire(info.code), Some(info));
        }
        assert_eq!(lookup_wire("ERROR: 1001").map(|i| i.code), Some(NUMBERED));
        assert_eq!(lookup_wire("ERROR_BRAND_NEW_CODE"), Some(&UNKNOWN));
        assert!(lookup_wire("INVALID_TASK").is_none(), "engine codes are not wire codes");
        assert!(lookup_wire("HELLO").is_none(), "words that are not codes are not codes");
    }

    /// The `threadsinfo` column fails exactly where a code is permanent and fails a submit (the
    /// rule the engine applied in code before it was a column).
    #[test]
    fn threadsinfo_fails_on_permanent_codes_and_waits_on_the_rest() {
        for info in TABLE.iter().filter(|info| info.source != Source::Engine).chain([&UNKNOWN]) {
            let fails = info.class == Class::Permanent && info.on.submit == Fail;
            assert_eq!(info.on.threads_info, if fails { Fail } else { WaitForThread }, "{}", info.code);
        }
    }

    #[test]
    fn backoffs_double_from_the_hint_up_to_the_cap_and_polls_keep_the_interval() {
        let submits: Vec<u64> = (1..=6).map(|n| SUBMIT_BACKOFF.wait(n, Some(10_000), 5_000)).collect();
        assert_eq!(submits, [10_000, 20_000, 40_000, 60_000, 60_000, 60_000]);
        assert_eq!(SUBMIT_BACKOFF.wait(3, None, 5_000), 20_000, "5 s without a hint");
        assert_eq!(SUBMIT_BACKOFF.wait(u32::MAX, Some(1), 0), 60_000, "no overflow");
        assert_eq!(POLL_BACKOFF.wait(7, Some(10_000), 5_000), 10_000);
        assert_eq!(POLL_BACKOFF.wait(7, Some(5_000), 8_000), 8_000);
        assert_eq!(POLL_BACKOFF.wait(1, None, 6_000), 6_000);
    }
}
