//! Golden vectors: the schema of `testdata/vectors/*.json` and the reference replayer.
//!
//! A vector is a task, a config, a key, a start time and a script of what the upstream does
//! with each request the engine sends. Replaying it gives a transcript: every output, reply and
//! restore, with its virtual time. Every host replays every vector with the same algorithm and
//! must produce exactly the stored transcript. `testdata/vectors/README.md` documents the
//! format and the algorithm for hosts in other languages.

use crate::json::{Fields, Json};
use crate::{ApiKey, Body, Config, Failure, Misuse, Output, Solve, TransportError};

/// Replays stop after this many events (a runaway engine is reported, not looped on).
pub const MAX_EVENTS: usize = 1_000;

/// One vector file.
#[derive(Clone, Debug, PartialEq)]
pub struct Vector {
    pub name: String,
    pub description: String,
    pub key: String,
    /// Config JSON (missing fields take defaults).
    pub config: Json<'static>,
    /// Task JSON.
    pub task: Json<'static>,
    /// The first `now` (epoch ms).
    pub start_ms: u64,
    /// What the upstream does with each sent request, in order.
    pub script: Vec<Scripted>,
    /// Snapshot and restore (with the key) before these 0-based `poll_output` calls.
    pub restore_before: Vec<u64>,
    /// A summary of the expected outcome written by hand (`outcome`, `code`, `class`, `sends`),
    /// checked against the transcript so a regenerated transcript cannot silently change meaning.
    pub expect: Json<'static>,
    /// The expected transcript.
    pub transcript: Vec<Json<'static>>,
}

/// The upstream's behaviour for one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Scripted {
    /// `{"reply": {"after_ms", "status", "body"}}`: the reply arrives `after_ms` after sending.
    Reply { after_ms: u64, status: u16, body: String },
    /// `{"transport": {"after_ms", "error"}}`: the host reports a transport error (`timeout`,
    /// `connect`, `broken`) `after_ms` after sending.
    Transport { after_ms: u64, error: TransportError },
    /// `"silence"`: nothing comes back and the host reports nothing; the engine's own request
    /// timeout decides.
    Silence,
}

const VECTOR_FIELDS: [&str; 10] =
    ["name", "description", "key", "config", "task", "start_ms", "script", "restore_before", "expect", "transcript"];

impl Vector {
    /// Parses a vector file.
    pub fn parse(text: &str) -> Result<Vector, String> {
        let json = Json::parse(text).map_err(|e| e.to_string())?;
        let f = Fields::new(&json, "vector", &VECTOR_FIELDS)?;
        let list =
            |key: &str| f.opt_value(key).map_or(Ok(&[][..]), |v| v.as_array().ok_or(format!("{key} must be an array")));
        Ok(Vector {
            name: f.str("name")?.to_owned(),
            description: f.str("description")?.to_owned(),
            key: f.str("key")?.to_owned(),
            config: f.opt_value("config").cloned().unwrap_or(Json::Object(Vec::new())).into_owned(),
            task: f.value("task")?.clone().into_owned(),
            start_ms: f.opt_u64("start_ms")?.unwrap_or(0),
            script: list("script")?.iter().map(Scripted::parse).collect::<Result<_, _>>()?,
            restore_before: list("restore_before")?
                .iter()
                .map(|v| v.as_u64().ok_or("restore_before holds integers"))
                .collect::<Result<_, _>>()?,
            expect: f.opt_value("expect").cloned().unwrap_or(Json::Null).into_owned(),
            transcript: list("transcript")?.iter().cloned().map(Json::into_owned).collect(),
        })
    }

    /// The vector as pretty JSON, fields in schema order.
    pub fn to_pretty(&self) -> String {
        let mut fields = vec![
            ("name", Json::from(self.name.as_str())),
            ("description", self.description.as_str().into()),
            ("key", self.key.as_str().into()),
            ("config", self.config.clone()),
            ("task", self.task.clone()),
            ("start_ms", self.start_ms.into()),
            ("script", Json::Array(self.script.iter().map(Scripted::to_json).collect())),
        ];
        if !self.restore_before.is_empty() {
            fields.push(("restore_before", Json::Array(self.restore_before.iter().map(|n| (*n).into()).collect())));
        }
        if !self.expect.is_null() {
            fields.push(("expect", self.expect.clone()));
        }
        fields.push(("transcript", Json::Array(self.transcript.clone())));
        Json::object(fields).to_pretty()
    }
}

impl Scripted {
    fn parse(value: &Json<'_>) -> Result<Scripted, String> {
        if value.as_str() == Some("silence") {
            return Ok(Scripted::Silence);
        }
        match crate::json::single(value, "script entry")? {
            ("reply", body) => {
                let f = Fields::new(body, "reply", &["after_ms", "status", "body"])?;
                let status = u16::try_from(f.u64("status")?).map_err(|_| "status must fit in u16")?;
                Ok(Scripted::Reply { after_ms: f.u64("after_ms")?, status, body: f.str("body")?.to_owned() })
            }
            ("transport", body) => {
                let f = Fields::new(body, "transport", &["after_ms", "error"])?;
                Ok(Scripted::Transport { after_ms: f.u64("after_ms")?, error: f.name("error", TransportError::parse)? })
            }
            (other, _) => Err(format!("unknown script entry `{other}`")),
        }
    }

    fn to_json(&self) -> Json<'_> {
        match self {
            Scripted::Reply { after_ms, status, body } => Json::object([(
                "reply",
                Json::object([
                    ("after_ms", Json::from(*after_ms)),
                    ("status", u64::from(*status).into()),
                    ("body", body.as_str().into()),
                ]),
            )]),
            Scripted::Transport { after_ms, error } => Json::object([(
                "transport",
                Json::object([("after_ms", Json::from(*after_ms)), ("error", error.as_str().into())]),
            )]),
            Scripted::Silence => Json::from("silence"),
        }
    }
}

/// What the replayer needs from an engine: the native [`Solve`] or one behind a boundary
/// (the WebAssembly component).
pub trait Engine {
    type Solve;
    fn create(&mut self, task_json: &str, key: &str, config: &Config, now: u64) -> Result<Self::Solve, Failure>;
    /// Restores a snapshot; an error is reported as text.
    fn restore(&mut self, snapshot: &str, key: &str) -> Result<Self::Solve, String>;
    fn snapshot(&mut self, solve: &Self::Solve) -> String;
    fn poll_output(&mut self, solve: &mut Self::Solve, now: u64) -> Result<Output, Misuse>;
    fn handle_response(
        &mut self,
        solve: &mut Self::Solve,
        now: u64,
        id: u32,
        status: u16,
        body: &str,
    ) -> Result<(), Misuse>;
    fn handle_transport_error(
        &mut self,
        solve: &mut Self::Solve,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> Result<(), Misuse>;
}

/// The engine itself.
pub struct Native;

impl Engine for Native {
    type Solve = Solve;

    fn create(&mut self, task_json: &str, key: &str, config: &Config, now: u64) -> Result<Solve, Failure> {
        Solve::from_json(task_json, key, config, now)
    }

    fn restore(&mut self, snapshot: &str, key: &str) -> Result<Solve, String> {
        let key = ApiKey::new(key).map_err(|e| e.to_string())?;
        Solve::restore(snapshot, key).map_err(|e| e.to_string())
    }

    fn snapshot(&mut self, solve: &Solve) -> String {
        solve.snapshot()
    }

    fn poll_output(&mut self, solve: &mut Solve, now: u64) -> Result<Output, Misuse> {
        solve.poll_output(now)
    }

    fn handle_response(&mut self, solve: &mut Solve, now: u64, id: u32, status: u16, body: &str) -> Result<(), Misuse> {
        solve.handle_response(now, id, status, body.as_bytes())
    }

    fn handle_transport_error(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> Result<(), Misuse> {
        solve.handle_transport_error(now, id, error)
    }
}

/// The transcript event for an output at time `at`.
pub fn output_event(at: u64, output: &Output) -> Json<'_> {
    match output {
        Output::Send(request) => {
            let body = match &request.body {
                Body::Form(text) => ("body", Json::from(text.as_str())),
                Body::Multipart(bytes) => ("body_base64", Json::from(crate::base64::encode(bytes))),
            };
            let send = Json::object([
                ("id", Json::from(request.id)),
                ("kind", request.kind.as_str().into()),
                ("method", request.method.into()),
                ("url", request.url.as_str().into()),
                ("content_type", Json::from(&*request.content_type)),
                ("timeout_ms", request.timeout_ms.into()),
                body,
            ]);
            event(at, "send", send)
        }
        Output::WaitUntil(t) => event(at, "wait_until", (*t).into()),
        Output::Solved(solution) => event(at, "solved", solution.to_json()),
        Output::Failed(failure) => event(at, "failed", failure.to_json()),
    }
}

/// `{"at": at, kind: body}`.
fn event<'a>(at: u64, kind: &'a str, body: Json<'a>) -> Json<'a> {
    Json::object([("at", Json::from(at)), (kind, body)])
}

fn misuse_event(at: u64, misuse: &Misuse) -> Json<'_> {
    event(at, "misuse", misuse.kind().into())
}

/// Replays a vector and returns the transcript it produces. The algorithm, which every host
/// follows:
///
/// 1. `now = start_ms`; create the solve (a failure is the whole transcript: `rejected`).
/// 2. Loop: before the n-th `poll_output` listed in `restore_before`, snapshot and restore
///    (`restored`). Call `poll_output(now)` and record it.
///    - `send`: take the next script entry. `reply`/`transport`: `now += after_ms`, record and
///      feed it. `silence`: feed nothing. (No entry left: record `error` and stop.)
///    - `wait_until t`: `now = max(now, t)`.
///    - `solved`/`failed`: call `poll_output(now + 1000)` once more, which must repeat the
///      same output (else record `error`), and stop.
pub fn replay<E: Engine>(engine: &mut E, vector: &Vector) -> Vec<Json<'static>> {
    let mut events = Vec::new();
    let mut now = vector.start_ms;
    let config = match Config::from_value(&vector.config) {
        Ok(config) => config,
        Err(e) => return vec![event(now, "error", format!("bad config: {e}").into()).into_owned()],
    };
    let mut solve = match engine.create(&vector.task.to_text(), &vector.key, &config, now) {
        Ok(solve) => solve,
        Err(failure) => return vec![event(now, "rejected", failure.to_json()).into_owned()],
    };
    let mut script = vector.script.iter();
    let mut polls: u64 = 0;
    while events.len() < MAX_EVENTS {
        if vector.restore_before.contains(&polls) {
            let snapshot = engine.snapshot(&solve);
            match engine.restore(&snapshot, &vector.key) {
                Ok(restored) => solve = restored,
                Err(e) => {
                    events.push(event(now, "error", format!("restore failed: {e}").into()).into_owned());
                    return events;
                }
            }
            events.push(event(now, "restored", true.into()).into_owned());
        }
        polls += 1;
        let output = match engine.poll_output(&mut solve, now) {
            Ok(output) => output,
            Err(misuse) => {
                events.push(misuse_event(now, &misuse).into_owned());
                return events;
            }
        };
        events.push(output_event(now, &output).into_owned());
        match output {
            Output::Send(request) => {
                let fed = match script.next() {
                    Some(Scripted::Reply { after_ms, status, body }) => {
                        now += after_ms;
                        let reply = [
                            ("id", Json::from(request.id)),
                            ("status", u64::from(*status).into()),
                            ("body", body.as_str().into()),
                        ];
                        events.push(event(now, "reply", Json::object(reply)).into_owned());
                        engine.handle_response(&mut solve, now, request.id, *status, body)
                    }
                    Some(Scripted::Transport { after_ms, error }) => {
                        now += after_ms;
                        let transport = [("id", Json::from(request.id)), ("error", error.as_str().into())];
                        events.push(event(now, "transport", Json::object(transport)).into_owned());
                        engine.handle_transport_error(&mut solve, now, request.id, *error)
                    }
                    Some(Scripted::Silence) => Ok(()),
                    None => {
                        events.push(event(now, "error", "script exhausted".into()).into_owned());
                        return events;
                    }
                };
                if let Err(misuse) = fed {
                    events.push(misuse_event(now, &misuse).into_owned());
                    return events;
                }
            }
            Output::WaitUntil(t) => now = now.max(t),
            terminal @ (Output::Solved(_) | Output::Failed(_)) => {
                let again = engine.poll_output(&mut solve, now + 1_000);
                if again.as_ref() != Ok(&terminal) {
                    events.push(event(now + 1_000, "error", "terminal output was not sticky".into()).into_owned());
                }
                return events;
            }
        }
    }
    events.push(event(now, "error", "too many events".into()).into_owned());
    events
}
