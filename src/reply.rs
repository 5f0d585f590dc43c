//! Reading replies from `in.php`, `res.php` and `solve.php`. Total: every status and byte
//! sequence classifies as exactly one [`Reply`], never a panic.
//!
//! Rules (contract §1.2–1.3): JSON first, with `status` as a number or string and `request` as
//! a string or number (task ids arrive as integers for reCAPTCHA); on success the answer is
//! under the first key of the caller's `answer_from` (the registry's, per type) that is present
//! and not empty, and `user_agent` is kept; both NOT_READY spellings; a bare text code is accepted
//! even though `json=1` was sent; `OK|value` plain text; anything else (an HTML 502 page, an
//! empty body) is [`Reply::Unexpected`].

//!
//! Objects are read with serde_json into [`Fields`], which keeps only the keys the engine reads
//! and borrows their strings from the body.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::codes;
use crate::registry::AnswerKey;
use crate::text::find;

/// A classified reply.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Reply<'a> {
    /// `status` 1, with a value that is not empty under one of the `answer_from` keys.
    Ok {
        /// The answer or task id.
        value: Field<'a>,
        /// The solver's user agent, where the reply carries one.
        user_agent: Option<String>,
    },
    /// `CAPCHA_NOT_READY` (or `CAPTCHA_NOT_READY`).
    NotReady,
    /// An error code (as JSON `request` or bare text), with the optional `error_text`.
    Code {
        /// The code as sent.
        code: String,
        /// The reply's `error_text`, if any.
        text: Option<String>,
    },
    /// A `threadsinfo` reply.
    Threads {
        /// The plan's thread cap.
        threads: u64,
        /// Threads busy now.
        working: u64,
    },
    /// Neither an answer nor a known code: `what` says briefly what it was.
    Unexpected {
        /// The HTTP status.
        status: u16,
        /// What the body was, briefly and printably.
        what: String,
    },
}

/// Whether `body` is, byte for byte, the reply to nearly every poll:
/// `{"status":0,"request":"CAPCHA_NOT_READY"}`, which [`parse`] reads as [`Reply::NotReady`]
/// whatever the status. Checked before the UTF-8 rule, the key search and [`parse`]: ~2.3k of a
/// native canned solve's 13.0k instructions for its three not-ready polls (callgrind).
pub(crate) fn is_plain_not_ready(body: &[u8]) -> bool {
    body.strip_prefix(br#"{"status":0,"request":""#).and_then(|rest| rest.strip_suffix(br#""}"#))
        == Some(codes::NOT_READY.as_bytes())
}

/// Classifies one reply body (text: a host's bytes after the engine's one UTF-8 rule), taking a
/// success's value from the first of `answer_from` that holds one. Answers and `threadsinfo`
/// counts are trusted only with a 2xx status; codes are trusted with any status.
pub(crate) fn parse<'a>(status: u16, body: &'a str, answer_from: &[AnswerKey]) -> Reply<'a> {
    let success = (200..300).contains(&status);
    match parse_body(body, answer_from) {
        reply @ (Reply::Code { .. } | Reply::NotReady) => reply,
        reply @ (Reply::Ok { .. } | Reply::Threads { .. }) if success => reply,
        _ => Reply::Unexpected { status, what: describe(body) },
    }
}

fn parse_body<'a>(body: &'a str, answer_from: &[AnswerKey]) -> Reply<'a> {
    let text = body.trim_ascii();
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    if let Some((status, request)) = common_shape(text) {
        return common_reply(status, request, answer_from);
    }
    if text.starts_with('{')
        && let Ok(fields) = serde_json::from_str::<Fields<'_>>(text)
    {
        return from_fields(fields, answer_from);
    }
    if let Some(value) = text.strip_prefix("OK|") {
        // The plain-text form's value is its `request`.
        if answer_from.contains(&AnswerKey::Request) {
            return Reply::Ok { value: Field::Str(Cow::Borrowed(value)), user_agent: None };
        }
        return unexpected();
    }
    classify_code(text, None)
}

/// The shape of nearly every reply, `{"status":<digit>,"request":"<text>"}` or with a plain
/// integer `request` (a task id), read without the JSON parser: its status digit and request,
/// or `None` for anything else (escapes, spaces, other keys), which serde_json reads. Both read
/// the same fields (a property test checks it); this saves about 900 instructions per reply,
/// 18% of a native solve (callgrind; BENCHMARKS.md).
fn common_shape(text: &str) -> Option<(u8, Field<'_>)> {
    let rest = text.strip_prefix(r#"{"status":"#)?;
    let status = rest.as_bytes().first().filter(|b| b.is_ascii_digit())?;
    let rest = rest[1..].strip_prefix(r#","request":"#)?.strip_suffix('}')?;
    let request = if let Some(quoted) = rest.strip_prefix('"') {
        let value = quoted.strip_suffix('"')?;
        if crate::text::any_byte(value, |b| (b == b'"') | (b == b'\\') | (b < 0x20)) {
            return None;
        }
        Field::Str(Cow::Borrowed(value))
    } else {
        let plain = !rest.is_empty() && rest.len() <= 19 && rest.bytes().all(|b| b.is_ascii_digit());
        if !plain || (rest.len() > 1 && rest.starts_with('0')) {
            return None;
        }
        Field::Json(Value::from(rest.parse::<u64>().ok()?))
    };
    Some((status - b'0', request))
}

/// What [`from_fields`] makes of a reply holding only `status` and `request`, without building
/// [`Fields`] (~150 instructions per reply natively, callgrind; a property test checks both agree).
fn common_reply<'a>(status: u8, request: Field<'a>, answer_from: &[AnswerKey]) -> Reply<'a> {
    match request {
        request if status == 1 && !is_empty(&request) && answer_from.contains(&AnswerKey::Request) => {
            Reply::Ok { value: request, user_agent: None }
        }
        Field::Str(code) if status != 1 => classify_code(code.trim(), None),
        _ => unexpected(),
    }
}

fn unexpected() -> Reply<'static> {
    Reply::Unexpected { status: 0, what: String::new() }
}

/// A value in a reply object, borrowed from the body where it can be: strings (the common case:
/// codes, task ids, tokens) without escapes cost no allocation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Field<'a> {
    Null,
    Bool(bool),
    Str(Cow<'a, str>),
    /// A number, array or object.
    Json(Value),
}

impl Field<'_> {
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Field<'de>, E> {
        Ok(Field::Null)
    }

    fn visit_none<E>(self) -> Result<Field<'de>, E> {
        Ok(Field::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Field<'de>, D::Error> {
        Field::deserialize(deserializer)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Field<'de>, E> {
        Ok(Field::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Field<'de>, E> {
        Ok(Field::Json(Value::from(n)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Field<'de>, E> {
        Ok(Field::Json(Value::from(n)))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Field<'de>, E> {
        Ok(Field::Json(Value::from(n)))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field<'de>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Field::Json)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<'de>, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Field::Json)
    }
}

/// The reply fields the engine reads, picked out of an object in one pass (a repeated key: the
/// last one wins; other keys are skipped without being kept).
#[derive(Default, Debug, PartialEq)]
struct Fields<'a> {
    status: Option<Field<'a>>,
    request: Option<Field<'a>>,
    result: Option<Field<'a>>,
    user_agent: Option<Field<'a>>,
    error_text: Option<Field<'a>>,
    threads: Option<Field<'a>>,
    working_threads: Option<Field<'a>>,
}

/// A key of a reply object: one the engine reads, or any other.
enum Key {
    Status,
    Request,
    Result,
    UserAgent,
    ErrorText,
    Threads,
    WorkingThreads,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "status" => Key::Status,
                    "request" => Key::Request,
                    "result" => Key::Result,
                    "user_agent" => Key::UserAgent,
                    "error_text" => Key::ErrorText,
                    "threads" => Key::Threads,
                    "working_threads" => Key::WorkingThreads,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a reply object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut fields = Fields::default();
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key {
                        Key::Status => &mut fields.status,
                        Key::Request => &mut fields.request,
                        Key::Result => &mut fields.result,
                        Key::UserAgent => &mut fields.user_agent,
                        Key::ErrorText => &mut fields.error_text,
                        Key::Threads => &mut fields.threads,
                        Key::WorkingThreads => &mut fields.working_threads,
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value::<Field<'de>>()?).filter(|v| *v != Field::Null);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

fn from_fields<'a>(mut f: Fields<'a>, answer_from: &[AnswerKey]) -> Reply<'a> {
    let text = |v: Option<Field<'_>>| v.and_then(|v| v.as_str().map(str::to_owned)).filter(|s| !s.is_empty());
    if let Some(threads) = f.threads {
        return match (count(&threads), f.working_threads.as_ref().and_then(count)) {
            (Some(threads), Some(working)) => Reply::Threads { threads, working },
            _ => unexpected(),
        };
    }
    let ok = match &f.status {
        Some(Field::Json(Value::Number(n))) => n.as_u64() == Some(1),
        Some(Field::Str(s)) => s.trim() == "1",
        Some(Field::Bool(b)) => *b,
        _ => false,
    };
    if ok {
        let value = answer_from.iter().find_map(|key| {
            let slot = match key {
                AnswerKey::Result => &mut f.result,
                AnswerKey::Request => &mut f.request,
            };
            slot.take_if(|v| !is_empty(v))
        });
        return match value {
            Some(value) => Reply::Ok { value, user_agent: text(f.user_agent) },
            None => unexpected(),
        };
    }
    match f.request {
        Some(Field::Str(code)) => classify_code(code.trim(), text(f.error_text)),
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

fn is_empty(value: &Field<'_>) -> bool {
    match value {
        Field::Null => true,
        Field::Str(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// A non-negative integer sent as a number or a numeric string.
fn count(value: &Field<'_>) -> Option<u64> {
    match value {
        Field::Str(s) => s.trim().parse().ok(),
        Field::Json(n) => n.as_u64(),
        _ => None,
    }
}

/// A short, printable description of an unexpected body (the HTML title where there is one).
fn describe(body: &str) -> String {
    let text = body.trim();
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Where every type's answer is today.
    const KEYS: &[AnswerKey] = &[AnswerKey::Result, AnswerKey::Request];

    fn parse(status: u16, body: &str) -> Reply<'_> {
        super::parse(status, body, KEYS)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4_000))]
        /// The shortcut reads exactly what serde_json reads, whenever it reads anything, and
        /// makes the same reply of it.
        #[test]
        fn the_common_shape_reads_what_serde_json_reads(
            text in r#"\{"status":[0-9a ],"request":("([^"\\]|\\["\\nu/]|[\x00-\x1f]){0,6}"|[0-9]{1,22}|-?[0-9.e]{0,4}|null|true) ?\}\}?"#,
        ) {
            if let Some((status, request)) = common_shape(&text) {
                let by_serde = serde_json::from_str::<Fields<'_>>(&text).ok();
                let fields = Fields {
                    status: Some(Field::Json(Value::from(status))),
                    request: Some(request.clone()),
                    ..Fields::default()
                };
                prop_assert_eq!(Some(&fields), by_serde.as_ref(), "{}", text);
                prop_assert_eq!(common_reply(status, request, KEYS), from_fields(fields, KEYS), "{}", text);
            }
        }
    }

    proptest! {
        /// The not-ready shortcut only ever says yes where `parse` reads `NotReady`.
        #[test]
        fn the_not_ready_shortcut_agrees_with_parse(
            status in 0u16..600,
            body in prop_oneof![
                Just(br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#.to_vec()),
                proptest::collection::vec(any::<u8>(), 0..48),
                r#"\{"status":[01],"request":"C[A-Z_]{14,16}"\}
    ?"#.prop_map(String::into_bytes),
            ],
        ) {
            if is_plain_not_ready(&body) {
                prop_assert_eq!(parse(status, std::str::from_utf8(&body).unwrap()), Reply::NotReady);
            }
        }
    }

    #[test]
    fn the_not_ready_shortcut_takes_only_the_exact_bytes() {
        assert!(is_plain_not_ready(br#"{"status":0,"request":"CAPCHA_NOT_READY"}"#));
        for body in [
            &br#"{"status":0,"request":"CAPCHA_NOT_READY"} "#[..],
            br#"{"status":0,"request":"CAPTCHA_NOT_READY"}"#,
            br#"{"status":1,"request":"CAPCHA_NOT_READY"}"#,
            br#"{"status":0,"request":"CAPCHA_NOT_READY""#,
            b"CAPCHA_NOT_READY",
            b"",
        ] {
            assert!(!is_plain_not_ready(body), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn the_common_shape_takes_the_usual_replies_and_leaves_the_rest() {
        for text in [
            r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
            r#"{"status":1,"request":73846221}"#,
            r#"{"status":1,"request":"0"}"#,
        ] {
            assert!(common_shape(text).is_some(), "{text}");
        }
        for text in [
            r#"{"status":1,"request":"a\"b"}"#,
            r#"{"status":1,"request":0123}"#,
            r#"{"status":1,"request":99999999999999999999}"#,
            r#"{"status": 1,"request":"x"}"#,
            r#"{"status":1,"request":"x","error_text":"y"}"#,
            r#"{"status":10,"request":"x"}"#,
        ] {
            assert!(common_shape(text).is_none(), "{text}");
        }
    }

    #[test]
    fn replies_parse_in_every_documented_shape() {
        fn ok(value: Field<'static>, ua: Option<&str>) -> Reply<'static> {
            Reply::Ok { value, user_agent: ua.map(str::to_owned) }
        }
        let code = |c: &str| Reply::Code { code: c.to_owned(), text: None };
        let cases: Vec<(u16, &str, Reply)> = vec![
            (200, r#"{"status":1,"request":"7412"}"#, ok(Field::Str(Cow::Borrowed("7412")), None)),
            (200, r#"{"status":1,"request":73846221}"#, ok(Field::Json(Value::from(73846221u64)), None)),
            (200, r#"{"status":"1","request":"tok"}"#, ok(Field::Str(Cow::Borrowed("tok")), None)),
            (
                200,
                r#"{"status":1,"request":"OK","result":"cf","user_agent":"UA"}"#,
                ok(Field::Str(Cow::Borrowed("cf")), Some("UA")),
            ),
            (200, r#"{"status":1,"request":"tok","result":""}"#, ok(Field::Str(Cow::Borrowed("tok")), None)),
            (200, r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#, Reply::NotReady),
            (200, r#"{"status":0,"request":"CAPTCHA_NOT_READY"}"#, Reply::NotReady),
            (200, "CAPCHA_NOT_READY", Reply::NotReady),
            (200, "  ERROR_UPLOAD\n", code("ERROR_UPLOAD")),
            (200, "OK|tok|with|bars", ok(Field::Str(Cow::Borrowed("tok|with|bars")), None)),
            (
                200,
                r#"{"status":0,"request":"ERROR_PAGEURL","error_text":"bad url"}"#,
                Reply::Code { code: "ERROR_PAGEURL".into(), text: Some("bad url".into()) },
            ),
            (500, r#"{"status":0,"request":"ERROR_SERVER_ERROR"}"#, code("ERROR_SERVER_ERROR")),
            (200, r#"{"threads":"5","working_threads":2}"#, Reply::Threads { threads: 5, working: 2 }),
            (200, "\u{feff}{\"status\":1,\"request\":\"bom\"}", ok(Field::Str(Cow::Borrowed("bom")), None)),
            (200, "IP_BANNED", code("IP_BANNED")),
            (200, "ERROR: 1001", code("ERROR: 1001")),
        ];
        for (status, body, expected) in cases {
            assert_eq!(parse(status, body), expected, "{body}");
        }
        for (status, body) in [
            (502, "<html><head><title>502 Bad Gateway</title></head></html>"),
            (200, ""),
            (200, "   "),
            (200, "<!DOCTYPE html>"),
            (200, r#"{"status":1}"#),
            (200, r#"{"status":1,"request":""}"#),
            (200, r#"{"status":0,"request":"maybe"}"#),
            (503, r#"{"status":1,"request":"7412"}"#),
            (200, "OK"),
            (200, "\u{0}\u{1}\u{2}"),
            (200, r#"{"status":0,"request":"ERROR_X","#),
        ] {
            assert!(matches!(parse(status, body), Reply::Unexpected { .. }), "{status} {body:?}");
        }
        match parse(502, "<html><head><title>502 Bad Gateway</title></head></html>") {
            Reply::Unexpected { status, what } => {
                assert_eq!((status, what.as_str()), (502, "an HTML page titled \"502 Bad Gateway\""))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(200, "\u{FFFD}\u{FFFD}{"), Reply::Unexpected { .. }));
    }

    /// The caller's `answer_from` decides where the answer is: in its order, skipping keys that
    /// are absent or empty, and a success with nothing under those keys is unreadable.
    #[test]
    fn the_answer_is_under_the_first_key_the_caller_names() {
        let both = r#"{"status":1,"request":"OK","result":"cf"}"#;
        let value = |reply: Reply<'static>| match reply {
            Reply::Ok { value: Field::Str(s), .. } => Some(s.into_owned()),
            _ => None,
        };
        assert_eq!(value(super::parse(200, both, &[AnswerKey::Request, AnswerKey::Result])).as_deref(), Some("OK"));
        assert_eq!(value(super::parse(200, both, &[AnswerKey::Result])).as_deref(), Some("cf"));
        let only_request = r#"{"status":1,"request":"7412"}"#;
        assert!(matches!(super::parse(200, only_request, &[AnswerKey::Result]), Reply::Unexpected { .. }));
        assert!(matches!(super::parse(200, "OK|tok", &[AnswerKey::Result]), Reply::Unexpected { .. }));
    }
}
