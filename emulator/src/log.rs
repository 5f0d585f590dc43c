//! The request log and key redaction. Nothing recorded here ever contains an account key or the
//! value of a `key` parameter.

use serde::{Deserialize, Serialize};

/// What replaces a key wherever it appears.
pub const REDACTED: &str = "[REDACTED]";

/// Longest form value kept verbatim; longer values (image bodies) are abbreviated.
const MAX_VALUE_CHARS: usize = 200;

/// One protocol request as the emulator received and answered it. Keys are replaced by
/// `[REDACTED]` everywhere (query, form fields, headers, path).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Arrival order, from 0.
    pub seq: u64,
    /// Arrival time, virtual ms since start.
    pub at_ms: u64,
    /// Arrival time, real ms since start.
    pub real_ms: f64,
    /// Client IP.
    pub peer: String,
    /// HTTP method (`GET`, `POST`, ...).
    pub method: String,
    /// Path (`/in.php`, `/res.php`, `/solve.php`, ...).
    pub path: String,
    /// Raw query string, redacted.
    pub query: String,
    /// Body fields in order, redacted; long values abbreviated, files summarised.
    pub form: Vec<(String, String)>,
    /// Header names and values, redacted.
    pub headers: Vec<(String, String)>,
    /// `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// Whether `json=1` was sent.
    pub json: bool,
    /// res.php `action`.
    pub action: Option<String>,
    /// in.php / solve.php `method`.
    pub captcha_method: Option<String>,
    /// A key appeared in the URL (a `key` query parameter or a known key anywhere in path/query).
    pub key_in_url: bool,
    /// A known key (or this request's `key` value) appeared in a header name or value.
    pub key_in_headers: bool,
    /// A `key` field (or a known key) appeared in the body.
    pub key_in_body: bool,
    /// The `id` polled (res.php action=get), as sent.
    pub polled_id: Option<String>,
    /// Task id assigned by in.php.
    pub task_id: Option<u64>,
    /// HTTP status replied; `None` when the connection was dropped.
    pub status: Option<u16>,
    /// Protocol outcome: `OK`, an error code, `CAPCHA_NOT_READY`, or the fault's text.
    pub reply_code: Option<String>,
    /// Fault applied (`drop`, `html_502`, `plain_text`, `slow:MS`, `code:CODE`, `status:N`).
    pub fault: Option<String>,
}

/// Replaces secrets (known keys and the request's own key) by `[REDACTED]`.
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// `request_key` is added when it is long enough to be recognisable (8+ chars).
    pub(crate) fn new<'a>(known: impl Iterator<Item = &'a str>, request_key: Option<&str>) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        let mut add = |s: &str| {
            if s.is_empty() {
                return;
            }
            let enc: String = form_urlencoded::byte_serialize(s.as_bytes()).collect();
            for v in [s.to_owned(), enc] {
                if !secrets.contains(&v) {
                    secrets.push(v);
                }
            }
        };
        for k in known {
            add(k);
        }
        if let Some(k) = request_key.map(str::trim).filter(|k| k.len() >= 8) {
            add(k);
        }
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets }
    }

    pub(crate) fn contains_secret(&self, s: &str) -> bool {
        self.secrets.iter().any(|k| s.contains(k.as_str()))
    }

    pub(crate) fn redact(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for k in &self.secrets {
            if out.contains(k.as_str()) {
                out = out.replace(k.as_str(), REDACTED);
            }
        }
        out
    }

    /// Redacts a raw query string; any `key` parameter value becomes `[REDACTED]`.
    pub(crate) fn redact_query(&self, q: &str) -> String {
        let out = self.redact(q);
        let leaks = form_urlencoded::parse(out.as_bytes()).any(|(n, v)| n == "key" && !v.is_empty() && v != REDACTED);
        if !leaks {
            return out;
        }
        out.split('&')
            .map(|pair| {
                let name = pair.split('=').next().unwrap_or("");
                let decoded: String = form_urlencoded::parse(name.as_bytes()).map(|(n, _)| n.into_owned()).collect();
                if decoded == "key" { format!("{name}={REDACTED}") } else { pair.to_owned() }
            })
            .collect::<Vec<_>>()
            .join("&")
    }

    /// A form value fit for the log: `key` fields hidden, secrets redacted, long values abbreviated.
    pub(crate) fn form_value(&self, name: &str, value: &str) -> String {
        if name == "key" && !value.is_empty() {
            return REDACTED.to_owned();
        }
        let v = self.redact(value);
        if v.chars().count() > MAX_VALUE_CHARS {
            let head: String = v.chars().take(64).collect();
            format!("{head}...({} chars)", v.chars().count())
        } else {
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_everywhere() {
        let key = "0123456789abcdef0123456789abcdef";
        let r = Redactor::new([key].into_iter(), Some("shortkey-but-8"));
        assert_eq!(r.redact_query(&format!("key={key}&json=1")), "key=[REDACTED]&json=1");
        assert_eq!(r.redact_query("key=abc&json=1"), "key=[REDACTED]&json=1");
        assert_eq!(r.redact_query("k%65y=abc"), "k%65y=[REDACTED]");
        assert_eq!(r.form_value("key", "x"), REDACTED);
        assert_eq!(r.redact(&format!("Bearer {key}")), "Bearer [REDACTED]");
        assert!(r.contains_secret("zzshortkey-but-8zz"));
        assert!(r.form_value("body", &"A".repeat(500)).ends_with("(500 chars)"));
    }
}
