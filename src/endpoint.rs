//! CaptchaAI's own `in.php` and `res.php`, served: reading the requests CaptchaAI's clients send
//! (the inverse of the requests the engine builds) and rendering the replies CaptchaAI would send
//! them, so a host can stand in for CaptchaAI (the edge's `/in.php` and `/res.php`) while knowing
//! no parameter name and no code. docs/endpoint.md has the decisions and what each client does.
//!
//! - [`read`]: a request's parameters (and file parts) become a [`Request`]: the [`Task`] a
//!   submit asks for (validated as a `/v1/solve` task is), or what a `res.php` call asks; or the
//!   [`Refusal`] CaptchaAI would answer. The type is the `method`'s, told apart by the type's
//!   fixed parameters (`version=v3`, `enterprise=1`, `img_type=recaptcha`); the type's fields are
//!   read from their parameters (and the aliases clients use); `key`, `json`, `header_acao` are
//!   the endpoint's own; the rest goes to CaptchaAI as the task's `extra`.
//! - `render_*`: the replies, in the format the client asked for (`json=1` or plain text).
//! - [`report_request`] / [`parse_report`]: forwarding `reportgood` / `reportbad`.
//!
//! Every function is total: any input gives a value, and bad input a [`Refusal`].

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::account::{self, ThreadsInfo};
use crate::codes::{self, Refusal as RefusedAs};
use crate::config::{Config, REQUEST_TIMEOUT_MS, endpoint_url, normalise_base_url};
use crate::error::ValidationError;
use crate::http::{self, ApiKey, HttpRequest, RequestKind, TransportError};
use crate::outcome::{Failure, Solution};
use crate::registry::{self, AnswerKey, Asked, EndpointParam, FieldKind, FieldSpec, TypeSpec};
use crate::task::Task;
use crate::text;

/// The endpoint a request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// `/in.php`: submit a task.
    InPhp,
    /// `/res.php`: an answer, the threads, the balance, or a report on an answer.
    ResPhp,
}

/// How a client asked to be answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyFormat {
    /// JSON (`json=1`) or plain text.
    pub json: bool,
    /// Add `Access-Control-Allow-Origin: *` (`header_acao=1`).
    pub cors: bool,
}

/// A reply to send exactly as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status: 200, as CaptchaAI answers errors too.
    pub status: u16,
    /// The `Content-Type` header value.
    pub content_type: &'static str,
    /// More headers to send.
    pub headers: Vec<(&'static str, &'static str)>,
    /// The body.
    pub body: String,
}

/// An `in.php` request the engine accepts.
#[derive(Clone, Debug, PartialEq)]
pub struct SubmitRequest {
    /// The `key` the client sent (32 letters and digits): the host authenticates it first.
    pub key: String,
    /// The task, validated.
    pub task: Task,
    /// How to answer the client.
    pub format: ReplyFormat,
}

/// What a `res.php` request asks for. Task ids are 1-20 decimal digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResAction {
    /// One solve's state.
    Get(String),
    /// Several solves' states, in order.
    GetMany(Vec<String>),
    /// The plan's threads.
    ThreadsInfo,
    /// The balance.
    Balance,
    /// The answer of this task was right.
    ReportGood(String),
    /// The answer of this task was wrong.
    ReportBad(String),
}

/// A `res.php` request the engine accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResRequest {
    /// The `key` the client sent: the host authenticates it first.
    pub key: String,
    /// What is asked.
    pub action: ResAction,
    /// How to answer the client.
    pub format: ReplyFormat,
}

/// A request the engine accepts.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// An `in.php` submit.
    Submit(SubmitRequest),
    /// A `res.php` question.
    Res(ResRequest),
}

/// A request refused as CaptchaAI would refuse it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// CaptchaAI's code.
    pub code: &'static str,
    /// What is wrong, for humans; never holds the key.
    pub message: String,
    /// The well-formed key the request carried, if any: CaptchaAI checks the key first, so a host
    /// answers an unknown key with [`HostRefusal::UnknownKey`] instead.
    pub key: Option<String>,
    /// How the client asked to be answered.
    pub format: ReplyFormat,
}

impl Refusal {
    /// The reply to send: the code (with `json=1`, the message as `error_text`).
    pub fn reply(&self) -> Reply {
        error_reply(self.format, self.code, Some(&self.message))
    }
}

/// Refusals a host decides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostRefusal {
    /// A well-formed key that is no client's.
    UnknownKey,
    /// A task id that is no solve of the caller's.
    UnknownId,
    /// Every thread the caller may use is busy and the host answers so at once.
    Busy,
    /// An action the host has turned off.
    Disabled,
    /// A body over the host's size limit.
    TooLarge,
}

/// Each host refusal's code and message.
const HOST_REFUSALS: &[(HostRefusal, &str, &str)] = &[
    (HostRefusal::UnknownKey, codes::KEY_DOES_NOT_EXIST, "the key is not a client token of this endpoint"),
    (HostRefusal::UnknownId, codes::WRONG_CAPTCHA_ID, "no task of this key has that id"),
    (HostRefusal::Busy, codes::NO_SLOT_AVAILABLE, "every thread this key may use is busy: submit again later"),
    (HostRefusal::Disabled, codes::BAD_PARAMETERS, "this action is turned off on this endpoint"),
    (HostRefusal::TooLarge, codes::TOO_BIG_CAPTCHA_FILESIZE, "the request body is over this endpoint's size limit"),
];

/// A solve as a `get` sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SolveState<'a> {
    /// Not finished: queued or being solved.
    Pending,
    /// Solved.
    Solved(&'a Solution),
    /// Ended without an answer.
    Failed(&'a Failure),
    /// No solve of the caller has this id.
    NotFound,
}

/// The most parameters a request may have (BLS, the largest task, has about 15).
const MAX_PARAMS: usize = 256;
/// The longest parameter name, in bytes.
const MAX_NAME_BYTES: usize = 256;
/// The most ids one `get` may ask for.
const MAX_IDS: usize = 100;
/// The most digits of a task id (`u64::MAX` has 20).
const MAX_ID_DIGITS: usize = 20;
/// The task-JSON field of pass-through parameters.
const EXTRA_FIELD: &str = "extra";
/// Untrusted names are quoted in messages up to this many characters.
const QUOTE_CHARS: usize = 64;

/// Reads a request to `path`: its text `params` in order (the query string's, then the body's;
/// invalid UTF-8 replaced with U+FFFD) and its file parts `uploads` (name, bytes).
pub fn read(path: Path, params: &[(&str, &str)], uploads: &[(&str, &[u8])]) -> Result<Request, Refusal> {
    let table = match path {
        Path::InPhp => registry::SUBMIT_PARAMS,
        Path::ResPhp => registry::RES_PARAMS,
    };
    let mut reader = Reader { params, table, format: ReplyFormat::default(), key: None };
    reader.format = reader.format()?;
    let key = reader.key()?;
    reader.key = Some(key.clone());
    reader.check_params()?;
    match path {
        Path::InPhp => {
            reader.submit(uploads).map(|task| Request::Submit(SubmitRequest { key, task, format: reader.format }))
        }
        Path::ResPhp => {
            reader.res(uploads).map(|action| Request::Res(ResRequest { key, action, format: reader.format }))
        }
    }
}

/// How a request to `path` asks to be answered (`json`, `header_acao`), read as [`read`] reads
/// it; plain text where those are malformed. For a host answering a refused request's unknown
/// key ([`HostRefusal::UnknownKey`]) in the format the client asked for.
pub fn read_format(path: Path, params: &[(&str, &str)]) -> ReplyFormat {
    let table = match path {
        Path::InPhp => registry::SUBMIT_PARAMS,
        Path::ResPhp => registry::RES_PARAMS,
    };
    Reader { params, table, format: ReplyFormat::default(), key: None }.format().unwrap_or_default()
}

/// One request being read.
struct Reader<'a> {
    params: &'a [(&'a str, &'a str)],
    table: &'static [(&'static str, EndpointParam)],
    format: ReplyFormat,
    /// The key, once it is known to be well-formed.
    key: Option<String>,
}

impl<'a> Reader<'a> {
    /// A refusal with `code`, in this request's format; the message never holds the key.
    fn refuse(&self, code: &'static str, message: impl Into<String>) -> Refusal {
        let message = message.into();
        let message = match &self.key {
            Some(key) => text::redact(Cow::Owned(message), key).into_owned(),
            None => message,
        };
        Refusal { code, message, key: self.key.clone(), format: self.format }
    }

    fn bad(&self, message: impl Into<String>) -> Refusal {
        self.refuse(codes::BAD_PARAMETERS, message)
    }

    /// The value of the endpoint parameter `what` (its one occurrence; more are refused later).
    fn own(&self, what: EndpointParam) -> Option<&'a str> {
        let name = self.table.iter().find(|(_, p)| *p == what).map(|(name, _)| *name)?;
        self.params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// `json` and `header_acao`, read first so that every refusal is in the format asked for;
    /// a malformed one is refused in plain text.
    fn format(&self) -> Result<ReplyFormat, Refusal> {
        if self.params.len() > MAX_PARAMS {
            return Err(self.bad(format!("more than {MAX_PARAMS} parameters")));
        }
        let flag = |what: EndpointParam| -> Result<bool, Refusal> {
            match self.own(what).map(str::trim) {
                None | Some("") => Ok(false),
                Some(v) if v == "0" || v.eq_ignore_ascii_case("false") => Ok(false),
                Some(v) if v == "1" || v.eq_ignore_ascii_case("true") => Ok(true),
                Some(_) => {
                    let name = self.table.iter().find(|(_, p)| *p == what).map_or("", |(name, _)| *name);
                    Err(self.bad(format!("`{name}` must be 0 or 1")))
                }
            }
        };
        Ok(ReplyFormat { json: flag(EndpointParam::Json)?, cors: flag(EndpointParam::Cors)? })
    }

    /// The key: exactly one parameter named `key` (nothing else that a PHP service would read as
    /// `key`), 32 letters and digits.
    fn key(&self) -> Result<String, Refusal> {
        let name = self.table.iter().find(|(_, p)| *p == EndpointParam::Key).map_or("key", |(name, _)| *name);
        let mut keys = self.params.iter().filter(|(n, _)| looks_like(n, name));
        let wrong = |why: String| self.refuse(codes::WRONG_USER_KEY, why);
        let Some(&(given_as, value)) = keys.next() else {
            return Err(wrong(format!("`{name}` is missing")));
        };
        if keys.next().is_some() {
            return Err(wrong(format!("`{name}` is given more than once")));
        }
        if given_as != name {
            return Err(wrong(format!("the key is sent as `{}`: send it as `{name}`", quote(given_as))));
        }
        match ApiKey::new(value) {
            Ok(_) => Ok(value.to_owned()),
            Err(e) => Err(wrong(e.message)),
        }
    }

    /// Every parameter: UTF-8, a plain name given once, and no look-alike of an endpoint
    /// parameter (`JSON`, `method[]`).
    fn check_params(&self) -> Result<(), Refusal> {
        for (i, &(name, value)) in self.params.iter().enumerate() {
            if name.is_empty() || name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
                return Err(
                    self.bad(format!("a parameter name is empty, control characters or over {MAX_NAME_BYTES} bytes"))
                );
            }
            if text::find(name, "\u{FFFD}").is_some() || text::find(value, "\u{FFFD}").is_some() {
                return Err(self.bad(format!("`{}` is not UTF-8", quote(name))));
            }
            if self.params[..i].iter().any(|(n, _)| *n == name) {
                return Err(self.bad(format!("`{}` is given more than once", quote(name))));
            }
            if let Some((own, _)) = self.table.iter().find(|(own, _)| looks_like(name, own) && name != *own) {
                return Err(self.bad(format!("`{}` is not a parameter: send `{own}`", quote(name))));
            }
        }
        Ok(())
    }

    /// `in.php`: the task.
    fn submit(&self, uploads: &[(&str, &'a [u8])]) -> Result<Task, Refusal> {
        let file = self.upload(uploads)?;
        let Some(method) = self.own(EndpointParam::Method).map(str::trim).filter(|m| !m.is_empty()) else {
            return Err(self.bad("`method` is missing"));
        };
        let posted = method.eq_ignore_ascii_case(registry::MULTIPART_METHOD);
        if file.is_some() && !posted {
            return Err(self.bad(format!("a file is uploaded, but `method` is not `{}`", registry::MULTIPART_METHOD)));
        }
        let spec = self.type_for(method, posted)?;
        let mut used: Vec<&str> = Vec::with_capacity(self.params.len());
        let mut task = Map::new();
        task.insert("type".into(), spec.name.into());
        for field in spec.fields {
            if let Some(value) = self.field(spec, field, posted.then_some(file).flatten(), &mut used)? {
                task.insert(field.name.into(), value);
            } else if posted && matches!(field.kind, FieldKind::Upload { .. }) {
                task.insert(field.name.into(), Value::from("multipart"));
            }
        }
        let mut extra = Map::new();
        for &(name, value) in self.params {
            let role = self.table.iter().find(|(own, _)| *own == name).map(|(_, p)| *p);
            // What tells the method's types apart (`version`, `enterprise`, `img_type`) chose the
            // type; given with another value (2captcha-python's `version=v2`, `enterprise=0`) it
            // only says which type the request is not. The type sends its own.
            let telling =
                registry::TYPES.iter().any(|t| t.method == spec.method && t.fixed.iter().any(|(n, _)| *n == name));
            match role {
                _ if telling || used.contains(&name) => {}
                Some(EndpointParam::Refused(why)) => return Err(self.bad(why)),
                Some(_) => {}
                None => {
                    extra.insert(name.into(), value.into());
                }
            }
        }
        if !extra.is_empty() {
            task.insert(EXTRA_FIELD.into(), Value::Object(extra));
        }
        // From text, as `solve.create` reads tasks (`from_value` adds a deserializer of its own).
        Task::from_json(&Value::Object(task).to_string()).map_err(|e| self.refuse_task(spec, e))
    }

    /// The one file part a submit may carry (the image of `method=post`).
    fn upload(&self, uploads: &[(&str, &'a [u8])]) -> Result<Option<&'a [u8]>, Refusal> {
        match uploads {
            [] => Ok(None),
            [(name, bytes)] if *name == registry::MULTIPART_FILE_PARAM => Ok(Some(bytes)),
            [(name, _)] => Err(self.bad(format!(
                "the file part `{}` is not an image upload (send the image as `{}`)",
                quote(name),
                registry::MULTIPART_FILE_PARAM
            ))),
            _ => Err(self.bad("more than one file is uploaded")),
        }
    }

    /// The type a `method` (and the request's fixed parameters) asks for: the type of that
    /// method whose fixed parameters the request all gives, the most of them; `post` is an image
    /// type's method with the image uploaded.
    fn type_for(&self, method: &str, posted: bool) -> Result<&'static TypeSpec, Refusal> {
        let is = |m: &str| m.eq_ignore_ascii_case(method);
        if let Some(spec) = registry::TYPES.iter().find(|t| t.also_methods.iter().any(|m| is(m))) {
            return Ok(spec);
        }
        let gives = |(name, value): &(&str, &str)| {
            self.params.iter().any(|(n, v)| n == name && v.trim().eq_ignore_ascii_case(value))
        };
        registry::TYPES
            .iter()
            .filter(|t| match posted {
                true => t.fields.iter().any(|f| matches!(f.kind, FieldKind::Image(_))),
                false => is(t.method),
            })
            .filter(|t| t.fixed.iter().all(gives))
            .max_by_key(|t| t.fixed.len())
            .ok_or_else(|| self.bad(format!("`method` {} is not a captcha type this endpoint solves", quote(method))))
    }

    /// A field's value as task JSON, from its parameter or an alias (`None`: not given, or
    /// blank). `file` is the uploaded image of a `method=post` submit.
    fn field(
        &self,
        spec: &TypeSpec,
        field: &'static FieldSpec,
        file: Option<&[u8]>,
        used: &mut Vec<&'a str>,
    ) -> Result<Option<Value>, Refusal> {
        if field.param.is_empty() {
            return Ok(None);
        }
        if let FieldKind::Images { count, .. } = field.kind {
            let mut images = Vec::new();
            for i in 1..=count {
                let name = format!("{}_{i}", field.param);
                if let Some(&(name, value)) = self.params.iter().find(|(n, _)| *n == name) {
                    used.push(name);
                    images.push(Value::from(value));
                }
            }
            return Ok(Some(images).filter(|i| !i.is_empty()).map(Value::Array));
        }
        let mut given = self.params.iter().filter(|(n, _)| *n == field.param || field.aliases.contains(n));
        let first = given.next();
        if let Some((second, _)) = given.next() {
            let first = first.map_or("", |(n, _)| *n);
            return Err(self.bad(format!("`{first}` and `{second}` are the same parameter of type {}", spec.name)));
        }
        if let Some((name, _)) = first {
            used.push(name);
        }
        let value = first.map(|(_, v)| *v).filter(|v| !v.trim().is_empty());
        match (field.kind, file) {
            (FieldKind::Image(_), Some(_)) if value.is_some() => Err(self.bad(format!(
                "the image is given twice: as `{}` and as the uploaded `{}`",
                field.param,
                registry::MULTIPART_FILE_PARAM
            ))),
            (FieldKind::Image(_), Some(bytes)) => Ok(Some(Value::from(STANDARD.encode(bytes)))),
            _ => Ok(value.map(Value::from)),
        }
    }

    /// The refusal for a task that failed validation: the code CaptchaAI answers for that field
    /// and problem, and the message naming the parameter the client sent.
    fn refuse_task(&self, spec: &TypeSpec, error: ValidationError) -> Refusal {
        let field = error.field.as_deref().unwrap_or_default();
        let (base, index) = match field.split_once('[') {
            Some((base, rest)) => (base, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (field.split('.').next().unwrap_or_default(), None),
        };
        let row = spec.field(base).filter(|_| base != EXTRA_FIELD);
        let code = codes::refusal_code(row.map_or(RefusedAs::Parameter, |f| f.refused_as), error.problem);
        // Name the parameter the client sent, not the task field.
        let param = match (row, index) {
            (Some(f), Some(i)) => format!("{}_{}", f.param, i + 1),
            (Some(f), None) => f.param.to_owned(),
            (None, _) => String::new(),
        };
        let message = match row {
            Some(f) if !param.is_empty() && param != f.name => format!("{} (the `{param}` parameter)", error.message),
            Some(_) => error.message,
            None => error.message.replace(&format!("`{EXTRA_FIELD}."), "`"),
        };
        self.refuse(code, message)
    }

    /// `res.php`: what is asked.
    fn res(&self, uploads: &[(&str, &[u8])]) -> Result<ResAction, Refusal> {
        if !uploads.is_empty() {
            return Err(self.bad("res.php takes no files"));
        }
        let Some(action) = self.own(EndpointParam::Action).map(str::trim).filter(|a| !a.is_empty()) else {
            return Err(self.refuse(codes::EMPTY_ACTION, "`action` is missing"));
        };
        let Some((_, asked)) = registry::RES_ACTIONS.iter().find(|(name, _)| *name == action) else {
            return Err(self.bad(format!("`action` {} is not one this endpoint answers", quote(action))));
        };
        let (id, ids) = (self.own(EndpointParam::Id), self.own(EndpointParam::Ids));
        match asked {
            Asked::ThreadsInfo => Ok(ResAction::ThreadsInfo),
            Asked::Balance => Ok(ResAction::Balance),
            Asked::Get if id.is_some() && ids.is_some() => Err(self.bad("give `id` or `ids`, not both")),
            Asked::Get => match ids {
                Some(ids) => self.ids(ids).map(ResAction::GetMany),
                None => self.id(id).map(ResAction::Get),
            },
            Asked::ReportGood | Asked::ReportBad if ids.is_some() => Err(self.bad("a report is about one `id`")),
            Asked::ReportGood => self.id(id).map(ResAction::ReportGood),
            Asked::ReportBad => self.id(id).map(ResAction::ReportBad),
        }
    }

    fn id(&self, id: Option<&str>) -> Result<String, Refusal> {
        let id = id.map(str::trim).unwrap_or_default();
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.refuse(codes::WRONG_ID_FORMAT, "a task id is digits"));
        }
        if id.len() > MAX_ID_DIGITS {
            return Err(self.refuse(codes::WRONG_CAPTCHA_ID, "no task has that id"));
        }
        Ok(id.to_owned())
    }

    fn ids(&self, ids: &str) -> Result<Vec<String>, Refusal> {
        let ids: Vec<&str> = ids.split(',').collect();
        if ids.len() > MAX_IDS {
            return Err(self.bad(format!("at most {MAX_IDS} ids at once")));
        }
        ids.into_iter().map(|id| self.id(Some(id))).collect()
    }
}

/// Whether a PHP service would read the parameter `name` as `own`: the same name in any ASCII
/// case, after leading spaces (which PHP drops), before any `[` (`key[]` is read as `key`).
fn looks_like(name: &str, own: &str) -> bool {
    name.trim_start().split('[').next().is_some_and(|base| base.eq_ignore_ascii_case(own))
}

/// Untrusted text quoted in a message.
fn quote(name: &str) -> String {
    text::clip(name, QUOTE_CHARS)
}

/// A reply in `format` with `body`.
fn reply(format: ReplyFormat, body: String) -> Reply {
    let content_type = if format.json { "application/json" } else { "text/plain; charset=utf-8" };
    let headers = if format.cors { vec![("Access-Control-Allow-Origin", "*")] } else { Vec::new() };
    Reply { status: 200, content_type, headers, body }
}

/// `{"status":0,"request":CODE,"error_text":..}`, or the bare code in plain text.
fn error_reply(format: ReplyFormat, code: &str, message: Option<&str>) -> Reply {
    #[derive(Serialize)]
    struct Error<'a> {
        status: u8,
        request: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_text: Option<&'a str>,
    }
    if !format.json {
        return reply(format, code.to_owned());
    }
    reply(format, to_json(&Error { status: 0, request: code, error_text: message.filter(|m| !m.is_empty()) }))
}

/// A success: `{"status":1,"request":..}` (plus `more`), or `OK|..` in plain text.
fn ok_reply<T: Serialize>(format: ReplyFormat, request: &str, json: &T) -> Reply {
    if format.json { reply(format, to_json(json)) } else { reply(format, format!("OK|{request}")) }
}

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A `json=1` success holding `request` (any JSON value).
#[derive(Serialize)]
struct Success<'a, T: Serialize> {
    status: u8,
    request: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_agent: Option<&'a str>,
}

fn success<T: Serialize>(request: T) -> Success<'static, T> {
    Success { status: 1, request, result: None, user_agent: None }
}

/// The largest task id written as a JSON number: 2^53 - 1, the largest integer a JavaScript client
/// reads exactly (longer ids stay strings).
const MAX_NUMERIC_ID: u64 = (1 << 53) - 1;

/// The reply to an accepted submit whose solve has `id`: `OK|<id>`, or `{"status":1,"request":
/// <id>}` with the id a JSON number where CaptchaAI sends that type's ids so (and the id is at
/// most 2^53 - 1).
pub fn render_submitted(format: ReplyFormat, task_type: &str, id: &str) -> Reply {
    let numeric = registry::lookup(task_type).is_some_and(|t| t.numeric_task_id);
    let number = id.parse::<u64>().ok().filter(|n| *n <= MAX_NUMERIC_ID && n.to_string() == id);
    match number.filter(|_| numeric) {
        Some(n) => ok_reply(format, id, &success(n)),
        None => ok_reply(format, id, &success(id)),
    }
}

/// The reply to a `get` of one solve of `task_type`.
pub fn render_state(format: ReplyFormat, task_type: &str, state: SolveState<'_>) -> Reply {
    match state {
        SolveState::Pending => error_reply(format, codes::NOT_READY, None),
        SolveState::NotFound => error_reply(format, codes::WRONG_CAPTCHA_ID, None),
        SolveState::Failed(failure) => render_failure(format, failure),
        SolveState::Solved(solution) => {
            let answer = solution.answer.as_str();
            let in_result = registry::lookup(task_type).is_some_and(|t| t.answer_to.contains(&AnswerKey::Result));
            let json = Success {
                result: in_result.then_some(answer),
                user_agent: solution.user_agent.as_deref(),
                ..success(answer)
            };
            ok_reply(format, answer, &json)
        }
    }
}

/// The reply to a `get` of several solves: each one's answer, code or `CAPCHA_NOT_READY`, in
/// order, joined with `|` (2captcha's form: CaptchaAI's own is unconfirmed).
pub fn render_states(format: ReplyFormat, states: &[SolveState<'_>]) -> Reply {
    let mut joined = String::new();
    for (i, state) in states.iter().enumerate() {
        if i > 0 {
            joined.push('|');
        }
        joined.push_str(match state {
            SolveState::Pending => codes::NOT_READY,
            SolveState::NotFound => codes::WRONG_CAPTCHA_ID,
            SolveState::Failed(failure) => codes::client_code(&failure.code),
            SolveState::Solved(solution) => solution.answer.as_str(),
        });
    }
    if format.json { reply(format, to_json(&success(&joined))) } else { reply(format, joined) }
}

/// The reply to `threadsinfo`: `{"status":1,"threads":"N","working_threads":M}` (the types
/// CaptchaAI was seen to send; plain text leaves out `status`).
pub fn render_threads(format: ReplyFormat, info: &ThreadsInfo) -> Reply {
    #[derive(Serialize)]
    struct Threads {
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u8>,
        threads: String,
        working_threads: u64,
    }
    let threads = Threads {
        status: format.json.then_some(1),
        threads: info.threads.to_string(),
        working_threads: info.working_threads,
    };
    reply(format, to_json(&threads))
}

/// The reply to `getbalance`: the number, in `request` with `json=1`. A balance that is no
/// number is a server error.
pub fn render_balance(format: ReplyFormat, balance: f64) -> Reply {
    let Some(number) = serde_json::Number::from_f64(balance) else {
        return error_reply(format, codes::SERVER_ERROR, Some("the balance is not a number"));
    };
    if format.json { reply(format, to_json(&success(&number))) } else { reply(format, number.to_string()) }
}

/// The reply to a report CaptchaAI recorded.
pub fn render_reported(format: ReplyFormat) -> Reply {
    if format.json {
        reply(format, to_json(&success(codes::REPORT_RECORDED)))
    } else {
        reply(format, codes::REPORT_RECORDED.to_owned())
    }
}

/// The reply for a solve, account call or report that failed: its code as a client of CaptchaAI
/// knows it (the code table's client codes) and, with `json=1`, its message as `error_text` (no run of
/// letters and digits as long as a key).
pub fn render_failure(format: ReplyFormat, failure: &Failure) -> Reply {
    let message = text::redact_key_shaped(Cow::Borrowed(&failure.message));
    error_reply(format, codes::client_code(&failure.code), Some(&message))
}

/// The refusal for a host's decision, in `format` (`None`: plain text, CaptchaAI's default).
pub fn render_refusal(format: Option<ReplyFormat>, refusal: HostRefusal) -> Refusal {
    let format = format.unwrap_or_default();
    let (_, code, message) =
        HOST_REFUSALS.iter().find(|(r, _, _)| *r == refusal).copied().unwrap_or((refusal, codes::BAD_PARAMETERS, ""));
    Refusal { code, message: message.to_owned(), key: None, format }
}

/// The `reportgood` (`good`) or `reportbad` request for CaptchaAI task `task_id` (id 0, due at
/// once), to `config`'s base URL.
pub fn report_request(
    key: &ApiKey,
    config: &Config,
    task_id: &str,
    good: bool,
) -> Result<HttpRequest, ValidationError> {
    let base = normalise_base_url(&config.base_url)?;
    REQUEST_TIMEOUT_MS.check(config.request_timeout_ms)?;
    let id = task_id.trim();
    if id.is_empty() || id.len() > 64 || id.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(ValidationError::new(
            codes::INVALID_TASK,
            Some("task_id".into()),
            "a task id is 1-64 printable characters",
        ));
    }
    let asked = if good { Asked::ReportGood } else { Asked::ReportBad };
    let (action, id_param) = (own_name(EndpointParam::Action), own_name(EndpointParam::Id));
    let body = http::FormWriter::new(&http::KeySlot::Key(key.clone()), 48)
        .pair(action, registry::action_name(asked))
        .pair(id_param, id)
        .finish();
    let url = endpoint_url(base, "/res.php");
    Ok(HttpRequest::form(0, RequestKind::Report, 0, url, body, config.request_timeout_ms))
}

/// A `res.php` parameter's wire name.
fn own_name(what: EndpointParam) -> &'static str {
    registry::RES_PARAMS.iter().find(|(_, p)| *p == what).map_or("", |(name, _)| name)
}

/// Reads the reply to a report: recorded (`OK_REPORT_RECORDED`, or any success), or the failure
/// its code means.
pub fn parse_report(status: u16, body: &[u8]) -> Result<(), Failure> {
    let text = text::redact_key_shaped(String::from_utf8_lossy(body));
    if (200..300).contains(&status) && text.trim() == codes::REPORT_RECORDED {
        return Ok(());
    }
    match crate::reply::parse(status, &text, registry::ACCOUNT_ANSWER_FROM) {
        crate::reply::Reply::Ok { .. } => Ok(()),
        other => Err(account::reply_failure(other, "report")),
    }
}

/// The failure for a report that got no reply.
pub fn report_transport_failure(error: TransportError) -> Failure {
    account::transport_failure(RequestKind::Report, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789ABCDEF";

    fn submit(params: &[(&str, &str)]) -> Result<Task, Refusal> {
        match read(Path::InPhp, params, &[])? {
            Request::Submit(s) => Ok(s.task),
            other => panic!("{other:?}"),
        }
    }

    fn code(result: Result<Task, Refusal>) -> &'static str {
        result.err().map_or("OK", |r| r.code)
    }

    #[test]
    fn the_key_comes_first_and_only_once() {
        let turnstile = [("method", "turnstile"), ("sitekey", "0x4AAA"), ("pageurl", "https://a.example/")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut p: Vec<(&str, &str)> = extra.to_vec();
            p.extend(turnstile);
            code(submit(&p))
        };
        assert_eq!(with(&[("key", KEY)]), "OK");
        assert_eq!(with(&[]), codes::WRONG_USER_KEY);
        assert_eq!(with(&[("key", "short")]), codes::WRONG_USER_KEY);
        assert_eq!(with(&[("key", KEY), ("key", KEY)]), codes::WRONG_USER_KEY);
        assert_eq!(with(&[("key", KEY), ("KEY", KEY)]), codes::WRONG_USER_KEY);
        assert_eq!(with(&[("key[]", KEY)]), codes::WRONG_USER_KEY);
        assert_eq!(with(&[(" key", KEY)]), codes::WRONG_USER_KEY);
        assert_eq!(with(&[("key", KEY), ("pageurl", "https://b.example/")]), codes::BAD_PARAMETERS);
        assert_eq!(with(&[("key", KEY), ("Method", "turnstile")]), codes::BAD_PARAMETERS);
        assert_eq!(with(&[("key", KEY), ("note", "caf\u{FFFD}")]), codes::BAD_PARAMETERS);
    }

    #[test]
    fn the_format_of_a_refused_request_is_read_for_its_unknown_key() {
        let params = [("key", KEY), ("method", "turnstile"), ("json", "1"), ("header_acao", "1")];
        assert_eq!(code(submit(&params)), codes::GOOGLEKEY, "no sitekey");
        assert_eq!(read_format(Path::InPhp, &params), ReplyFormat { json: true, cors: true });
        let unknown = render_refusal(Some(read_format(Path::InPhp, &params)), HostRefusal::UnknownKey);
        assert!(unknown.reply().body.starts_with("{\"status\":0,\"request\":\"ERROR_KEY_DOES_NOT_EXIST\""));
        assert_eq!(read_format(Path::ResPhp, &[("json", "yes")]), ReplyFormat::default(), "malformed: plain");
    }

    #[test]
    fn refusals_never_hold_the_key() {
        let refusal = submit(&[("key", KEY), ("method", "turnstile"), (KEY, "1")]).unwrap_err();
        assert!(!refusal.message.contains(KEY) && !refusal.reply().body.contains(KEY), "{refusal:?}");
        assert_eq!(refusal.key.as_deref(), Some(KEY), "the host authenticates the key first");
    }
}
