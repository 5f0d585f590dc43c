//! The HTTP side of the contract: the requests the engine asks a host to send, the transport
//! errors a host reports back, and the API key (which goes only into request bodies, or, for a
//! keyless solve, is inserted by the host with [`HttpRequest::with_key`] at send time).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use thiserror::Error;

use crate::codes;
use crate::error::ValidationError;
use crate::image::Image;
use crate::registry::MULTIPART_FILE_PARAM;

/// A CaptchaAI API key: 32 ASCII letters and digits. Its `Debug` never shows it, and the engine
/// never puts it anywhere but a request body. Shared: a host that starts every solve with a
/// clone of its one key counts a reference instead of copying the key (an allocation and a free
/// fewer per solve).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(Arc<str>);

impl ApiKey {
    /// Checks the key's shape locally, so a malformed key never reaches the service (repeated
    /// bad-key requests get the IP banned).
    pub fn new(key: impl AsRef<str>) -> Result<ApiKey, ValidationError> {
        let key = key.as_ref();
        if key.len() != 32 || crate::text::any_byte(key, |b| !b.is_ascii_alphanumeric()) {
            return Err(ValidationError::new(
                codes::INVALID_KEY,
                Some("key".into()),
                format!("the API key must be 32 letters and digits (got {} characters)", key.chars().count()),
            ));
        }
        Ok(ApiKey(key.into()))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `reply` with every occurrence of this key replaced by `<redacted>`, exactly as a solve
    /// treats a reply before reading it (borrowed when the key does not occur). For hosts of a
    /// keyless solve, which store the replies they feed back (the solve has no key to remove).
    pub fn redact<'a>(&self, reply: &'a str) -> Cow<'a, str> {
        crate::text::redact(Cow::Borrowed(reply), self.expose())
    }
}

/// What a request body holds where the key goes: the key, or, in a keyless solve's requests, the
/// placeholder [`KEY_PLACEHOLDER`] that [`HttpRequest::with_key`] replaces.
#[derive(Clone)]
pub(crate) enum KeySlot {
    Key(ApiKey),
    Placeholder,
}

impl KeySlot {
    /// The text written into bodies.
    fn text(&self) -> &str {
        match self {
            KeySlot::Key(key) => key.expose(),
            KeySlot::Placeholder => KEY_PLACEHOLDER,
        }
    }

    /// The secret to keep out of replies and messages ("" for a keyless solve: nothing to hide).
    pub(crate) fn secret(&self) -> &str {
        match self {
            KeySlot::Key(key) => key.expose(),
            KeySlot::Placeholder => "",
        }
    }
}

/// What a keyless solve's request bodies hold where the key goes (the first field of every body
/// the engine renders), until [`HttpRequest::with_key`] puts the key there. Not a key's shape (32
/// letters and digits): CaptchaAI refuses a body still holding it with `ERROR_WRONG_USER_KEY`.
pub const KEY_PLACEHOLDER: &str = "{captchaai-key}";

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// What a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestKind {
    /// `in.php` (or `solve.php` in synchronous mode): create a task.
    Submit,
    /// `res.php?action=get`: ask for the answer.
    Poll,
    /// `res.php?action=threadsinfo`: the plan's threads and how many are busy.
    ThreadsInfo,
    /// `res.php?action=getbalance`.
    Balance,
    /// `res.php?action=reportgood` / `reportbad` ([`crate::endpoint::report_request`]).
    Report,
}

impl RequestKind {
    /// The snake_case name (`submit`, `poll`, `threads_info`, `balance`, `report`).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Submit => "submit",
            RequestKind::Poll => "poll",
            RequestKind::ThreadsInfo => "threads_info",
            RequestKind::Balance => "balance",
            RequestKind::Report => "report",
        }
    }
}

/// A request body. Not `#[non_exhaustive]` on purpose: a host must send every body, so a new
/// kind would change the driving contract, which a host should learn from the compiler.
#[derive(Clone, PartialEq, Eq)]
pub enum Body {
    /// `application/x-www-form-urlencoded` text (shared: a solve hands out the same poll body
    /// again without copying it).
    Form(Arc<str>),
    /// `multipart/form-data` bytes (image file uploads only).
    Multipart(Vec<u8>),
}

impl Body {
    /// The body's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Form(text) => text.as_bytes(),
            Body::Multipart(bytes) => bytes,
        }
    }
}

/// An HTTP request for the host to send at `at`. Always a `POST` with the key in the body, or,
/// for a keyless solve's requests ([`HttpRequest::is_keyless`]), with [`KEY_PLACEHOLDER`] where
/// the key goes: send only what [`HttpRequest::with_key`] makes of those.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpRequest {
    /// Feed the reply back with this id.
    pub id: u32,
    /// What the request is for.
    pub kind: RequestKind,
    /// Send at or after this time (epoch ms); a reply to an earlier send is [`crate::Misuse::NotDue`].
    pub at: u64,
    /// Where to POST it (shared with the solve that made it: no copy per request).
    pub url: Arc<str>,
    /// The `Content-Type` header value.
    pub content_type: Cow<'static, str>,
    /// The body (it holds the key, or in a keyless request the placeholder).
    pub body: Body,
    /// Give up on the reply after this long and report [`TransportError::Timeout`].
    pub timeout_ms: u64,
    /// Where the key (or the placeholder) sits in the body, so `Debug` can hide it and
    /// [`HttpRequest::with_key`] can fill it.
    key_span: Range<usize>,
    /// Whether `key_span` holds the placeholder instead of the key.
    keyless: bool,
}

/// Why [`HttpRequest::with_key`] refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum WithKeyError {
    /// The request holds a key already, or its body has no placeholder (not a request of a
    /// keyless solve, or one changed since).
    #[error("not a keyless request: its body has no key placeholder")]
    NotKeyless,
}

impl HttpRequest {
    /// Rebuilds a request from its parts (for hosts that receive requests across a boundary,
    /// such as the WebAssembly component), locating the key so `Debug` can still hide it.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        id: u32,
        kind: RequestKind,
        at: u64,
        url: impl Into<Arc<str>>,
        content_type: impl Into<Cow<'static, str>>,
        body: Body,
        timeout_ms: u64,
        key: &ApiKey,
    ) -> HttpRequest {
        let content_type = content_type.into();
        let needle = key.expose().as_bytes();
        let bytes = body.as_bytes();
        let start = memchr::memmem::find(bytes, needle).unwrap_or(bytes.len());
        let key_span = start..(start + needle.len()).min(bytes.len());
        HttpRequest { id, kind, at, url: url.into(), content_type, body, timeout_ms, key_span, keyless: false }
    }

    /// Rebuilds a keyless request from its parts (as [`HttpRequest::from_parts`] does), locating
    /// the placeholder: the first occurrence of [`KEY_PLACEHOLDER`], which in every body the
    /// engine renders is the key's field, written first. [`WithKeyError::NotKeyless`] when the
    /// body holds none.
    pub fn keyless_from_parts(
        id: u32,
        kind: RequestKind,
        at: u64,
        url: impl Into<Arc<str>>,
        content_type: impl Into<Cow<'static, str>>,
        body: Body,
        timeout_ms: u64,
    ) -> Result<HttpRequest, WithKeyError> {
        let start =
            memchr::memmem::find(body.as_bytes(), KEY_PLACEHOLDER.as_bytes()).ok_or(WithKeyError::NotKeyless)?;
        let key_span = start..start + KEY_PLACEHOLDER.len();
        let content_type = content_type.into();
        Ok(HttpRequest { id, kind, at, url: url.into(), content_type, body, timeout_ms, key_span, keyless: true })
    }

    /// Whether this is a keyless solve's request, which holds [`KEY_PLACEHOLDER`] where the key
    /// goes: never send it as it is, send what [`HttpRequest::with_key`] makes of it.
    pub fn is_keyless(&self) -> bool {
        self.keyless
    }

    /// The request to send: this keyless request with `key` in place of the placeholder, byte
    /// for byte the request a solve created with `key` asks for at the same point (the form
    /// body's escaping and the multipart boundary do not depend on the key). A request that
    /// holds a key already is [`WithKeyError::NotKeyless`].
    pub fn with_key(&self, key: &ApiKey) -> Result<HttpRequest, WithKeyError> {
        if !self.keyless {
            return Err(WithKeyError::NotKeyless);
        }
        let key_text = key.expose().as_bytes();
        let span = self.key_span.clone();
        let spliced = |bytes: &[u8]| -> Vec<u8> {
            let mut out = Vec::with_capacity(bytes.len() + key_text.len() - span.len());
            out.extend_from_slice(&bytes[..span.start]);
            out.extend_from_slice(key_text);
            out.extend_from_slice(&bytes[span.end..]);
            out
        };
        let body = match &self.body {
            Body::Form(text) => {
                let (head, tail) = (&text[..span.start], &text[span.end..]);
                Body::Form(format!("{head}{}{tail}", key.expose()).into())
            }
            Body::Multipart(bytes) => Body::Multipart(spliced(bytes)),
        };
        Ok(HttpRequest {
            body,
            key_span: span.start..span.start + key_text.len(),
            keyless: false,
            url: self.url.clone(),
            content_type: self.content_type.clone(),
            ..*self
        })
    }

    pub(crate) fn form(
        id: u32,
        kind: RequestKind,
        at: u64,
        url: Arc<str>,
        body: FormBody,
        timeout_ms: u64,
    ) -> HttpRequest {
        HttpRequest {
            id,
            kind,
            at,
            url,
            content_type: Cow::Borrowed(FORM_CONTENT_TYPE),
            body: Body::Form(body.text),
            timeout_ms,
            key_span: body.key_span,
            keyless: body.keyless,
        }
    }

    pub(crate) fn multipart(id: u32, at: u64, url: Arc<str>, body: MultipartBody, timeout_ms: u64) -> HttpRequest {
        HttpRequest {
            id,
            kind: RequestKind::Submit,
            at,
            url,
            content_type: Cow::Owned(format!("multipart/form-data; boundary={}", body.boundary)),
            body: Body::Multipart(body.bytes),
            timeout_ms,
            key_span: body.key_span,
            keyless: body.keyless,
        }
    }

    /// The body as text with the key replaced by `<redacted>` (binary parts shown lossily).
    pub fn redacted_body(&self) -> String {
        let bytes = self.body.as_bytes();
        let span = self.key_span.start.min(bytes.len())..self.key_span.end.min(bytes.len());
        let mut text = String::from_utf8_lossy(&bytes[..span.start]).into_owned();
        text.push_str("<redacted>");
        text.push_str(&String::from_utf8_lossy(&bytes[span.end..]));
        text
    }
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("at", &self.at)
            .field("url", &self.url)
            .field("content_type", &self.content_type)
            .field("body", &self.redacted_body())
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

/// How a request failed without a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportError {
    /// No reply within the request's `timeout_ms`.
    Timeout,
    /// Could not connect: the request was not delivered.
    Connect,
    /// The connection broke after sending: the request may have been processed.
    Broken,
}

impl TransportError {
    /// The snake_case name (`timeout`, `connect`, `broken`).
    pub fn as_str(self) -> &'static str {
        match self {
            TransportError::Timeout => "timeout",
            TransportError::Connect => "connect",
            TransportError::Broken => "broken",
        }
    }

    /// The error with this name.
    pub fn parse(name: &str) -> Option<TransportError> {
        [TransportError::Timeout, TransportError::Connect, TransportError::Broken]
            .into_iter()
            .find(|e| e.as_str() == name)
    }
}

pub(crate) const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// A finished form body with the key's position recorded (cheap to clone).
#[derive(Clone)]
pub(crate) struct FormBody {
    text: Arc<str>,
    key_span: Range<usize>,
    keyless: bool,
}

/// Writes `key=<key>&name=value...&json=1`, form-urlencoded, straight into the body's text:
/// plain runs are pushed as `&str` slices (cut at ASCII bytes, so always on character
/// boundaries) and escapes as `%XX` characters, so the finished text needs no UTF-8 check (the byte
/// buffer checked once at the end cost ~240 more native instructions per body, callgrind).
pub(crate) struct FormWriter {
    text: String,
    key_span: Range<usize>,
    keyless: bool,
}

impl FormWriter {
    /// Starts with the key (or the placeholder); `capacity` is a hint for what follows.
    pub fn new(key: &KeySlot, capacity: usize) -> FormWriter {
        let mut text = String::with_capacity(48 + capacity);
        text.push_str("key=");
        let start = text.len();
        // Letters and digits, or the placeholder: written as they are, unescaped.
        text.push_str(key.text());
        FormWriter { key_span: start..text.len(), text, keyless: matches!(key, KeySlot::Placeholder) }
    }

    /// Appends `&name=value`.
    pub fn pair(mut self, name: &str, value: &str) -> FormWriter {
        self.push(name, value);
        self
    }

    /// Appends `&name=value` in place. Names are the registry's and `extra`'s (letters, digits,
    /// `_`, `-`: [`is_plain_name`]), written as they are; values are escaped.
    pub fn push(&mut self, name: &str, value: &str) {
        debug_assert!(is_plain_name(name), "form name {name:?} needs escaping");
        self.text.push('&');
        self.text.push_str(name);
        self.text.push('=');
        url_encode_into(&mut self.text, value);
    }

    pub fn finish(mut self) -> FormBody {
        self.text.push_str("&json=1");
        FormBody { text: self.text.into(), key_span: self.key_span, keyless: self.keyless }
    }
}

/// Whether a parameter name is written as it is: ASCII letters, digits, `_` and `-` (what the
/// registry uses and `extra` allows).
pub(crate) fn is_plain_name(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// Bytes sent as they are in a form value; everything else is `%XX` (space: `+`).
const PLAIN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'*');
        b += 1;
    }
    table
};

/// Appends `value` encoded as `application/x-www-form-urlencoded` (space as `+`): plain runs
/// copied whole, every other byte `%XX`. The same bytes as `form_urlencoded::byte_serialize`,
/// hand-written because that crate costs more per canned reCAPTCHA solve (callgrind, A/B):
/// natively 8.79k instructions against 7.81k (+12.6%, over 2,000 solves: past the 1 µs goal on
/// a 0.95 µs day), through wasmtime 65.0k against 61.8k (+5%, `driver-bench --canned`).
fn url_encode_into(out: &mut String, value: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = value.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        let run = start + plain_prefix(&bytes[start..]);
        if run > start {
            // An ASCII byte starts the run and an ASCII byte (or the end) precedes `run`: both
            // ends are character boundaries.
            out.push_str(&value[start..run]);
        }
        let Some(&b) = bytes.get(run) else { return };
        if b == b' ' {
            out.push('+');
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
        start = run + 1;
    }
}

/// The length of the plain run `bytes` starts with. Eight bytes at a time, with every lookup of a
/// chunk made (one branch per chunk, not per byte), then byte by byte: ~170 fewer native
/// instructions per reCAPTCHA submit body than `position` alone (callgrind).
fn plain_prefix(bytes: &[u8]) -> usize {
    let mut n = 0;
    for chunk in bytes.chunks_exact(8) {
        if !chunk.iter().fold(true, |all, &b| all & PLAIN[usize::from(b)]) {
            break;
        }
        n += 8;
    }
    n + bytes[n..].iter().position(|&b| !PLAIN[usize::from(b)]).unwrap_or(bytes.len() - n)
}

/// A multipart body with its boundary and the key's position recorded.
pub(crate) struct MultipartBody {
    bytes: Vec<u8>,
    boundary: String,
    key_span: Range<usize>,
    keyless: bool,
}

/// Encodes `key`, the params and `json=1` as text parts and the image as a `file` part. The
/// boundary is derived from the content (no randomness) and never occurs inside it.
/// Hand-written: the one synchronous builder crate, form-data-builder, draws its boundary from
/// `thread_rng` and the system clock (which the engine never reads, and the component cannot
/// import), and the other writers (reqwest's, common-multipart-rfc7578) are async streams.
pub(crate) fn multipart_body(key: &KeySlot, params: &[(String, String)], image: &Image, bytes: &[u8]) -> MultipartBody {
    let boundary = boundary_for(params, bytes);
    let mut out = Vec::with_capacity(bytes.len() + 512);
    let part = |out: &mut Vec<u8>, name: &str| {
        out.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
        );
    };
    part(&mut out, "key");
    let start = out.len();
    out.extend_from_slice(key.text().as_bytes());
    let key_span = start..out.len();
    out.extend_from_slice(b"\r\n");
    for (name, value) in params.iter().map(|(n, v)| (n.as_str(), v.as_str())).chain([("json", "1")]) {
        part(&mut out, name);
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{MULTIPART_FILE_PARAM}\"; filename=\"captcha.{}\"\r\nContent-Type: {}\r\n\r\n",
            image.format.extension(),
            image.format.mime()
        )
        .as_bytes(),
    );
    out.extend_from_slice(bytes);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    MultipartBody { bytes: out, boundary, key_span, keyless: matches!(key, KeySlot::Placeholder) }
}

fn boundary_for(params: &[(String, String)], bytes: &[u8]) -> String {
    let mut seed = fnv1a(bytes, FNV_OFFSET);
    for (name, value) in params {
        seed = fnv1a(value.as_bytes(), fnv1a(name.as_bytes(), seed));
    }
    loop {
        let boundary = format!("captchaai-engine-{seed:016x}");
        let clashes = |hay: &[u8]| hay.windows(boundary.len()).any(|w| w == boundary.as_bytes());
        if !clashes(bytes) && !params.iter().any(|(n, v)| clashes(n.as_bytes()) || clashes(v.as_bytes())) {
            return boundary;
        }
        seed = fnv1a(&seed.to_le_bytes(), seed);
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv1a(bytes: &[u8], mut hash: u64) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
