//! Reading replies from `in.php`, `res.php` and `solve.php`. Total: every status and byte
//! sequence classifies as exactly one [`Reply`], never a panic.
//!
//! Rules (contract §1.2–1.3): JSON first, with `status` as a number or string and `request` as
//! a string or number (task ids arrive as integers for reCAPTCHA); on success `result` wins over
//! `request` and `user_agent` is kept; both NOT_READY spellings; a bare text code is accepted
//! even though `json=1` was sent; `OK|value` plain text; anything else (an HTML 502 page, an
//! empty body) is [`Reply::Unexpected`].

use serde::Deserialize;
use serde_json::Value;

use crate::codes;

/// A classified reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `status` 1. `value` is `result` when present and non-empty, else `request`.
    Ok { value: Value, user_agent: Option<String> },
    /// `CAPCHA_NOT_READY` (or `CAPTCHA_NOT_READY`).
    NotReady,
    /// An error code (as JSON `request` or bare text), with the optional `error_text`.
    Code { code: String, text: Option<String> },
    /// A `threadsinfo` reply.
    Threads { threads: u64, working: u64 },
    /// Neither an answer nor a known code: `what` says briefly what it was.
    Unexpected { status: u16, what: String },
}

#[derive(Deserialize)]
struct Wire {
    status: Option<Value>,
    request: Option<Value>,
    result: Option<Value>,
    user_agent: Option<Value>,
    error_text: Option<Value>,
    threads: Option<Value>,
    working_threads: Option<Value>,
}

/// Classifies one reply. Answers and `threadsinfo` counts are trusted only with a 2xx status;
/// codes are trusted with any status.
pub fn parse(status: u16, body: &[u8]) -> Reply {
    let success = (200..300).contains(&status);
    match parse_body(body) {
        reply @ (Reply::Code { .. } | Reply::NotReady) => reply,
        reply @ (Reply::Ok { .. } | Reply::Threads { .. }) if success => reply,
        _ => Reply::Unexpected { status, what: describe(body) },
    }
}

fn parse_body(body: &[u8]) -> Reply {
    let trimmed = body.trim_ascii();
    let trimmed = trimmed.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(trimmed);
    if trimmed.first() == Some(&b'{') {
        if let Ok(wire) = serde_json::from_slice::<Wire>(trimmed) {
            return from_json(wire);
        }
    }
    let Ok(text) = std::str::from_utf8(trimmed) else {
        return unexpected();
    };
    if let Some(value) = text.strip_prefix("OK|") {
        return Reply::Ok { value: Value::from(value), user_agent: None };
    }
    classify_code(text, None)
}

fn unexpected() -> Reply {
    Reply::Unexpected { status: 0, what: String::new() }
}

fn from_json(wire: Wire) -> Reply {
    if let Some(threads) = wire.threads {
        return match (count(&threads), wire.working_threads.as_ref().and_then(count)) {
            (Some(threads), Some(working)) => Reply::Threads { threads, working },
            _ => unexpected(),
        };
    }
    let ok = match &wire.status {
        Some(Value::Number(n)) => n.as_u64() == Some(1),
        Some(Value::String(s)) => s.trim() == "1",
        Some(Value::Bool(b)) => *b,
        _ => false,
    };
    if ok {
        let value = wire.result.filter(|v| !is_empty(v)).or(wire.request).filter(|v| !is_empty(v));
        let user_agent = wire.user_agent.and_then(|v| v.as_str().map(str::to_owned)).filter(|s| !s.is_empty());
        return match value {
            Some(value) => Reply::Ok { value, user_agent },
            None => unexpected(),
        };
    }
    let text = wire.error_text.and_then(|v| v.as_str().map(str::to_owned)).filter(|s| !s.is_empty());
    match wire.request {
        Some(Value::String(code)) => classify_code(code.trim(), text),
        _ => unexpected(),
    }
}

fn classify_code(code: &str, text: Option<String>) -> Reply {
    if codes::is_not_ready(code) {
        Reply::NotReady
    } else if codes::is_wire_code(code) {
        Reply::Code { code: code.to_owned(), text }
    } else {
        unexpected()
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// A non-negative integer sent as a number or a numeric string.
fn count(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
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
    if let (Some(start), Some(end)) = (lower.find("<title>"), lower.find("</title>"))
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
