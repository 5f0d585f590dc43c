//! The captcha-type registry: one row per supported type, holding everything that differs between
//! types (the `in.php` method, the task fields with their wire names and limits, where the answer
//! is and its shape, whether a proxy is required, timings, token lifetime), and its read-only
//! view for hosts, [`task_types`].
//!
//! Task JSON uses the field `name`s below; the engine sends each as its `param`. The state machine
//! and validation read only this table.

use crate::codes::Refusal;

/// How a task field is checked and encoded, with its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldKind {
    /// Non-empty text without control characters. JSON numbers are accepted and written in
    /// decimal.
    Text {
        /// The most characters.
        max_chars: usize,
    },
    /// An absolute `http://` or `https://` URL with a host and no whitespace.
    Url {
        /// The most characters.
        max_chars: usize,
    },
    /// A boolean (or 0/1, `"true"`/`"false"`): `true` sends `1`, `false` sends nothing.
    Flag,
    /// A reCAPTCHA v3 score: a number (or decimal text) in tenths' range.
    Score {
        /// The lowest score, in tenths.
        min_tenths: u8,
        /// The highest score, in tenths.
        max_tenths: u8,
    },
    /// One of `values` (any ASCII case on input; sent as written here).
    Choice {
        /// The values allowed.
        values: &'static [&'static str],
    },
    /// A whole number (or its decimal text) in an inclusive range.
    Int {
        /// The smallest value.
        min: i64,
        /// The largest value.
        max: i64,
    },
    /// A proxy for the solver: `host:port` or `user:pass@host:port` (the scheme goes in
    /// `proxytype`).
    Proxy {
        /// The most characters.
        max_chars: usize,
    },
    /// One base64 image (standard or URL-safe alphabet, padding optional, an optional `data:`
    /// prefix and whitespace ignored).
    Image(ImageLimits),
    /// Exactly `count` base64 images, sent as `param_1`..`param_N` data URIs.
    Images {
        /// How many images.
        count: usize,
        /// The limits of each.
        each: ImageLimits,
    },
    /// How an image is sent: one of `modes` (`base64`: a form field; `multipart`: a file upload
    /// with `method=post`). Not sent as a parameter.
    Upload {
        /// The modes allowed.
        modes: &'static [&'static str],
    },
    /// A boolean: opt-in synchronous image solving through `solve.php` (no polling). Not sent as
    /// a parameter.
    Sync,
}

/// What an image field accepts: a jpg, png or gif (by its magic bytes,
/// [`crate::ImageFormat::signatures`]) of this size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageLimits {
    /// The fewest bytes, decoded (the docs say 100; one page says 1 KB).
    pub min_bytes: usize,
    /// The most bytes, decoded (the current docs say 1024 KB; older ones 100 KB).
    pub max_bytes: usize,
    /// The longest side in pixels, where one is enforced (read from the header; an image whose
    /// header cannot be read passes).
    pub max_side_px: Option<u32>,
}

/// The shape of a solved answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerShape {
    /// An opaque token or text, returned as is.
    Text,
    /// A list of cell numbers (grid: as the service numbers them; BLS: 1-based).
    Cells,
    /// A JSON object that must hold these keys (none listed: any object).
    Object(&'static [&'static str]),
}

/// What a task's `extra` object of pass-through parameters may hold (the same for every type
/// today; a name is also refused when it is one of the type's fields, parameters or fixed
/// parameters, in any ASCII case and before any `[`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtraRules {
    /// Names the engine sets itself, never overridden (any case, nor as `key[]`...).
    pub engine_params: &'static [&'static str],
    /// The multipart part that carries an uploaded image; not a name either.
    pub file_param: &'static str,
    /// The longest name, in bytes: ASCII letters, digits, `_` and `-` only.
    pub max_name_bytes: usize,
    /// The longest value, in bytes of UTF-8, without control characters.
    pub max_value_bytes: usize,
}

/// Where a success reply holds a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnswerKey {
    /// The reply's `result` (Cloudflare Challenge's cookie, with `request` reading `OK`).
    Result,
    /// The reply's `request` (every other answer, and task ids).
    Request,
}

impl AnswerKey {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AnswerKey::Result => "result",
            AnswerKey::Request => "request",
        }
    }
}

/// One field of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FieldSpec {
    /// The name in task JSON.
    pub name: &'static str,
    /// The `in.php` parameter (empty for fields that change how the task is sent).
    pub param: &'static str,
    /// Other parameter names clients send for it (the official SDK's `caseSensitive`,
    /// 2captcha-python's `useragent`...): read by the endpoint ([`crate::endpoint`]), never sent.
    pub aliases: &'static [&'static str],
    /// How the value is checked and encoded.
    pub kind: FieldKind,
    /// Whether a task of the type must give the field.
    pub required: bool,
    /// The value used when the task leaves the field out.
    pub default: Option<&'static str>,
    /// Which of CaptchaAI's codes the endpoint answers when a request gets this field wrong.
    pub refused_as: Refusal,
}

const fn req(name: &'static str, param: &'static str, kind: FieldKind) -> FieldSpec {
    FieldSpec { name, param, aliases: &[], kind, required: true, default: None, refused_as: Refusal::Parameter }
}

const fn opt(name: &'static str, param: &'static str, kind: FieldKind) -> FieldSpec {
    FieldSpec { name, param, aliases: &[], kind, required: false, default: None, refused_as: Refusal::Parameter }
}

const fn text(max_chars: usize) -> FieldKind {
    FieldKind::Text { max_chars }
}

const fn int(min: i64, max: i64) -> FieldKind {
    FieldKind::Int { min, max }
}

/// One captcha type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TypeSpec {
    /// The `type` in task JSON.
    pub name: &'static str,
    /// The `in.php` `method`.
    pub method: &'static str,
    /// Parameters every task of this type sends.
    pub fixed: &'static [(&'static str, &'static str)],
    /// The task fields, in the order they are sent.
    pub fields: &'static [FieldSpec],
    /// Where a success reply holds the answer (and, at submit, the task id): the first of these
    /// keys that is present and not empty.
    pub answer_from: &'static [AnswerKey],
    /// The shape of the solved answer.
    pub answer: AnswerShape,
    /// Wait between an accepted submit and the first poll (a config may override it within
    /// [`crate::config::INITIAL_WAIT_MS`]).
    pub initial_wait_ms: u64,
    /// Wait between polls (within [`crate::config::POLL_INTERVAL_MS`]: never below 5 s).
    pub poll_interval_ms: u64,
    /// Default deadline, counted from the original submit.
    pub deadline_ms: u64,
    /// How long a solved token stays usable, counted from when the answer arrived; `None` where
    /// the lifetime is set by the site or unknown (see the README's token table). It also bounds
    /// the last poll after the deadline (`Solve::poll_output`): sent only before the original
    /// submit plus this lifetime (no answer of the task is older than its submit), and never
    /// for `None`. How long CaptchaAI keeps an answer retrievable is stated by no source
    /// (unconfirmed; its docs only say `ERROR_WRONG_CAPTCHA_ID` means an unknown or expired
    /// task id): a last poll for an answer it no longer keeps costs that one request.
    pub token_ttl_ms: Option<u64>,
    /// Where CaptchaAI writes a solved answer in a `json=1` reply (`request`, and also `result`
    /// where the official SDK reads it there): what the endpoint renders.
    pub answer_to: &'static [AnswerKey],
    /// Whether CaptchaAI sends this type's task ids as JSON numbers in `json=1` submit replies
    /// (observed live for `userrecaptcha`; strings for the rest): what the endpoint renders.
    pub numeric_task_id: bool,
    /// Other `method`s clients send for this type (2captcha-python's `geetest_v4`), read by the
    /// endpoint; a request with one needs none of the type's fixed parameters.
    pub also_methods: &'static [&'static str],
}

impl TypeSpec {
    /// The field with this task-JSON name.
    pub(crate) fn field(&self, name: &str) -> Option<&'static FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A captcha type the engine solves, as hosts see it: a read-only view of its registry row,
/// listed by [`task_types`] and given by [`crate::Task::task_type`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskType(&'static TypeSpec);

impl TaskType {
    pub(crate) fn new(spec: &'static TypeSpec) -> TaskType {
        TaskType(spec)
    }

    /// The `type` in task JSON.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The `in.php` `method` (a multipart upload sends `post` instead).
    pub fn method(self) -> &'static str {
        self.0.method
    }

    /// Parameters every task of this type sends, as `(name, value)`.
    pub fn fixed_params(self) -> &'static [(&'static str, &'static str)] {
        self.0.fixed
    }

    /// The task fields, in the order they are sent.
    pub fn fields(self) -> impl ExactSizeIterator<Item = TaskField> + Clone {
        self.0.fields.iter().map(TaskField)
    }

    /// The field with this task-JSON name.
    pub fn field(self, name: &str) -> Option<TaskField> {
        self.0.field(name).map(TaskField)
    }

    /// What `extra` may hold.
    pub fn extra(self) -> ExtraRules {
        EXTRA
    }

    /// The reply keys that hold the answer, in the order they are tried: the first present and
    /// not empty is the answer.
    pub fn answer_from(self) -> impl ExactSizeIterator<Item = &'static str> + Clone {
        self.0.answer_from.iter().map(|key| key.name())
    }

    /// The shape of the solved answer.
    pub fn answer(self) -> AnswerShape {
        self.0.answer
    }

    /// The default wait between an accepted submit and the first poll.
    pub fn first_wait_ms(self) -> u64 {
        self.0.initial_wait_ms
    }

    /// The default wait between polls.
    pub fn poll_interval_ms(self) -> u64 {
        self.0.poll_interval_ms
    }

    /// The default deadline, counted from the original submit.
    pub fn deadline_ms(self) -> u64 {
        self.0.deadline_ms
    }

    /// How long a solved token stays usable from when it arrived, where known. It also bounds
    /// the last poll a solve may send after its deadline (see [`crate::Solve::poll_output`]).
    pub fn token_ttl_ms(self) -> Option<u64> {
        self.0.token_ttl_ms
    }
}

/// One field of a task type: a read-only view of its registry entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskField(&'static FieldSpec);

impl TaskField {
    /// The name in task JSON.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The `in.php` parameter it is sent as (`None` for fields that change how the task is
    /// sent: `upload`, `sync`).
    pub fn param(self) -> Option<&'static str> {
        Some(self.0.param).filter(|p| !p.is_empty())
    }

    /// How the value is checked and encoded, with its limits.
    pub fn kind(self) -> FieldKind {
        self.0.kind
    }

    /// Whether a task of the type must give it.
    pub fn required(self) -> bool {
        self.0.required
    }

    /// The value used when a task leaves it out.
    pub fn default(self) -> Option<&'static str> {
        self.0.default
    }
}

/// Every captcha type the engine solves, in table order.
pub fn task_types() -> impl ExactSizeIterator<Item = TaskType> + Clone {
    TYPES.iter().map(TaskType)
}

/// `result` when present and not empty, else `request`: where CaptchaAI puts every answer.
const RESULT_THEN_REQUEST: &[AnswerKey] = &[AnswerKey::Result, AnswerKey::Request];

/// `request` alone: where CaptchaAI writes most answers.
const REQUEST_ONLY: &[AnswerKey] = &[AnswerKey::Request];
/// `request` and `result` (the same answer): reCAPTCHA Enterprise and Cloudflare Challenge, whose
/// answer the official SDK reads from `result`.
const REQUEST_AND_RESULT: &[AnswerKey] = &[AnswerKey::Request, AnswerKey::Result];

/// Where the answer of a reply that belongs to no type is (`getbalance`'s balance).
pub(crate) const ACCOUNT_ANSWER_FROM: &[AnswerKey] = RESULT_THEN_REQUEST;

/// Images: 100 bytes to 1 MiB decoded, any size of side.
const IMAGE_LIMITS: ImageLimits = ImageLimits { min_bytes: 100, max_bytes: 1024 * 1024, max_side_px: None };
/// BLS cell images: also at most 1,000 px per side (the official SDK's guard).
const BLS_IMAGE_LIMITS: ImageLimits = ImageLimits { max_side_px: Some(1_000), ..IMAGE_LIMITS };
/// Absolute URLs of up to 2,048 characters.
const URL: FieldKind = FieldKind::Url { max_chars: 2_048 };
/// Proxies of up to 512 characters.
const PROXY: FieldKind = FieldKind::Proxy { max_chars: 512 };
/// reCAPTCHA v3 scores from 0.1 to 0.9.
const SCORE: FieldKind = FieldKind::Score { min_tenths: 1, max_tenths: 9 };
/// The values of an `upload` field.
const UPLOAD_MODES: &[&str] = &["base64", "multipart"];

/// The multipart part that carries an uploaded image.
pub(crate) const MULTIPART_FILE_PARAM: &str = "file";
/// The `method` of a submit whose image is that part (for the image's type, `base64` otherwise).
pub(crate) const MULTIPART_METHOD: &str = "post";

/// `extra`'s rules.
pub(crate) const EXTRA: ExtraRules = ExtraRules {
    engine_params: &["key", "method", "json"],
    file_param: MULTIPART_FILE_PARAM,
    max_name_bytes: 64,
    max_value_bytes: 64 * 1024,
};

const SECOND: u64 = 1_000;
const KEY_LEN: usize = 256;
const TEXT_LEN: usize = 4_096;
const COOKIE_LEN: usize = 16_384;

const GOOGLEKEY: FieldSpec = FieldSpec { refused_as: Refusal::SiteKey, ..req("sitekey", "googlekey", text(KEY_LEN)) };
const SITEKEY: FieldSpec = FieldSpec { refused_as: Refusal::SiteKey, ..req("sitekey", "sitekey", text(KEY_LEN)) };
const PAGEURL: FieldSpec = FieldSpec { refused_as: Refusal::PageUrl, ..req("pageurl", "pageurl", URL) };
const INVISIBLE: FieldSpec = opt("invisible", "invisible", FieldKind::Flag);
const DATA_S: FieldSpec = opt("data_s", "data-s", text(TEXT_LEN));
const ACTION_OPT: FieldSpec = opt("action", "action", text(KEY_LEN));
const ACTION_REQ: FieldSpec = req("action", "action", text(KEY_LEN));
const MIN_SCORE: FieldSpec = opt("min_score", "min_score", SCORE);
const COOKIES: FieldSpec = opt("cookies", "cookies", text(COOKIE_LEN));
/// 2captcha-python sends `useragent` (its Turnstile and CaptchaFox methods).
const USER_AGENT: FieldSpec = FieldSpec { aliases: &["useragent"], ..opt("user_agent", "userAgent", text(TEXT_LEN)) };
const PROXY_OPT: FieldSpec = FieldSpec { refused_as: Refusal::Proxy, ..opt("proxy", "proxy", PROXY) };
const PROXY_REQ: FieldSpec = FieldSpec { refused_as: Refusal::Proxy, ..req("proxy", "proxy", PROXY) };
const PROXY_TYPES: &[&str] = &["HTTP", "HTTPS", "SOCKS4", "SOCKS5"];
const PROXYTYPE_OPT: FieldSpec = FieldSpec {
    refused_as: Refusal::Proxy,
    ..opt("proxytype", "proxytype", FieldKind::Choice { values: PROXY_TYPES })
};
const PROXYTYPE_REQ: FieldSpec = FieldSpec {
    refused_as: Refusal::Proxy,
    ..req("proxytype", "proxytype", FieldKind::Choice { values: PROXY_TYPES })
};
const IMAGE: FieldSpec =
    FieldSpec { refused_as: Refusal::Image, ..req("image", "body", FieldKind::Image(IMAGE_LIMITS)) };

/// Every supported type. Polls every 5 s (the SDK's and docs' interval). First waits: for each
/// type, a wait near the middle of the range of first waits that beats both the official SDK's
/// schedule and 2captcha-python's on polls per solve *and* answer-to-client delay, on three
/// seeds of `benches/polling/run.sh`'s solve-time mixes (modelled on the docs' and the SDK's
/// figures, not measured live; BENCHMARKS.md has the table). A solve's config can override them.
pub(crate) const TYPES: &[TypeSpec] = &[
    TypeSpec {
        name: "recaptcha_v2",
        method: "userrecaptcha",
        fixed: &[],
        fields: &[GOOGLEKEY, PAGEURL, INVISIBLE, DATA_S, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 26 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
        answer_to: REQUEST_ONLY,
        numeric_task_id: true,
        also_methods: &[],
    },
    TypeSpec {
        name: "recaptcha_v2_enterprise",
        method: "userrecaptcha",
        fixed: &[("enterprise", "1")],
        fields: &[GOOGLEKEY, PAGEURL, INVISIBLE, ACTION_OPT, DATA_S, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 26 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
        answer_to: REQUEST_AND_RESULT,
        numeric_task_id: true,
        also_methods: &[],
    },
    TypeSpec {
        name: "recaptcha_v3",
        method: "userrecaptcha",
        fixed: &[("version", "v3")],
        fields: &[GOOGLEKEY, PAGEURL, ACTION_REQ, MIN_SCORE, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 10 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
        answer_to: REQUEST_ONLY,
        numeric_task_id: true,
        also_methods: &[],
    },
    TypeSpec {
        name: "recaptcha_v3_enterprise",
        method: "userrecaptcha",
        fixed: &[("version", "v3"), ("enterprise", "1")],
        fields: &[GOOGLEKEY, PAGEURL, ACTION_REQ, MIN_SCORE, COOKIES, USER_AGENT, PROXY_OPT, PROXYTYPE_OPT],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 10 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(120 * SECOND),
        answer_to: REQUEST_AND_RESULT,
        numeric_task_id: true,
        also_methods: &[],
    },
    TypeSpec {
        name: "turnstile",
        method: "turnstile",
        fixed: &[],
        fields: &[
            SITEKEY,
            PAGEURL,
            ACTION_OPT,
            opt("data", "data", text(TEXT_LEN)),
            opt("pagedata", "pagedata", text(TEXT_LEN)),
            COOKIES,
            USER_AGENT,
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: Some(300 * SECOND),
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "cloudflare_challenge",
        method: "cloudflare_challenge",
        fixed: &[],
        fields: &[
            PAGEURL,
            PROXY_REQ,
            PROXYTYPE_REQ,
            FieldSpec { refused_as: Refusal::SiteKey, ..opt("sitekey", "sitekey", text(KEY_LEN)) },
            USER_AGENT,
            COOKIES,
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 30 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 300 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_AND_RESULT,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "geetest_v3",
        method: "geetest",
        fixed: &[],
        fields: &[
            req("gt", "gt", text(KEY_LEN)),
            req("challenge", "challenge", text(KEY_LEN)),
            PAGEURL,
            opt("api_server", "api_server", text(KEY_LEN)),
            COOKIES,
            USER_AGENT,
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Object(&["challenge", "validate", "seccode"]),
        initial_wait_ms: 17 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "geetest_v4",
        method: "geetest",
        fixed: &[("version", "4")],
        fields: &[
            // 2captcha-python's `geetest_v4` method sends `captcha_id`.
            FieldSpec { aliases: &["captcha_id"], ..req("captcha_id", "gt", text(KEY_LEN)) },
            PAGEURL,
            opt("api_server", "api_server", text(KEY_LEN)),
            COOKIES,
            USER_AGENT,
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Object(&[]),
        initial_wait_ms: 17 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &["geetest_v4"],
    },
    TypeSpec {
        name: "captchafox",
        method: "captchafox",
        fixed: &[],
        fields: &[SITEKEY, PAGEURL, PROXY_REQ, PROXYTYPE_REQ, COOKIES, USER_AGENT],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "friendly_captcha",
        method: "friendly_captcha",
        fixed: &[],
        fields: &[
            SITEKEY,
            PAGEURL,
            opt("version", "version", FieldKind::Choice { values: &["v1", "v2"] }),
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "lemin",
        method: "lemin",
        fixed: &[],
        fields: &[
            req("captcha_id", "captcha_id", text(KEY_LEN)),
            req("div_id", "div_id", text(KEY_LEN)),
            PAGEURL,
            // 2captcha-python renames `apiServer` to `api_server`.
            FieldSpec { aliases: &["api_server"], ..opt("api_server", "apiServer", text(KEY_LEN)) },
            PROXY_OPT,
            PROXYTYPE_OPT,
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Object(&["answer", "challenge_uuid"]),
        initial_wait_ms: 13 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 120 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "image",
        method: "base64",
        fixed: &[],
        fields: &[
            IMAGE,
            FieldSpec { default: Some("base64"), ..opt("upload", "", FieldKind::Upload { modes: UPLOAD_MODES }) },
            opt("sync", "", FieldKind::Sync),
            opt("phrase", "phrase", FieldKind::Flag),
            // The official SDK sends `caseSensitive`.
            FieldSpec { aliases: &["caseSensitive"], ..opt("case_sensitive", "regsense", FieldKind::Flag) },
            opt("numeric", "numeric", int(0, 4)),
            opt("min_len", "min_len", int(0, 20)),
            opt("max_len", "max_len", int(0, 20)),
            opt("calc", "calc", FieldKind::Flag),
            opt("language", "language", int(0, 2)),
            opt("lang", "lang", text(16)),
            opt("instructions", "textinstructions", text(140)),
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Text,
        initial_wait_ms: SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 60 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "grid",
        method: "base64",
        fixed: &[("img_type", "recaptcha")],
        fields: &[
            IMAGE,
            req("instructions", "instructions", text(TEXT_LEN)),
            FieldSpec {
                default: Some("3x3"),
                ..opt("grid_size", "grid_size", FieldKind::Choice { values: &["3x3", "4x4"] })
            },
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Cells,
        initial_wait_ms: 8 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 60 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
    TypeSpec {
        name: "bls",
        method: "bls",
        fixed: &[],
        fields: &[
            req("instructions", "instructions", text(KEY_LEN)),
            FieldSpec {
                refused_as: Refusal::Image,
                ..req("images", "image_base64", FieldKind::Images { count: 9, each: BLS_IMAGE_LIMITS })
            },
        ],
        answer_from: RESULT_THEN_REQUEST,
        answer: AnswerShape::Cells,
        initial_wait_ms: 8 * SECOND,
        poll_interval_ms: 5 * SECOND,
        deadline_ms: 60 * SECOND,
        token_ttl_ms: None,
        answer_to: REQUEST_ONLY,
        numeric_task_id: false,
        also_methods: &[],
    },
];

/// The adaptive polling rule: how a [`crate::SolveTimes`] model of a type's ready times picks a
/// new solve's poll schedule. docs/engine.md, "Adaptive polling", says the same for users.
///
/// - **Objective.** A solve's cost is the wait from its answer being ready to the poll that finds
///   it, plus `c` for each poll (`c`: the config's `poll_cost_ms`, what one poll is worth in ms of
///   waiting). The model picks the schedule of least expected cost within the family of
///   [`crate::schedule`]: a first poll on the whole-second grid from the minimum first wait
///   (1 s) to one interval before the deadline, then a poll every interval, except that one
///   wait may be longer.
/// - **Estimate.** Each finished solve of one attempt says only that its answer was ready
///   between the poll before the one that found it (the submit, for the first) and that one,
///   in whole seconds. The model remembers these intervals, each weighted by how recent it is
///   (the weight decays by `1/memory` per observation and is forgotten below an eighth; at
///   most `most_remembered` intervals, the lightest forgotten first), and estimates the ready
///   times' distribution from them by
///   `em_rounds` rounds of the self-consistency (EM) algorithm for interval-censored data,
///   smoothed: each round spreads `smoothing_permille` of every interval's share evenly over
///   its seconds, the rest in proportion to the estimate within it. (Unsmoothed, the estimate
///   lets old narrow intervals hold the mass of newer wide ones after a shift, and the model
///   stays where it was; the price is a few percent of mass where no answer was seen.)
/// - **Drift.** Where the estimate is right, an observation's interval falls, on average, in the
///   middle of the estimate's distribution (the mean of its cumulative mass at the interval's
///   ends averages one half). A two-sided CUSUM test sums how far each observation falls below
///   (and above) the middle, less `drift_allowance` times the estimate's mass outside the
///   observation's interval (one that spans the whole estimate says nothing of where answers
///   fall, and neither counts nor drains the sums); when a sum passes `drift_limit` the service
///   has changed: the model forgets every interval wholly beyond the answers the sum gathered
///   (before the earliest start of answers later than estimated, after the latest end of
///   earlier ones) and keeps only `1/forget_on_drift` of every other weight, so that what comes
///   next dominates the estimate. Fixed point: `2^16` is a probability of one.
/// - **Exploration.** The distribution before the first poll cannot be seen from solves that poll
///   first at the same time, nor the phase of the polls after it. So a few solves explore: they
///   take the best schedule of the family whose first poll is 1 or 2 s earlier or later (later
///   only when some answers are estimated after the chosen first poll; each the better of regular
///   polls from there and the chosen schedule's longer wait). Over several observations a model
///   whose answers come earlier moves its first poll there, and its probes with it. As many
///   explore as keeps their expected extra polls, and their expected extra cost, within
///   `explore_permille` of the chosen schedule's (at most `most_exploring_per_65536` of the
///   solves). Whether a solve explores, and how, is a hash of its creation time, which the model
///   reads back from the solution's `submitted_at`.
/// - Under `min_observations` observations the row's first wait applies, with no longer wait
///   and no exploration.
///
/// Every first wait is within [`crate::config::INITIAL_WAIT_MS`] and before the deadline by at
/// least one poll interval; polls stay at least the row's interval apart. Integers only: the same
/// model, config and creation time give the same requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AdaptiveRule {
    /// Observations of a type before the model is used.
    pub min_observations: u32,
    /// The decay length: each remembered interval loses `1/memory` of its weight per observation.
    pub memory: u32,
    /// The exploration budget: exploring solves add at most this share (thousandths) to the
    /// expected polls, and to the expected cost, of the chosen schedule.
    pub explore_permille: u64,
    /// The most solves that explore, per 65,536.
    pub most_exploring_per_65536: u64,
    /// What the drift test lets each observation fall from the middle without counting, for an
    /// interval that holds none of the estimate (less in proportion to the mass it holds; `2^16`
    /// is a probability of one).
    pub drift_allowance: i64,
    /// Where a drift sum fires the test.
    pub drift_limit: u32,
    /// The share of every remembered weight not found stale kept when the drift test fires:
    /// `1/forget_on_drift`.
    pub forget_on_drift: u32,
    /// Rounds of the EM algorithm per estimate.
    pub em_rounds: u32,
    /// The share (thousandths) of each interval's mass that each EM round spreads evenly over
    /// the interval's seconds, whatever the estimate within it.
    pub smoothing_permille: u64,
    /// The most intervals a model remembers (its text stays under 1 KiB).
    pub most_remembered: usize,
}

/// The rule [`crate::SolveTimes`] applies.
pub(crate) const ADAPTIVE: AdaptiveRule = AdaptiveRule {
    min_observations: 20,
    memory: 80,
    explore_permille: 20,
    most_exploring_per_65536: 8_192,
    drift_allowance: 9_830,
    drift_limit: 163_840,
    forget_on_drift: 16,
    em_rounds: 4,
    smoothing_permille: 100,
    most_remembered: 56,
};

/// What the endpoint ([`crate::endpoint`]) does with a request parameter that is not a task field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndpointParam {
    /// The client's key.
    Key,
    /// `in.php`: the captcha type's `method`.
    Method,
    /// `res.php`: what is asked.
    Action,
    /// `res.php`: one task id.
    Id,
    /// `res.php`: several task ids, comma-separated.
    Ids,
    /// Answer in JSON (`1`) or plain text (`0`, or left out).
    Json,
    /// Add `Access-Control-Allow-Origin: *` to the reply (`1`).
    Cors,
    /// Read and dropped: it means nothing here (docs/endpoint.md says why, per parameter).
    Ignored,
    /// Refused, for this reason.
    Refused(&'static str),
}

/// `in.php`'s parameters that are not task fields. Every other parameter is a task field of the
/// `method`'s type, or else passed through to CaptchaAI as the task's `extra`.
pub(crate) const SUBMIT_PARAMS: &[(&str, EndpointParam)] = &[
    ("key", EndpointParam::Key),
    ("method", EndpointParam::Method),
    ("json", EndpointParam::Json),
    ("header_acao", EndpointParam::Cors),
    // A developer id for 2captcha's revenue share: 2captcha-python sends 4580 with every task.
    ("soft_id", EndpointParam::Ignored),
    (
        "pingback",
        EndpointParam::Refused("callbacks (pingback) are not sent by this endpoint: poll res.php for the answer"),
    ),
];

/// `res.php`'s parameters; any other is ignored, as CaptchaAI does.
pub(crate) const RES_PARAMS: &[(&str, EndpointParam)] = &[
    ("key", EndpointParam::Key),
    ("action", EndpointParam::Action),
    ("id", EndpointParam::Id),
    ("ids", EndpointParam::Ids),
    ("json", EndpointParam::Json),
    ("header_acao", EndpointParam::Cors),
];

/// A `res.php` action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// A task's answer (`id`, or `ids` for several).
    Get,
    /// The plan's threads.
    ThreadsInfo,
    /// The balance.
    Balance,
    /// The answer of `id` was right.
    ReportGood,
    /// The answer of `id` was wrong.
    ReportBad,
}

/// `res.php`'s `action` values. Neither client the endpoint serves sends `get2` (2captcha's
/// answer-with-price), so it is not one.
pub(crate) const RES_ACTIONS: &[(&str, Asked)] = &[
    ("get", Asked::Get),
    ("threadsinfo", Asked::ThreadsInfo),
    ("getbalance", Asked::Balance),
    ("reportgood", Asked::ReportGood),
    ("reportbad", Asked::ReportBad),
];

/// The wire name of a `res.php` action.
pub(crate) fn action_name(asked: Asked) -> &'static str {
    RES_ACTIONS.iter().find(|(_, a)| *a == asked).map_or("", |(name, _)| name)
}

/// Types people ask for that CaptchaAI does not solve, with the reason given to the user.
pub(crate) const UNSUPPORTED: &[(&str, &str)] = &[(
    "hcaptcha",
    "hCaptcha is not supported by CaptchaAI (the service answers ERROR_SERVER_ERROR for it); \
     supported types are listed in the README",
)];

/// The row for a task-JSON `type`.
pub(crate) fn lookup(name: &str) -> Option<&'static TypeSpec> {
    TYPES.iter().find(|t| t.name == name)
}
