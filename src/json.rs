//! A small JSON value, parser and printer.
//!
//! Why not serde_json: the engine ships as a WebAssembly component with a 150 KiB budget, and
//! serde_json's generic machinery (plus BTreeMap and float tables) cost more than half of it.
//! This module is the only JSON code in the component. It is tested against serde_json as an
//! oracle (`tests/json.rs`): same acceptance of valid documents, same compact output.
//!
//! Numbers keep their literal text, so integers of any size round-trip exactly and no float
//! parsing or printing code is linked; `as_f64` converts decimal text when asked.
//! Objects keep insertion order and reject duplicate keys. Parsed strings and numbers borrow
//! from the source text unless they hold escapes, so reading a reply allocates little.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A JSON value, borrowing its text from the parsed document where it can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    /// The number's literal text, validated against the JSON grammar.
    Number(Cow<'a, str>),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// Bytes that end a run of plain string content: `"`, `\\` and control characters.
const ENDS_RUN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// At most this many nested arrays and objects (replies and snapshots are shallow).
const MAX_DEPTH: usize = 64;

impl<'a> Json<'a> {
    /// Parses a complete JSON document (surrounding whitespace allowed).
    pub fn parse(text: &'a str) -> Result<Json<'a>, ParseError> {
        let mut parser = Parser { text, bytes: text.as_bytes(), pos: 0 };
        parser.skip_ws();
        let value = parser.value(0)?;
        parser.skip_ws();
        if parser.pos != parser.bytes.len() {
            return Err(parser.error("trailing characters"));
        }
        Ok(value)
    }

    /// Parses a document that must be an object, handing each field to `field` in order
    /// without building the object (no allocation for the object itself; a repeated key is
    /// handed over again).
    pub fn parse_object_with(text: &'a str, mut field: impl FnMut(Cow<'a, str>, Json<'a>)) -> Result<(), ParseError> {
        let mut parser = Parser { text, bytes: text.as_bytes(), pos: 0 };
        parser.skip_ws();
        if parser.peek() != Some(b'{') {
            return Err(parser.error("expected an object"));
        }
        parser.object_fields(0, &mut |_, key, value| {
            field(key, value);
            Ok(())
        })?;
        parser.skip_ws();
        if parser.pos != parser.bytes.len() {
            return Err(parser.error("trailing characters"));
        }
        Ok(())
    }

    /// Compact JSON text (the same bytes serde_json writes for the same value).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    /// Indented JSON text (two spaces, like serde_json's pretty printer), for files people read.
    pub fn to_pretty(&self) -> String {
        let mut out = String::new();
        self.write_pretty(&mut out, 0);
        out
    }

    fn write_pretty(&self, out: &mut String, indent: usize) {
        let newline = |out: &mut String, level: usize| {
            out.push('\n');
            out.extend(std::iter::repeat_n("  ", level));
        };
        match self {
            Json::Array(items) if !items.is_empty() => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i > 0 { "," } else { "" });
                    newline(out, indent + 1);
                    item.write_pretty(out, indent + 1);
                }
                newline(out, indent);
                out.push(']');
            }
            Json::Object(fields) if !fields.is_empty() => {
                out.push('{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    out.push_str(if i > 0 { "," } else { "" });
                    newline(out, indent + 1);
                    write_string(key, out);
                    out.push_str(": ");
                    value.write_pretty(out, indent + 1);
                }
                newline(out, indent);
                out.push('}');
            }
            other => other.write(out),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(n),
            Json::String(s) => write_string(s, out),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(key, out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    /// The value under `key`, if this is an object holding it.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object()?.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn as_object(&self) -> Option<&[(Cow<'a, str>, Json<'a>)]> {
        match self {
            Json::Object(fields) => Some(fields),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// A non-negative integer literal that fits in `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// An integer literal that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    /// Any number, as the nearest `f64` this simple conversion gives (exact for the short
    /// decimals the service sends: scores, balances).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => decimal_to_f64(n),
            _ => None,
        }
    }

    /// An object from `(key, value)` pairs.
    pub fn object<K: Into<Cow<'a, str>>>(fields: impl IntoIterator<Item = (K, Json<'a>)>) -> Json<'a> {
        Json::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// The same value owning all its text.
    pub fn into_owned(self) -> Json<'static> {
        let own = |text: Cow<'a, str>| Cow::Owned(text.into_owned());
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Number(n) => Json::Number(own(n)),
            Json::String(s) => Json::String(own(s)),
            Json::Array(items) => Json::Array(items.into_iter().map(Json::into_owned).collect()),
            Json::Object(fields) => Json::Object(fields.into_iter().map(|(k, v)| (own(k), v.into_owned())).collect()),
        }
    }
}

impl<'a> From<&'a str> for Json<'a> {
    fn from(s: &'a str) -> Json<'a> {
        Json::String(Cow::Borrowed(s))
    }
}

impl From<String> for Json<'_> {
    fn from(s: String) -> Self {
        Json::String(Cow::Owned(s))
    }
}

impl From<bool> for Json<'_> {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}

impl From<u64> for Json<'_> {
    fn from(n: u64) -> Self {
        Json::Number(Cow::Owned(n.to_string()))
    }
}

impl From<u32> for Json<'_> {
    fn from(n: u32) -> Self {
        Json::Number(Cow::Owned(n.to_string()))
    }
}

impl From<i64> for Json<'_> {
    fn from(n: i64) -> Self {
        Json::Number(Cow::Owned(n.to_string()))
    }
}

impl<'a, T: Into<Json<'a>>> From<Option<T>> for Json<'a> {
    fn from(value: Option<T>) -> Json<'a> {
        value.map_or(Json::Null, Into::into)
    }
}

/// Why a document is not JSON, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the problem.
    pub offset: usize,
    pub message: &'static str,
    /// The document ended before the value did.
    pub eof: bool,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

/// Receives the fields of an object as they are parsed.
type FieldSink<'a, 'f> = dyn FnMut(usize, Cow<'a, str>, Json<'a>) -> Result<(), ParseError> + 'f;

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn error(&self, message: &'static str) -> ParseError {
        ParseError { offset: self.pos, message, eof: self.pos >= self.bytes.len() }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, message: &'static str) -> Result<(), ParseError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(message))
        }
    }

    fn literal(&mut self, word: &'static [u8], value: Json<'a>) -> Result<Json<'a>, ParseError> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(value)
        } else if end > self.bytes.len() && word.starts_with(&self.bytes[self.pos..]) {
            self.pos = self.bytes.len();
            Err(self.error("unexpected end of input"))
        } else {
            Err(self.error("expected a value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json<'a>, ParseError> {
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some(b'n') => self.literal(b"null", Json::Null),
            Some(b't') => self.literal(b"true", Json::Bool(true)),
            Some(b'f') => self.literal(b"false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'[' | b'{') if depth >= MAX_DEPTH => Err(self.error("nested too deeply")),
            Some(b'[') => self.array(depth),
            Some(b'{') => self.object(depth),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a value")),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json<'a>, ParseError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json<'a>, ParseError> {
        let mut fields: Vec<(Cow<'a, str>, Json<'a>)> = Vec::with_capacity(4);
        self.object_fields(depth, &mut |key_at, key, value| {
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(ParseError { offset: key_at, message: "duplicate key", eof: false });
            }
            fields.push((key, value));
            Ok(())
        })?;
        Ok(Json::Object(fields))
    }

    /// Parses an object at `pos`, handing each `(key offset, key, value)` to `field`.
    fn object_fields(&mut self, depth: usize, field: &mut FieldSink<'a, '_>) -> Result<(), ParseError> {
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key"));
            }
            let key_at = self.pos;
            let key = self.string()?;
            self.skip_ws();
            self.expect(b':', "expected `:`")?;
            self.skip_ws();
            let value = self.value(depth + 1)?;
            field(key_at, key, value)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Json<'a>, ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.error("invalid number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("invalid number"));
            }
        }
        // The grammar above only admits ASCII, so both ends are character boundaries.
        let text = self.text.get(start..self.pos).ok_or_else(|| self.error("invalid number"))?;
        Ok(Json::Number(Cow::Borrowed(text)))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let mut n = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                _ => return Err(self.error("invalid \\u escape")),
            };
            n = n * 16 + u32::from(digit);
            self.pos += 1;
        }
        Ok(n)
    }

    /// A string; borrowed from the source unless it holds escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, ParseError> {
        self.pos += 1;
        let mut out: Option<String> = None;
        loop {
            let start = self.pos;
            let rest = self.bytes.get(start..).unwrap_or_default();
            self.pos = start + rest.iter().position(|&b| ENDS_RUN[usize::from(b)]).unwrap_or(rest.len());
            // The run starts and stops at ASCII bytes, so both ends are character boundaries.
            let run = self.text.get(start..self.pos).ok_or_else(|| self.error("invalid UTF-8"))?;
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(match out {
                        None => Cow::Borrowed(run),
                        Some(mut text) => {
                            text.push_str(run);
                            Cow::Owned(text)
                        }
                    });
                }
                Some(b'\\') => {
                    let text = out.get_or_insert_with(String::new);
                    text.push_str(run);
                    self.pos += 1;
                    let escaped = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            out.get_or_insert_with(String::new).push(c);
                            continue;
                        }
                        _ => return Err(self.error("invalid escape")),
                    };
                    self.pos += 1;
                    text.push(escaped);
                }
                Some(_) => return Err(self.error("control character in string")),
                None => return Err(self.error("unexpected end of input")),
            }
        }
    }

    /// The character after `\u` (a surrogate pair takes a second `\uXXXX`).
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let first = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&first) {
            if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                return Err(self.error("unpaired surrogate"));
            }
            self.pos += 2;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(self.error("unpaired surrogate"));
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        } else {
            first
        };
        char::from_u32(code).ok_or_else(|| self.error("unpaired surrogate"))
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Converts a JSON number literal to `f64` by scaling its decimal digits (no float tables).
fn decimal_to_f64(text: &str) -> Option<f64> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let negative = mantissa.starts_with('-');
    let mantissa = mantissa.trim_start_matches('-');
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut value = 0.0f64;
    for b in int.bytes().chain(frac.bytes()) {
        value = value * 10.0 + f64::from(b.checked_sub(b'0').filter(|d| *d <= 9)?);
    }
    let scale = exponent.checked_sub(i32::try_from(frac.len()).ok()?)?;
    let value = if scale >= 0 { value * 10f64.powi(scale) } else { value / 10f64.powi(-scale) };
    Some(if negative { -value } else { value }).filter(|v| v.is_finite())
}

/// An object being read; every getter names the field in its error.
pub(crate) struct Fields<'a> {
    fields: &'a [(Cow<'a, str>, Json<'a>)],
    what: &'static str,
}

impl<'a> Fields<'a> {
    /// Reads `value` as an object, rejecting keys outside `allowed`.
    pub fn new(value: &'a Json<'a>, what: &'static str, allowed: &[&str]) -> Result<Fields<'a>, String> {
        let fields = value.as_object().ok_or_else(|| format!("{what} must be an object"))?;
        if let Some((unknown, _)) = fields.iter().find(|(k, _)| !allowed.contains(&k.as_ref())) {
            return Err(format!("{what} has an unknown field `{}`", unknown.chars().take(64).collect::<String>()));
        }
        Ok(Fields { fields, what })
    }

    fn present(&self, key: &str) -> Option<&'a Json<'a>> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, expected: &str) -> String {
        format!("{}.{key} must be {expected}", self.what)
    }

    fn missing(&self, key: &str) -> String {
        format!("{}.{key} is missing", self.what)
    }

    pub fn value(&self, key: &str) -> Result<&'a Json<'a>, String> {
        self.present(key).ok_or_else(|| self.missing(key))
    }

    pub fn opt_value(&self, key: &str) -> Option<&'a Json<'a>> {
        self.present(key)
    }

    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, String> {
        self.present(key).map(|v| v.as_u64().ok_or_else(|| self.wrong(key, "a non-negative integer"))).transpose()
    }

    pub fn u64(&self, key: &str) -> Result<u64, String> {
        self.opt_u64(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>, String> {
        self.opt_u64(key)?.map(|n| u32::try_from(n).map_err(|_| self.wrong(key, "at most 4294967295"))).transpose()
    }

    pub fn u32(&self, key: &str) -> Result<u32, String> {
        self.opt_u32(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, String> {
        self.present(key).map(|v| v.as_str().ok_or_else(|| self.wrong(key, "a string"))).transpose()
    }

    pub fn str(&self, key: &str) -> Result<&'a str, String> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.opt_str(key)?.map(str::to_owned))
    }

    /// A string field that must be one of the names `parse` accepts.
    pub fn name<T>(&self, key: &str, parse: fn(&str) -> Option<T>) -> Result<T, String> {
        parse(self.str(key)?).ok_or_else(|| self.wrong(key, "a known name"))
    }
}

/// An object holding exactly one key (an enum case): the key and its value.
pub(crate) fn single<'a>(value: &'a Json<'a>, what: &str) -> Result<(&'a str, &'a Json<'a>), String> {
    match value.as_object() {
        Some([(key, inner)]) => Ok((key.as_ref(), inner)),
        _ => Err(format!("{what} must be an object with one key")),
    }
}
