//! Reading replies from `in.php`, `res.php` and `solve.php`. Total: every status and byte
//! sequence classifies as exactly one [`Reply`], never a panic.
//!
//! Rules (contract §1.2–1.3): JSON first, with `status` as a number or string and `request` as
//! a string or number (task ids arrive as integers for reCAPTCHA); on success `result` wins over
//! `request` and `user_agent` is kept; both NOT_READY spellings; a bare text code is accepted
//! even though `json=1` was sent; `OK|value` plain text; anything else (an HTML 502 page, an
//! empty body) is [`Reply::Unexpected`].

use crate::codes;
use crate::json::Json;
use crate::text::find;

/// A classified reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<'a> {
    /// `status` 1. `value` is `result` when present and non-empty, else `request`.
    Ok { value: Json<'a>, user_agent: Option<String> },
    /// `CAPCHA_NOT_READY` (or `CAPTCHA_NOT_READY`).
    NotReady,
    /// An error code (as JSON `request` or bare text), with the optional `error_text`.
    Code { code: String, text: Option<String> },
    /// A `threadsinfo` reply.
    Threads { threads: u64, working: u64 },
    /// Neither an answer nor a known code: `what` says briefly what it was.
    Unexpected { status: u16, what: String },
}

/// Classifies one reply. Answers and `threadsinfo` counts are trusted only with a 2xx status;
/// codes are trusted with any status.
pub fn parse(status: u16, body: &[u8]) -> Reply<'_> {
    let success = (200..300).contains(&status);
    match parse_body(body) {
        reply @ (Reply::Code { .. } | Reply::NotReady) => reply,
        reply @ (Reply::Ok { .. } | Reply::Threads { .. }) if success => reply,
        _ => Reply::Unexpected { status, what: describe(body) },
    }
}

fn parse_body(body: &[u8]) -> Reply<'_> {
    let trimmed = body.trim_ascii();
    let trimmed = trimmed.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(trimmed);
    let Ok(text) = std::str::from_utf8(trimmed) else {
        return unexpected();
    };
    if text.starts_with('{') {
        let mut fields = Fields::default();
        if Json::parse_object_with(text, |key, value| fields.set(&key, value)).is_ok() {
            return from_fields(fields);
        }
    }
    if let Some(value) = text.strip_prefix("OK|") {
        return Reply::Ok { value: Json::from(value), user_agent: None };
    }
    classify_code(text, None)
}

fn unexpected() -> Reply<'static> {
    Reply::Unexpected { status: 0, what: String::new() }
}

/// The reply fields the engine reads, picked out of an object in one pass.
#[derive(Default)]
struct Fields<'a> {
    status: Option<Json<'a>>,
    request: Option<Json<'a>>,
    result: Option<Json<'a>>,
    user_agent: Option<Json<'a>>,
    error_text: Option<Json<'a>>,
    threads: Option<Json<'a>>,
    working_threads: Option<Json<'a>>,
}

impl<'a> Fields<'a> {
    /// Keeps the fields the engine reads (a repeated key: the last one wins).
    fn set(&mut self, key: &str, value: Json<'a>) {
        let slot = match key {
            "status" => &mut self.status,
            "request" => &mut self.request,
            "result" => &mut self.result,
            "user_agent" => &mut self.user_agent,
            "error_text" => &mut self.error_text,
            "threads" => &mut self.threads,
            "working_threads" => &mut self.working_threads,
            _ => return,
        };
        *slot = Some(value).filter(|v| !v.is_null());
    }
}

fn from_fields<'a>(f: Fields<'a>) -> Reply<'a> {
    let text = |v: Option<Json<'a>>| v.and_then(|v| v.as_str().map(str::to_owned)).filter(|s| !s.is_empty());
    if let Some(threads) = f.threads {
        return match (count(&threads), f.working_threads.as_ref().and_then(count)) {
            (Some(threads), Some(working)) => Reply::Threads { threads, working },
            _ => unexpected(),
        };
    }
    let ok = match &f.status {
        Some(Json::Number(n)) => n == "1",
        Some(Json::String(s)) => s.trim() == "1",
        Some(Json::Bool(b)) => *b,
        _ => false,
    };
    if ok {
        let value = f.result.filter(|v| !is_empty(v)).or(f.request).filter(|v| !is_empty(v));
        return match value {
            Some(value) => Reply::Ok { value, user_agent: text(f.user_agent) },
            None => unexpected(),
        };
    }
    match f.request {
        Some(Json::String(code)) => classify_code(code.trim(), text(f.error_text)),
        _ => unexpected(),
    }
}

fn classify_code(code: &str, text: Option<String>) -> Reply<'static> {
    if codes::is_not_ready(code) {
        Reply::NotReady
    } else if codes::is_wire_code(code) {
        Reply::Code { code: code.to_owned(), text }
    } else {
        unexpected()
    }
}

fn is_empty(value: &Json<'_>) -> bool {
    match value {
        Json::Null => true,
        Json::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// A non-negative integer sent as a number or a numeric string.
fn count(value: &Json<'_>) -> Option<u64> {
    match value {
        Json::String(s) => s.trim().parse().ok(),
        other => other.as_u64(),
    }
}

/// A short, printable description of an unexpected body (the HTML title where there is one).
fn describe(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "an empty body".to_owned();
    }
    let lower = text.to_ascii_lowercase();
    if let (Some(start), Some(end)) = (find(&lower, "<title>"), find(&lower, "</title>"))
        && start + 7 <= end
    {
        return format!("an HTML page titled \"{}\"", printable(&text[start + 7..end], 60));
    }
    format!("\"{}\"", printable(text, 60))
}

fn printable(text: &str, max: usize) -> String {
    let mut out: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(max).collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}
