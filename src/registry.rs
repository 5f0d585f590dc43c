//! The captcha-type registry: one row per supported type, holding everything that differs between
//! types (the `in.php` method, the task fields and their wire names, where the answer is and its
//! shape, whether a user agent comes back, whether a proxy is required, timings, token lifetime).
//!
//! Task JSON uses the field `name`s below; the engine sends each as its `param`. The state machine
//! and validation read only this table.

/// How a task field is checked and encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// Non-empty text without control characters, at most this many characters. JSON numbers
    /// are accepted and written in decimal.
    Text(usize),
    /// An absolute `http://` or `https://` URL.
    Url,
    /// A boolean (or 0/1): `true` sends `1`, `false` sends nothing.
    Flag,
    /// A reCAPTCHA v3 score from 0.1 to 0.9.
    Score,
    /// One of these values (case-insensitive on input; sent as written here).
    Choice(&'static [&'static str]),
    /// An integer in this inclusive range.
    Int(i64, i64),
    /// A proxy for the solver: `host:port` or `user:pass@host:port`.
    Proxy,
    /// A base64 image (a `data:` URI prefix is stripped): jpg, png or gif of an allowed size.
    Image,
    /// Exactly this many base64 images, sent as `param_1`..`param_N` data URIs.
    ImageSet(usize),
    /// How an image is sent: `base64` (form field) or `multipart` (file upload).
    Upload,
    /// Opt-in synchronous image solving through `solve.php` (no polling).
    Sync,
}

/// One field of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpec {
    /// The name in task JSON.
    pub name: &'static str,
    /// The `in.php` parameter (empty for fields that change how the task is sent).
    pub param: &'static str,
    /// How the value is checked and encoded.
    pub kind: FieldKind,
    /// Whether a task of the type must give the field.
    pub required: bool,
    /// The value used when the task leaves the field out.
    pub default: Option<&'static str>,
}

const fn req(name: &'static str, param: &'static str, kind: FieldKind) -> FieldSpec {
    FieldSpec { name, param, kind, required: true, default: None }
}

const fn opt(name: &'static str, param: &'static str, kind: FieldKind) -> FieldSpec {
    FieldSpec { name, param, kind, required: false, default: None }
}

/// The shape of a solved answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerShape {
    /// An opaque token or text, returned as is.
    Text,
    /// A list of cell numbers (grid: as the service numbers them; BLS: 1-based).
    Cells,
    /// A JSON object that must hold these keys (none listed: any object).
    Object(&'static [&'static str]),
}

/// One captcha type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeSpec {
    /// The `type` in task JSON.
    pub name: &'static str,
    /// The `in.php` `method`.
    pub method: &'static str,
    /// Parameters every task of this type sends.
    pub fixed: &'static [(&'static str, &'static str)],
    /// The task fields, in the order they are sent.
    pub fields: &'static [FieldSpec],
    /// The shape of the solved answer.
    pub answer: AnswerShape,
    /// Wait between an accepted submit and the first poll.
    pub initial_wait_ms: u64,
    /// Wait between polls (never below [`MIN_POLL_INTERVAL_MS`]).
    pub poll_interval_ms: u64,
    /// Default deadline, counted from the original submit.
    pub deadline_ms: u64,
    /// How long a solved token stays usable, counted from when the answer arrived; `None` where
    /// the lifetime is set by the site or unknown (see the README's token table).
    pub token_ttl_ms: Option<u64>,
}

impl TypeSpec {
    /// The field with this task-JSON name.
    pub fn field(&self, name: &str) -> Option<&'static FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// The service is never polled faster than this, whatever a task or config asks.
pub const MIN_POLL_INTERVAL_MS: u64 = 5_000;
/// The shortest wait between an accepted submit and the first poll: the official SDK's first
/// wait for images (the docs' guide says 5 s; no source says the service refuses an earlier
/// poll, which is unconfirmed either way: a too-early poll costs one `CAPCHA_NOT_READY`).
pub const MIN_FIRST_WAIT_MS: u64 = 1_000;
/// The smallest image the service accepts (the docs say 100 bytes; one page says 1 KB).
pub const MIN_IMAGE_BYTES: usize = 100;
/// The largest image the service accepts (the current docs say 1024 KB; older ones 100 KB).
pub const MAX_IMAGE_BYTES: usize = 1024 * 1024;
/// The largest side of a BLS cell image, in pixels (the official SDK's guard).
pub const MAX_BLS_SIDE_PX: u32 = 1_000;
/// The image formats accepted, by the magic bytes their data starts with.
pub const IMAGE_SIGNATURES: &[(&[u8], crate::ImageFormat)] = &[
    (&[0xFF, 0xD8, 0xFF], crate::ImageFormat::Jpeg),
    (b"\x89PNG\r\n\x1a\n", crate::ImageFormat::Png),
    (b"GIF87a", crate::ImageFormat::Gif),
    (b"GIF89a", crate::ImageFormat::Gif),
];
/// The longest [`FieldKind::Url`], in characters.
pub const MAX_URL_CHARS: usize = 2_048;
/// The longest [`FieldKind::Proxy`], in characters.
pub const MAX_PROXY_CHARS: usize = 512;
/// The inclusive range of a [`FieldKind::Score`], in tenths (0.1 to 0.9).
pub const SCORE_TENTHS: (u8, u8) = (1, 9);
/// The values of a [`FieldKind::Upload`] field.
pub const UPLOAD_MODES: &[&str] = &["base64", "multipart"];
/// The longest name of a task's `extra` parameter, in bytes (ASCII letters, digits, `_`, `-`).
pub const MAX_EXTRA_NAME_BYTES: usize = 64;
/// The longest value of a task's `extra` parameter, in bytes (UTF-8).
pub const MAX_EXTRA_VALUE_BYTES: usize = 64 * 1024;
/// The multipart part that carries an uploaded image; `extra` may not use it as a name.
pub const MULTIPART_FILE_PARAM: &str = "file";

const SECOND: u64 = 1_000;
const KEY_LEN: usize = 256;
const TEXT_LEN: usize = 4_096;
const COOKIE_LEN: usize = 16_384;

const GOOGLEKEY: FieldSpec = req("sitekey", "googlekey", FieldKind::Text(KEY_LEN));
const SITEKEY: FieldSpec = req("sitekey", "sitekey", FieldKind::Text(KEY_LEN));
const PAGEURL: FieldSpec = req("pageurl", "pageurl", FieldKind::Url);
const INVISIBLE: FieldSpec = opt("invisible", "invisible", FieldKind::Flag);
const DATA_S: FieldSpec = opt("data_s", "data-s", FieldKind::Text(TEXT_LEN));
const ACTION_OPT: FieldSpec = opt("action", "action", FieldKind::Text(KEY_LEN));
const ACTION_REQ: FieldSpec = req("action", "action", FieldKind::Text(KEY_LEN));
const MIN_SCORE: FieldSpec = opt("min_score", "min_score", FieldKind::Score);
const COOKIES: FieldSpec = opt("cookies", "cookies", FieldKind::Text(COOKIE_LEN));
const USER_AGENT: FieldSpec = opt("user_agent", "userAgent", FieldKind::Text(TEXT_LEN));
const PROXY_OPT: FieldSpec = opt("proxy", "proxy", FieldKind::Proxy);
const PROXY_REQ: FieldSpec = req("proxy", "proxy", FieldKind::Proxy);
const PROXY_TYPES: &[&str] = &["HTTP", "HTTPS", "SOCKS4", "SOCKS5"];
const PROXYTYPE_OPT: FieldSpec = opt("proxytype", "proxytype", FieldKind::Choice(PROXY_TYPES));
const PROXYTYPE_REQ: FieldSpec = req("proxytype", "proxytype", FieldKind::Choice(PROXY_TYPES));
const IMAGE: FieldSpec = req("image", "body", FieldKind::Image);

/// Every supported type. Polls every 5 s (the SDK's and docs' interval). First waits: for each
/// type, a wait near the middle of the range of first waits that beats both the official SDK's
/// schedule and 2captcha-python's on polls per solve *and* answer-to-client delay, on three
/// seeds of `benches/polling/run.sh`'s solve-time mixes (modelled on the docs' and the SDK's
/// figures, not measured live; BENCHMARKS.md has the table). A solve's config can override them.
pub const TYPES: &[TypeSpec] = &[
    TypeSpec {
        name: "recaptcha_v2",
        method: "userrecaptcha",
        fixed: &[],
        fields: &[GOOGLEKEY, PAGEURL, INVISIBLE, DATA_S, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer: AnswerShape::Text,
        initial_wait_ms: 26 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
    },
    TypeSpec {
        name: "recaptcha_v2_enterprise",
        method: "userrecaptcha",
        fixed: &[("enterprise", "1")],
        fields: &[GOOGLEKEY, PAGEURL, INVISIBLE, ACTION_OPT, DATA_S, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer: AnswerShape::Text,
        initial_wait_ms: 26 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
    },
    TypeSpec {
        name: "recaptcha_v3",
        method: "userrecaptcha",
        fixed: &[("version", "v3")],
        fields: &[GOOGLEKEY, PAGEURL, ACTION_REQ, MIN_SCORE, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer: AnswerShape::Text,
        initial_wait_ms: 10 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
    },
    TypeSpec {
        name: "recaptcha_v3_enterprise",
        method: "userrecaptcha",
        fixed: &[("version", "v3"), ("enterprise", "1")],
        fields: &[GOOGLEKEY, PAGEURL, ACTION_REQ, MIN_SCORE, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer: AnswerShape::Text,
        initial_wait_ms: 10 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
    },
    TypeSpec {
        name: "turnstile",
        method: "turnstile",
        fixed: &[],
        fields: &[
            SITEKEY,
            PAGEURL,
            ACTION_OPT,
            opt("data", "data", FieldKind::Text(TEXT_LEN)),
            opt("pagedata", "pagedata", FieldKind::Text(TEXT_LEN)),
            COOKIES,
            USER_AGENT,
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer: AnswerShape::Text,
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(300 * SECOND),
    },
    TypeSpec {
        name: "cloudflare_challenge",
        method: "cloudflare_challenge",
        fixed: &[],
        fields: &[
            PAGEURL,
            PROXY_REQ,
            PROXYTYPE_REQ,
            opt("sitekey", "sitekey", FieldKind::Text(KEY_LEN)),
            USER_AGENT,
            COOKIES,
        ],
        answer: AnswerShape::Text,
        initial_wait_ms: 30 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 300 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "geetest_v3",
        method: "geetest",
        fixed: &[],
        fields: &[
            req("gt", "gt", FieldKind::Text(KEY_LEN)),
            req("challenge", "challenge", FieldKind::Text(KEY_LEN)),
            PAGEURL,
            opt("api_server", "api_server", FieldKind::Text(KEY_LEN)),
            COOKIES,
            USER_AGENT,
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer: AnswerShape::Object(&["challenge", "validate", "seccode"]),
        initial_wait_ms: 17 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "geetest_v4",
        method: "geetest",
        fixed: &[("version", "4")],
        fields: &[
            req("captcha_id", "gt", FieldKind::Text(KEY_LEN)),
            PAGEURL,
            opt("api_server", "api_server", FieldKind::Text(KEY_LEN)),
            COOKIES,
            USER_AGENT,
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer: AnswerShape::Object(&[]),
        initial_wait_ms: 17 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "captchafox",
        method: "captchafox",
        fixed: &[],
        fields: &[SITEKEY, PAGEURL, PROXY_REQ, PROXYTYPE_REQ, COOKIES, USER_AGENT],
        answer: AnswerShape::Text,
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "friendly_captcha",
        method: "friendly_captcha",
        fixed: &[],
        fields: &[
            SITEKEY,
            PAGEURL,
            opt("version", "version", FieldKind::Choice(&["v1", "v2"])),
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer: AnswerShape::Text,
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "lemin",
        method: "lemin",
        fixed: &[],
        fields: &[
            req("captcha_id", "captcha_id", FieldKind::Text(KEY_LEN)),
            req("div_id", "div_id", FieldKind::Text(KEY_LEN)),
            PAGEURL,
            opt("api_server", "apiServer", FieldKind::Text(KEY_LEN)),
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer: AnswerShape::Object(&["answer", "challenge_uuid"]),
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "image",
        method: "base64",
        fixed: &[],
        fields: &[
            IMAGE,
            FieldSpec { default: Some("base64"), ..opt("upload", "", FieldKind::Upload) },
            opt("sync", "", FieldKind::Sync),
            opt("phrase", "phrase", FieldKind::Flag),
            opt("case_sensitive", "regsense", FieldKind::Flag),
            opt("numeric", "numeric", FieldKind::Int(0, 4)),
            opt("min_len", "min_len", FieldKind::Int(0, 20)),
            opt("max_len", "max_len", FieldKind::Int(0, 20)),
            opt("calc", "calc", FieldKind::Flag),
            opt("language", "language", FieldKind::Int(0, 2)),
            opt("lang", "lang", FieldKind::Text(16)),
            opt("instructions", "textinstructions", FieldKind::Text(140)),
        ],
        answer: AnswerShape::Text,
        initial_wait_ms: SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 60 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "grid",
        method: "base64",
        fixed: &[("img_type", "recaptcha")],
        fields: &[
            IMAGE,
            req("instructions", "instructions", FieldKind::Text(TEXT_LEN)),
            FieldSpec { default: Some("3x3"), ..opt("grid_size", "grid_size", FieldKind::Choice(&["3x3", "4x4"])) },
        ],
        answer: AnswerShape::Cells,
        initial_wait_ms: 8 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 60 * SECOND,
        token_ttl_ms: None,
    },
    TypeSpec {
        name: "bls",
        method: "bls",
        fixed: &[],
        fields: &[
            req("instructions", "instructions", FieldKind::Text(KEY_LEN)),
            req("images", "image_base64", FieldKind::ImageSet(9)),
        ],
        answer: AnswerShape::Cells,
        initial_wait_ms: 8 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 60 * SECOND,
        token_ttl_ms: None,
    },
];

/// Types people ask for that CaptchaAI does not solve, with the reason given to the user.
pub const UNSUPPORTED: &[(&str, &str)] = &[(
    "hcaptcha",
    "hCaptcha is not supported by CaptchaAI (the service answers ERROR_SERVER_ERROR for it); \
     supported types are listed in the README",
)];

/// The row for a task-JSON `type`.
pub fn lookup(name: &str) -> Option<&'static TypeSpec> {
    TYPES.iter().find(|t| t.name == name)
}
