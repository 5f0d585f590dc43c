//! Golden vectors: the schema of `testdata/vectors/*.json` and the reference replayer.
//!
//! A vector is a task, a config, a key, a start time and a script of what the upstream does with
//! each request the engine sends. Replaying it gives a transcript: every output, reply and
//! restore, with its virtual time. Every host (native, the `.wasm` in wasmtime, Python,
//! JavaScript) replays every vector with the same algorithm and must produce exactly the stored
//! transcript. `testdata/vectors/README.md` documents the format and the algorithm.
//!
//! A vector may also create its solve with a solve-times model (adaptive polling): `solve_times`
//! holds the model's text form and `solve_times_after` the model's text once it observed the
//! solution. Both are derived from the engine's rule: `solve_times_recipe` says how the model is
//! built ([`build_solve_times`] runs it), and blessing writes both.

pub mod endpoint;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use captchaai_engine::{
    ApiKey, Body, Config, Failure, Misuse, Output, Solution, Solve, SolveTimes, Task, TransportError,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Replays stop after this many events (a runaway engine is reported, not looped on).
pub const MAX_EVENTS: usize = 1_000;

/// One vector file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vector {
    pub name: String,
    pub description: String,
    pub key: String,
    /// Config JSON (missing fields take defaults).
    #[serde(default = "empty_object")]
    pub config: Value,
    /// Task JSON.
    pub task: Value,
    /// The first `now` (epoch ms).
    #[serde(default)]
    pub start_ms: u64,
    /// What the upstream does with each sent request, in order.
    pub script: Vec<Scripted>,
    /// Snapshot and restore (with the key) before sending these 0-based requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restore_before: Vec<u64>,
    /// Host stalls (a store outage, a paused process): before sending a 0-based request, the
    /// host sleeps until a time, then asks for its output again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stall_before: Vec<Stall>,
    /// A summary of the expected outcome written by hand (`outcome`, `code`, `class`, `sends`),
    /// checked against the transcript so a regenerated transcript cannot silently change meaning.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub expect: Value,
    /// The expected transcript.
    #[serde(default)]
    pub transcript: Vec<Value>,
    /// How the solve-times model the solve is created with is built (blessing writes
    /// `solve_times` from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solve_times_recipe: Option<SolveTimesRecipe>,
    /// A solve-times model's text form: the solve is created with it (`create-with-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solve_times: Option<String>,
    /// The model's text form after the replay: it observed the solution when the solve was
    /// solved, else it is `solve_times` unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solve_times_after: Option<String>,
}

/// A host stall: before sending request `send` (0-based), the host sleeps until `until_ms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// The 0-based request the stall comes before.
    pub send: u64,
    /// When the host wakes (epoch ms); a time already passed changes nothing but the event.
    pub until_ms: u64,
}

/// How a vector's solve-times model is built: empty, then taught by solves of `task`, run
/// through the engine with that model against an upstream that answers each one `ready_ms`
/// after its submit (a poll before that finds it not ready), in order, the list `rounds` times.
/// Every solve is created with the model as it is then, as a host does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolveTimesRecipe {
    /// A task of the model's captcha type.
    pub task: Value,
    /// When each solve's answer is ready, ms after its submit.
    pub ready_ms: Vec<u64>,
    /// How many times the `ready_ms` list is run.
    pub rounds: u32,
}

/// Runs a recipe with the native engine and returns the model's text form.
pub fn build_solve_times(recipe: &SolveTimesRecipe) -> Result<String, String> {
    let task_json = recipe.task.to_string();
    let task_type = recipe.task.get("type").and_then(Value::as_str).ok_or("the recipe's task has no type")?;
    let mut model = SolveTimes::new(task_type).map_err(|e| e.to_string())?;
    let key = "0123456789abcdef0123456789abcdef";
    let mut now = 0;
    for ready in (0..recipe.rounds).flat_map(|_| recipe.ready_ms.iter().copied()) {
        let task = Task::from_json(&task_json).map_err(|e| format!("the recipe's task: {e}"))?;
        let key = ApiKey::new(key).map_err(|e| e.to_string())?;
        let mut solve =
            Solve::with_solve_times(task, key, &Config::default(), &model, now).map_err(|e| e.to_string())?;
        let mut submitted = now;
        let mut output = solve.poll_output(now).map_err(|m| format!("{m:?}"))?;
        let mut steps = 0;
        let solution = loop {
            steps += 1;
            if steps > MAX_EVENTS {
                return Err("a recipe solve did not end".into());
            }
            let request = match output {
                Output::Send(request) => request,
                Output::Solved(solution) => break solution,
                Output::Failed(failure) => return Err(format!("a recipe solve failed: {}", failure.code)),
            };
            now = now.max(request.at);
            let body = match request.kind.as_str() {
                "submit" => {
                    submitted = now;
                    r#"{"status":1,"request":"7000"}"#
                }
                "poll" if now >= submitted + ready => r#"{"status":1,"request":"0.tok"}"#,
                "poll" => r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#,
                other => return Err(format!("a recipe solve sent a {other} request")),
            };
            output = solve.handle_response(now, request.id, 200, body.as_bytes()).map_err(|m| format!("{m:?}"))?;
        };
        model.observe(&solution);
        now += 60_000;
    }
    Ok(model.to_string())
}

fn empty_object() -> Value {
    json!({})
}

/// The upstream's behaviour for one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scripted {
    /// `{"reply": {"after_ms", "status", "body" | "body_base64"}}`: the reply arrives `after_ms`
    /// after sending.
    Reply(ScriptedReply),
    /// `{"transport": {"after_ms", "error"}}`: the host reports a transport error (`timeout`,
    /// `connect`, `broken`) `after_ms` after sending.
    Transport(ScriptedTransport),
    /// `"silence"`: nothing comes back; the host times the request out after its `timeout_ms`
    /// and reports `timeout`.
    Silence,
}

/// A scripted reply. The body is `body` (text) or `body_base64` (any bytes, e.g. invalid UTF-8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedReply {
    pub after_ms: u64,
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl ScriptedReply {
    /// The body bytes as the upstream sends them.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        match (&self.body, &self.body_base64) {
            (Some(text), None) => Ok(text.as_bytes().to_vec()),
            (None, Some(b64)) => STANDARD.decode(b64).map_err(|e| format!("body_base64: {e}")),
            _ => Err("a reply needs exactly one of `body` and `body_base64`".into()),
        }
    }
}

/// A scripted transport error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTransport {
    pub after_ms: u64,
    pub error: String,
}

impl Vector {
    /// Parses a vector file.
    pub fn parse(text: &str) -> Result<Vector, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The vector as pretty JSON with sorted keys (the files' canonical form, as Python's
    /// `json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False)` writes it), without the
    /// final newline.
    pub fn to_pretty(&self) -> String {
        serde_json::to_value(self).and_then(|value| serde_json::to_string_pretty(&value)).unwrap_or_default()
    }
}

/// What the replayer needs from an engine: the native [`Solve`] or one behind a boundary (the
/// WebAssembly component). Values cross as the native types.
pub trait Engine {
    type Solve;
    fn create(&mut self, task_json: &str, key: &str, config: &Config, now: u64) -> Result<Self::Solve, Failure>;
    /// Restores a snapshot; an error is reported as text.
    fn restore(&mut self, snapshot: &str, key: &str) -> Result<Self::Solve, String>;
    fn snapshot(&mut self, solve: &Self::Solve) -> String;
    fn poll_output(&mut self, solve: &mut Self::Solve, now: u64) -> Result<Output, Misuse>;
    /// Feeds a reply; `body` is the bytes as received (a host across a text boundary converts
    /// them with `String::from_utf8_lossy` first, as the WIT says).
    fn handle_response(
        &mut self,
        solve: &mut Self::Solve,
        now: u64,
        id: u32,
        status: u16,
        body: &[u8],
    ) -> Result<Output, Misuse>;
    fn handle_transport_error(
        &mut self,
        solve: &mut Self::Solve,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> Result<Output, Misuse>;
    /// `create` with the solve-times model whose text form is `solve_times` (`from-text`, then
    /// `create-with-times`); `Err` when the text is refused. By default the native engine
    /// creates the solve and this engine restores its snapshot.
    fn create_with_times(
        &mut self,
        task_json: &str,
        key: &str,
        config: &Config,
        now: u64,
        solve_times: &str,
    ) -> Result<Result<Self::Solve, Failure>, String> {
        let solve = match Native.create_with_times(task_json, key, config, now, solve_times)? {
            Ok(solve) => solve,
            Err(failure) => return Ok(Err(failure)),
        };
        self.restore(&solve.snapshot(), key).map(Ok)
    }
    /// The text form of the model `solve_times` after it observed `solution` (`from-text`,
    /// `observe`, `to-text`). By default the native model's.
    fn observe(&mut self, solve_times: &str, solution: &Solution) -> Result<String, String> {
        Native.observe(solve_times, solution)
    }
}

/// The engine itself.
pub struct Native;

impl Engine for Native {
    type Solve = Solve;

    fn create(&mut self, task_json: &str, key: &str, config: &Config, now: u64) -> Result<Solve, Failure> {
        Solve::from_json(task_json, key, config, now)
    }

    fn restore(&mut self, snapshot: &str, key: &str) -> Result<Solve, String> {
        Solve::restore(snapshot, key).map_err(|e| e.to_string())
    }

    fn snapshot(&mut self, solve: &Solve) -> String {
        solve.snapshot()
    }

    fn poll_output(&mut self, solve: &mut Solve, now: u64) -> Result<Output, Misuse> {
        solve.poll_output(now)
    }

    fn handle_response(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        status: u16,
        body: &[u8],
    ) -> Result<Output, Misuse> {
        solve.handle_response(now, id, status, body)
    }

    fn handle_transport_error(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> Result<Output, Misuse> {
        solve.handle_transport_error(now, id, error)
    }

    fn create_with_times(
        &mut self,
        task_json: &str,
        key: &str,
        config: &Config,
        now: u64,
        solve_times: &str,
    ) -> Result<Result<Solve, Failure>, String> {
        let model: SolveTimes = solve_times.parse().map_err(|e: captchaai_engine::SolveTimesError| e.to_string())?;
        let created = (|| -> Result<Solve, Failure> {
            let key = ApiKey::new(key)?;
            let task = Task::from_json(task_json)?;
            Ok(Solve::with_solve_times(task, key, config, &model, now)?)
        })();
        Ok(created)
    }

    fn observe(&mut self, solve_times: &str, solution: &Solution) -> Result<String, String> {
        let mut model: SolveTimes =
            solve_times.parse().map_err(|e: captchaai_engine::SolveTimesError| e.to_string())?;
        model.observe(solution);
        Ok(model.to_string())
    }
}

/// The failure's serde form with its `origin`: `{"code", "class", "origin", "message",
/// "retry_after_ms", "field", "task_id"}`.
pub fn failure_json(f: &Failure) -> Value {
    let mut value = serde_json::to_value(f).expect("a failure serializes");
    value["origin"] = json!(f.origin().as_str());
    value
}

/// The solution's serde form: `{"answer": {"text": s} | {"json": s}, "user_agent", "task_id",
/// "submitted_at", ...}`.
pub fn solution_json(s: &Solution) -> Value {
    serde_json::to_value(s).expect("a solution serializes")
}

/// The transcript event for an output at time `at`.
pub fn output_event(at: u64, output: &Output) -> Value {
    match output {
        Output::Send(request) => {
            let mut send = json!({
                "id": request.id,
                "kind": request.kind.as_str(),
                "at": request.at,
                "url": &*request.url,
                "content_type": &*request.content_type,
                "timeout_ms": request.timeout_ms,
            });
            match &request.body {
                Body::Form(text) => send["body"] = json!(&**text),
                Body::Multipart(bytes) => send["body_base64"] = json!(STANDARD.encode(bytes)),
            }
            event(at, "send", send)
        }
        Output::Solved(solution) => event(at, "solved", solution_json(solution)),
        Output::Failed(failure) => event(at, "failed", failure_json(failure)),
    }
}

/// `{"at": at, kind: body}`.
fn event(at: u64, kind: &str, body: Value) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("at".into(), at.into());
    map.insert(kind.into(), body);
    Value::Object(map)
}

/// Replays a vector and returns the transcript it produces. The algorithm, which every host
/// follows:
///
/// 1. `now = start_ms`; create the solve (a failure is the whole transcript: `rejected`).
/// 2. `output = poll_output(now)`, then loop:
///    - `send`: `now = max(now, request.at)` (the host sleeps). If this is the n-th request
///      (0-based) and `stall_before` has an entry for n: `now = max(now, until_ms)` (`stalled`).
///      If n is in `restore_before`: snapshot, restore (`restored`). After either,
///      `output = poll_output(now)` again (a terminal output is recorded as below). Record the
///      `send`. Take the next script entry:
///      `reply`/`transport`: `now += after_ms`, record it, and feed it; `silence`:
///      `now += timeout_ms`, record and feed a `timeout` transport error. The call returns
///      the next output. (No entry left: record `error` and stop.)
///    - `solved`/`failed`: record it, call `poll_output(now + 1000)` once more, which must
///      repeat the same output (else record `error`), and stop.
///
/// With `solve_times`, the solve is created with that model (step 1), and [`replay_full`] also
/// gives the model's text after it observed the solution (a solved solve only).
pub fn replay<E: Engine>(engine: &mut E, vector: &Vector) -> Vec<Value> {
    replay_full(engine, vector).transcript
}

/// What replaying a vector gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// The transcript.
    pub transcript: Vec<Value>,
    /// With `solve_times`: the model's text form after the replay (having observed the solution
    /// when the solve was solved).
    pub solve_times_after: Option<String>,
}

/// [`replay`], also giving the model's text after the replay.
pub fn replay_full<E: Engine>(engine: &mut E, vector: &Vector) -> Replay {
    let mut solution = None;
    let transcript = replay_events(engine, vector, &mut solution);
    let solve_times_after = vector.solve_times.as_deref().map(|text| {
        // The model as a host holds it after creating the solve with it (which notes the
        // solve's poll cost), then observes into.
        let held = held_after_create(vector, text);
        match &solution {
            Some(solution) => engine.observe(&held, solution).unwrap_or_else(|e| format!("error: {e}")),
            None => held,
        }
    });
    Replay { transcript, solve_times_after }
}

/// The text of the model `text` once the vector's solve was created with it (the native
/// engine's; unchanged when the model, task, key or config is refused).
fn held_after_create(vector: &Vector, text: &str) -> String {
    let created = || -> Option<String> {
        let model: SolveTimes = text.parse().ok()?;
        let config = Config::from_json(&vector.config.to_string()).ok()?;
        let task = Task::from_json(&vector.task.to_string()).ok()?;
        let key = ApiKey::new(&vector.key).ok()?;
        Solve::with_solve_times(task, key, &config, &model, vector.start_ms).ok()?;
        Some(model.to_string())
    };
    created().unwrap_or_else(|| text.to_owned())
}

fn replay_events<E: Engine>(engine: &mut E, vector: &Vector, solved: &mut Option<Solution>) -> Vec<Value> {
    let mut events = Vec::new();
    let mut now = vector.start_ms;
    let config = match Config::from_json(&vector.config.to_string()) {
        Ok(config) => config,
        Err(e) => return vec![event(now, "error", format!("bad config: {e}").into())],
    };
    let task_json = vector.task.to_string();
    let created = match &vector.solve_times {
        Some(text) => match engine.create_with_times(&task_json, &vector.key, &config, now, text) {
            Ok(created) => created,
            Err(e) => return vec![event(now, "error", format!("solve_times refused: {e}").into())],
        },
        None => engine.create(&task_json, &vector.key, &config, now),
    };
    let mut solve = match created {
        Ok(solve) => solve,
        Err(failure) => return vec![event(now, "rejected", failure_json(&failure))],
    };
    let mut script = vector.script.iter();
    let misuse = |at: u64, m: Misuse| event(at, "misuse", m.kind().into());
    let mut output = match engine.poll_output(&mut solve, now) {
        Ok(output) => output,
        Err(m) => return vec![misuse(now, m)],
    };
    let mut sends: u64 = 0;
    while events.len() < MAX_EVENTS {
        let request = match output {
            Output::Send(request) => request,
            terminal => {
                events.push(output_event(now, &terminal));
                if engine.poll_output(&mut solve, now + 1_000).as_ref() != Ok(&terminal) {
                    events.push(event(now + 1_000, "error", "terminal output was not sticky".into()));
                }
                if let Output::Solved(solution) = terminal {
                    *solved = Some(solution);
                }
                return events;
            }
        };
        now = now.max(request.at);
        let stall = vector.stall_before.iter().find(|stall| stall.send == sends);
        if let Some(stall) = stall {
            now = now.max(stall.until_ms);
            events.push(event(now, "stalled", true.into()));
        }
        let restore = vector.restore_before.contains(&sends);
        if restore {
            let snapshot = engine.snapshot(&solve);
            match engine.restore(&snapshot, &vector.key) {
                Ok(restored) => solve = restored,
                Err(e) => {
                    events.push(event(now, "error", format!("restore failed: {e}").into()));
                    return events;
                }
            }
            events.push(event(now, "restored", true.into()));
        }
        let request = if stall.is_some() || restore {
            match engine.poll_output(&mut solve, now) {
                Ok(Output::Send(again)) => again,
                Ok(other) => {
                    output = other;
                    continue;
                }
                Err(m) => {
                    events.push(misuse(now, m));
                    return events;
                }
            }
        } else {
            request
        };
        sends += 1;
        events.push(output_event(now, &Output::Send(request.clone())));
        let fed = match script.next() {
            Some(Scripted::Reply(reply)) => {
                let bytes = match reply.bytes() {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        events.push(event(now, "error", e.into()));
                        return events;
                    }
                };
                now += reply.after_ms;
                let mut fed = json!({"id": request.id, "status": reply.status});
                match &reply.body {
                    Some(text) => fed["body"] = json!(text),
                    None => fed["body_base64"] = json!(reply.body_base64),
                }
                events.push(event(now, "reply", fed));
                engine.handle_response(&mut solve, now, request.id, reply.status, &bytes)
            }
            Some(Scripted::Transport(transport)) => {
                let Some(error) = TransportError::parse(&transport.error) else {
                    events.push(event(now, "error", format!("unknown transport error {}", transport.error).into()));
                    return events;
                };
                now += transport.after_ms;
                events.push(event(now, "transport", json!({"id": request.id, "error": error.as_str()})));
                engine.handle_transport_error(&mut solve, now, request.id, error)
            }
            Some(Scripted::Silence) => {
                now += request.timeout_ms;
                let error = TransportError::Timeout;
                events.push(event(now, "transport", json!({"id": request.id, "error": error.as_str()})));
                engine.handle_transport_error(&mut solve, now, request.id, error)
            }
            None => {
                events.push(event(now, "error", "script exhausted".into()));
                return events;
            }
        };
        output = match fed {
            Ok(output) => output,
            Err(m) => {
                events.push(misuse(now, m));
                return events;
            }
        };
    }
    events.push(event(now, "error", "too many events".into()));
    events
}
