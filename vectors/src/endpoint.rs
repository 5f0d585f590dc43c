//! Endpoint vectors (`testdata/vectors/endpoint/*.json`): cases of the engine's `endpoint`
//! interface in both directions, reading `in.php` / `res.php` requests and rendering replies,
//! with the result every host must give. `testdata/vectors/endpoint/README.md` has the format.
//!
//! A host implements [`EndpointHost`] (the native engine: [`Native`]; the component: the
//! wasmtime test); [`run_case`] makes a case's result, as JSON, from what the host answers.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use captchaai_engine::account::ThreadsInfo;
use captchaai_engine::endpoint::{self, HostRefusal, Path, ReplyFormat, ResAction, SolveState};
use captchaai_engine::{ApiKey, Config, Failure, HttpRequest, Output, Solution, TransportError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{Native, failure_json, output_event};

/// One endpoint vector file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointVector {
    pub name: String,
    pub description: String,
    pub cases: Vec<Case>,
}

impl EndpointVector {
    /// Parses a vector file.
    pub fn parse(text: &str) -> Result<EndpointVector, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The canonical form (pretty, sorted keys), without the final newline.
    pub fn to_pretty(&self) -> String {
        serde_json::to_value(self).and_then(|value| serde_json::to_string_pretty(&value)).unwrap_or_default()
    }
}

/// One call and what it must give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What the case shows.
    pub about: String,
    /// The call.
    pub call: Call,
    /// A hand-written summary the result must agree with (`outcome`, and `code`, `task_type`,
    /// `body`, `content_type` where given).
    pub expect: Value,
    /// The result (blessed by the native engine).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub result: Value,
}

/// A reply format as vectors write it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Format {
    #[serde(default)]
    pub json: bool,
    #[serde(default)]
    pub cors: bool,
}

impl From<Format> for ReplyFormat {
    fn from(f: Format) -> ReplyFormat {
        ReplyFormat { json: f.json, cors: f.cors }
    }
}

/// An uploaded file part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    pub name: String,
    pub base64: String,
}

/// A solve's state as vectors write it: `"pending"`, `"not_found"`, `{"solved": solution}` or
/// `{"failed": failure}` (the solution's and failure's serde forms).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Pending,
    Solved(Solution),
    Failed(Failure),
    NotFound,
}

impl State {
    fn native(&self) -> SolveState<'_> {
        match self {
            State::Pending => SolveState::Pending,
            State::Solved(s) => SolveState::Solved(s),
            State::Failed(f) => SolveState::Failed(f),
            State::NotFound => SolveState::NotFound,
        }
    }
}

/// What came back for a report: a reply or a transport error (`timeout`, `connect`, `broken`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportReply {
    Reply { status: u16, body: String },
    Transport(String),
}

/// A call of the endpoint interface.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Call {
    /// `read-request`; `path` is `in_php` or `res_php`.
    Read {
        path: String,
        params: Vec<(String, String)>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        uploads: Vec<Upload>,
    },
    /// `read-format`; `path` is `in_php` or `res_php`.
    ReadFormat {
        path: String,
        params: Vec<(String, String)>,
    },
    Submitted {
        format: Format,
        task_type: String,
        id: String,
    },
    State {
        format: Format,
        task_type: String,
        state: State,
    },
    States {
        format: Format,
        states: Vec<State>,
    },
    Threads {
        format: Format,
        threads: u64,
        working_threads: u64,
    },
    Balance {
        format: Format,
        balance: f64,
    },
    Reported {
        format: Format,
    },
    Failure {
        format: Format,
        failure: Failure,
    },
    /// `render-refusal`; `refusal` is `unknown_key`, `unknown_id`, `busy`, `disabled`,
    /// `too_large`.
    Refusal {
        format: Option<Format>,
        refusal: String,
    },
    /// `report-request`.
    Report {
        key: String,
        #[serde(default, skip_serializing_if = "Value::is_null")]
        config: Value,
        task_id: String,
        good: bool,
    },
    /// `parse-report`.
    ParseReport {
        reply: ReportReply,
    },
}

/// A reply, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl From<endpoint::Reply> for Reply {
    fn from(r: endpoint::Reply) -> Reply {
        Reply {
            status: r.status,
            content_type: r.content_type.to_owned(),
            headers: r.headers.into_iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect(),
            body: r.body,
        }
    }
}

/// A refusal, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: String,
    pub message: String,
    pub key: Option<String>,
    pub reply: Reply,
}

impl From<endpoint::Refusal> for Refusal {
    fn from(r: endpoint::Refusal) -> Refusal {
        let reply = r.reply().into();
        Refusal { code: r.code.to_owned(), message: r.message, key: r.key, reply }
    }
}

/// What `read-request` gives, owned (a submit's task as its canonical JSON text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    Submit { key: String, task_json: String, task_type: String, format: ReplyFormat },
    Res { key: String, action: ResAction, format: ReplyFormat },
    Refused(Refusal),
}

/// The endpoint interface of an engine (native, or behind a boundary). Values cross as native
/// types where the engine has them, owned copies otherwise.
pub trait EndpointHost {
    fn read(&mut self, path: Path, params: &[(&str, &str)], uploads: &[(&str, &[u8])]) -> Read;
    fn read_format(&mut self, path: Path, params: &[(&str, &str)]) -> ReplyFormat;
    fn render_submitted(&mut self, format: ReplyFormat, task_type: &str, id: &str) -> Reply;
    fn render_state(&mut self, format: ReplyFormat, task_type: &str, state: SolveState<'_>) -> Reply;
    fn render_states(&mut self, format: ReplyFormat, states: &[SolveState<'_>]) -> Reply;
    fn render_threads(&mut self, format: ReplyFormat, info: ThreadsInfo) -> Reply;
    fn render_balance(&mut self, format: ReplyFormat, balance: f64) -> Reply;
    fn render_reported(&mut self, format: ReplyFormat) -> Reply;
    fn render_failure(&mut self, format: ReplyFormat, failure: &Failure) -> Reply;
    fn render_refusal(&mut self, format: Option<ReplyFormat>, refusal: HostRefusal) -> Refusal;
    fn report_request(&mut self, key: &str, config: &Config, task_id: &str, good: bool)
    -> Result<HttpRequest, Failure>;
    fn parse_report(&mut self, reply: Result<(u16, &[u8]), TransportError>) -> Result<(), Failure>;
}

impl EndpointHost for Native {
    fn read(&mut self, path: Path, params: &[(&str, &str)], uploads: &[(&str, &[u8])]) -> Read {
        match endpoint::read(path, params, uploads) {
            Ok(endpoint::Request::Submit(s)) => Read::Submit {
                key: s.key,
                task_json: serde_json::to_string(&s.task).unwrap_or_default(),
                task_type: s.task.task_type().name().to_owned(),
                format: s.format,
            },
            Ok(endpoint::Request::Res(r)) => Read::Res { key: r.key, action: r.action, format: r.format },
            Err(refusal) => Read::Refused(refusal.into()),
        }
    }

    fn read_format(&mut self, path: Path, params: &[(&str, &str)]) -> ReplyFormat {
        endpoint::read_format(path, params)
    }

    fn render_submitted(&mut self, format: ReplyFormat, task_type: &str, id: &str) -> Reply {
        endpoint::render_submitted(format, task_type, id).into()
    }

    fn render_state(&mut self, format: ReplyFormat, task_type: &str, state: SolveState<'_>) -> Reply {
        endpoint::render_state(format, task_type, state).into()
    }

    fn render_states(&mut self, format: ReplyFormat, states: &[SolveState<'_>]) -> Reply {
        endpoint::render_states(format, states).into()
    }

    fn render_threads(&mut self, format: ReplyFormat, info: ThreadsInfo) -> Reply {
        endpoint::render_threads(format, &info).into()
    }

    fn render_balance(&mut self, format: ReplyFormat, balance: f64) -> Reply {
        endpoint::render_balance(format, balance).into()
    }

    fn render_reported(&mut self, format: ReplyFormat) -> Reply {
        endpoint::render_reported(format).into()
    }

    fn render_failure(&mut self, format: ReplyFormat, failure: &Failure) -> Reply {
        endpoint::render_failure(format, failure).into()
    }

    fn render_refusal(&mut self, format: Option<ReplyFormat>, refusal: HostRefusal) -> Refusal {
        endpoint::render_refusal(format, refusal).into()
    }

    fn report_request(
        &mut self,
        key: &str,
        config: &Config,
        task_id: &str,
        good: bool,
    ) -> Result<HttpRequest, Failure> {
        let key = ApiKey::new(key)?;
        Ok(endpoint::report_request(&key, config, task_id, good)?)
    }

    fn parse_report(&mut self, reply: Result<(u16, &[u8]), TransportError>) -> Result<(), Failure> {
        match reply {
            Ok((status, body)) => endpoint::parse_report(status, body),
            Err(error) => Err(endpoint::report_transport_failure(error)),
        }
    }
}

/// The host refusal with this snake_case name.
pub fn host_refusal(name: &str) -> Option<HostRefusal> {
    [
        ("unknown_key", HostRefusal::UnknownKey),
        ("unknown_id", HostRefusal::UnknownId),
        ("busy", HostRefusal::Busy),
        ("disabled", HostRefusal::Disabled),
        ("too_large", HostRefusal::TooLarge),
    ]
    .into_iter()
    .find(|(n, _)| *n == name)
    .map(|(_, r)| r)
}

fn format_json(f: ReplyFormat) -> Value {
    json!({"json": f.json, "cors": f.cors})
}

/// A reply as results write it: `{"status", "content_type", "headers": [[name, value]], "body"}`.
pub fn reply_json(r: &Reply) -> Value {
    json!({"status": r.status, "content_type": r.content_type, "headers": r.headers, "body": r.body})
}

/// A refusal as results write it.
pub fn refusal_json(r: &Refusal) -> Value {
    json!({"code": r.code, "message": r.message, "key": r.key, "reply": reply_json(&r.reply)})
}

/// A `res.php` action as results write it: `{"get": id}`, `{"get_many": [ids]}`,
/// `"threads_info"`, `"balance"`, `{"report_good": id}`, `{"report_bad": id}`.
pub fn action_json(a: &ResAction) -> Value {
    match a {
        ResAction::Get(id) => json!({"get": id}),
        ResAction::GetMany(ids) => json!({"get_many": ids}),
        ResAction::ThreadsInfo => json!("threads_info"),
        ResAction::Balance => json!("balance"),
        ResAction::ReportGood(id) => json!({"report_good": id}),
        ResAction::ReportBad(id) => json!({"report_bad": id}),
    }
}

/// What `read-request` gave, as results write it.
pub fn read_json(read: &Read) -> Value {
    match read {
        Read::Submit { key, task_json, task_type, format } => json!({"submit": {
            "key": key,
            "task": serde_json::from_str::<Value>(task_json).unwrap_or(Value::Null),
            "task_type": task_type,
            "format": format_json(*format),
        }}),
        Read::Res { key, action, format } => {
            json!({"res": {"key": key, "action": action_json(action), "format": format_json(*format)}})
        }
        Read::Refused(refusal) => json!({"refusal": refusal_json(refusal)}),
    }
}

/// A path as vectors write it: `in_php` or `res_php`.
fn endpoint_path(path: &str) -> Option<Path> {
    match path {
        "in_php" => Some(Path::InPhp),
        "res_php" => Some(Path::ResPhp),
        _ => None,
    }
}

/// Runs one case on `host` and gives its result: `{"submit"|"res"|"refusal"|"format"|"reply"|
/// "send"|"rejected"|"recorded"|"failed": ...}`, or `{"error": ...}` for a case the vector gets
/// wrong.
pub fn run_case<H: EndpointHost>(host: &mut H, call: &Call) -> Value {
    let error = |e: String| json!({"error": e});
    match call {
        Call::Read { path, params, uploads } => {
            let Some(path) = endpoint_path(path) else { return error(format!("unknown path {path}")) };
            let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let mut bytes = Vec::new();
            for upload in uploads {
                match STANDARD.decode(&upload.base64) {
                    Ok(b) => bytes.push((upload.name.as_str(), b)),
                    Err(e) => return error(format!("upload {}: {e}", upload.name)),
                }
            }
            let uploads: Vec<(&str, &[u8])> = bytes.iter().map(|(n, b)| (*n, b.as_slice())).collect();
            read_json(&host.read(path, &params, &uploads))
        }
        Call::ReadFormat { path, params } => {
            let Some(path) = endpoint_path(path) else { return error(format!("unknown path {path}")) };
            let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            json!({"format": format_json(host.read_format(path, &params))})
        }
        Call::Submitted { format, task_type, id } => {
            json!({"reply": reply_json(&host.render_submitted((*format).into(), task_type, id))})
        }
        Call::State { format, task_type, state } => {
            json!({"reply": reply_json(&host.render_state((*format).into(), task_type, state.native()))})
        }
        Call::States { format, states } => {
            let states: Vec<SolveState<'_>> = states.iter().map(State::native).collect();
            json!({"reply": reply_json(&host.render_states((*format).into(), &states))})
        }
        Call::Threads { format, threads, working_threads } => {
            let info = ThreadsInfo::new(*threads, *working_threads);
            json!({"reply": reply_json(&host.render_threads((*format).into(), info))})
        }
        Call::Balance { format, balance } => {
            json!({"reply": reply_json(&host.render_balance((*format).into(), *balance))})
        }
        Call::Reported { format } => json!({"reply": reply_json(&host.render_reported((*format).into()))}),
        Call::Failure { format, failure } => {
            json!({"reply": reply_json(&host.render_failure((*format).into(), failure))})
        }
        Call::Refusal { format, refusal } => match host_refusal(refusal) {
            Some(refusal) => json!({"refusal": refusal_json(&host.render_refusal(format.map(Into::into), refusal))}),
            None => error(format!("unknown host refusal {refusal}")),
        },
        Call::Report { key, config, task_id, good } => {
            let config = if config.is_null() { json!({}) } else { config.clone() };
            let config = match Config::from_json(&config.to_string()) {
                Ok(config) => config,
                Err(e) => return error(format!("bad config: {e}")),
            };
            match host.report_request(key, &config, task_id, *good) {
                Ok(request) => {
                    let send = output_event(0, &Output::Send(request));
                    json!({"send": send["send"]})
                }
                Err(failure) => json!({"rejected": failure_json(&failure)}),
            }
        }
        Call::ParseReport { reply } => {
            let reply = match reply {
                ReportReply::Reply { status, body } => Ok((*status, body.as_bytes())),
                ReportReply::Transport(name) => match TransportError::parse(name) {
                    Some(e) => Err(e),
                    None => return error(format!("unknown transport error {name}")),
                },
            };
            match host.parse_report(reply) {
                Ok(()) => json!({"recorded": true}),
                Err(failure) => json!({"failed": failure_json(&failure)}),
            }
        }
    }
}

/// Checks a result against its case's hand-written `expect`: `outcome` (the result's one key),
/// and where given `code` (a refusal's or failure's), `task_type` (a submit's), `task` (a
/// submit's whole task), `action` (a `res.php` question's), `body` and `content_type` (a reply's,
/// or a refusal's reply's), `headers`, `json` and `cors` (a format's).
pub fn check_expect(expect: &Value, result: &Value) -> Result<(), String> {
    let (outcome, body) = result.as_object().and_then(|o| o.iter().next()).ok_or("an empty result")?;
    if expect.get("outcome").and_then(Value::as_str) != Some(outcome) {
        return Err(format!("outcome {outcome}, expected {:?}", expect.get("outcome")));
    }
    let reply = body.get("reply").unwrap_or(body);
    let found = |key: &str| match key {
        "code" => body.get("code"),
        "task_type" | "task" => body.get(key),
        "action" => body.get("action"),
        "body" | "content_type" | "headers" => reply.get(key),
        "json" | "cors" if outcome == "format" => body.get(key),
        _ => None,
    };
    for key in ["code", "task_type", "task", "action", "body", "content_type", "headers", "json", "cors"] {
        if let Some(expected) = expect.get(key)
            && found(key) != Some(expected)
        {
            return Err(format!("{key} is {:?}, expected {expected}", found(key)));
        }
    }
    Ok(())
}
