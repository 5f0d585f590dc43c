//! Golden vectors: the schema of `testdata/vectors/*.json` and the reference replayer.
//!
//! A vector is a task, a config, a key, a start time and a script of what the upstream does
//! with each request the engine sends. Replaying it gives a transcript: every output, reply and
//! restore, with its virtual time. Every host replays every vector with the same algorithm and
//! must produce exactly the stored transcript. `testdata/vectors/README.md` documents the
//! format and the algorithm for hosts in other languages.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{ApiKey, Body, Config, Failure, Misuse, Output, Solve, TransportError};

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
    /// Snapshot and restore (with the key) before these 0-based `poll_output` calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restore_before: Vec<usize>,
    /// The expected transcript.
    #[serde(default)]
    pub transcript: Vec<Value>,
}

fn empty_object() -> Value {
    json!({})
}

/// The upstream's behaviour for one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Scripted {
    /// The reply arrives `after_ms` after the request was sent.
    Reply { after_ms: u64, status: u16, body: String },
    /// The host reports a transport error `after_ms` after sending.
    Transport { after_ms: u64, error: TransportError },
    /// Nothing ever comes back and the host reports nothing: the engine's own timeout decides.
    Silence,
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
    fn handle_response(&mut self, solve: &mut Self::Solve, now: u64, id: u32, status: u16, body: &str) -> Result<(), Misuse>;
    fn handle_transport_error(&mut self, solve: &mut Self::Solve, now: u64, id: u32, error: TransportError) -> Result<(), Misuse>;
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

    fn handle_transport_error(&mut self, solve: &mut Solve, now: u64, id: u32, error: TransportError) -> Result<(), Misuse> {
        solve.handle_transport_error(now, id, error)
    }
}

/// The transcript event for an output at time `at`.
pub fn output_event(at: u64, output: &Output) -> Value {
    match output {
        Output::Send(request) => {
            let mut send = json!({
                "id": request.id,
                "kind": request.kind.as_str(),
                "method": request.method,
                "url": request.url,
                "content_type": request.content_type,
                "timeout_ms": request.timeout_ms,
            });
            match &request.body {
                Body::Form(text) => send["body"] = Value::from(text.as_str()),
                Body::Multipart(bytes) => {
                    use base64::Engine as _;
                    send["body_base64"] = base64::engine::general_purpose::STANDARD.encode(bytes).into();
                }
            }
            json!({ "at": at, "send": send })
        }
        Output::WaitUntil(t) => json!({ "at": at, "wait_until": t }),
        Output::Solved(solution) => json!({ "at": at, "solved": solution }),
        Output::Failed(failure) => json!({ "at": at, "failed": failure }),
    }
}

fn misuse_event(at: u64, misuse: &Misuse) -> Value {
    json!({ "at": at, "misuse": misuse.kind() })
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
pub fn replay<E: Engine>(engine: &mut E, vector: &Vector) -> Vec<Value> {
    let mut events = Vec::new();
    let mut now = vector.start_ms;
    let config: Config = match serde_json::from_value(vector.config.clone()) {
        Ok(config) => config,
        Err(e) => return vec![json!({ "at": now, "error": format!("bad config: {e}") })],
    };
    let mut solve = match engine.create(&vector.task.to_string(), &vector.key, &config, now) {
        Ok(solve) => solve,
        Err(failure) => return vec![json!({ "at": now, "rejected": failure })],
    };
    let mut script = vector.script.iter();
    let mut polls = 0;
    while events.len() < MAX_EVENTS {
        if vector.restore_before.contains(&polls) {
            let snapshot = engine.snapshot(&solve);
            match engine.restore(&snapshot, &vector.key) {
                Ok(restored) => solve = restored,
                Err(e) => {
                    events.push(json!({ "at": now, "error": format!("restore failed: {e}") }));
                    return events;
                }
            }
            events.push(json!({ "at": now, "restored": true }));
        }
        polls += 1;
        let output = match engine.poll_output(&mut solve, now) {
            Ok(output) => output,
            Err(misuse) => {
                events.push(misuse_event(now, &misuse));
                return events;
            }
        };
        events.push(output_event(now, &output));
        match output {
            Output::Send(request) => {
                let fed = match script.next() {
                    Some(Scripted::Reply { after_ms, status, body }) => {
                        now += after_ms;
                        events.push(json!({ "at": now, "reply": { "id": request.id, "status": status, "body": body } }));
                        engine.handle_response(&mut solve, now, request.id, *status, body)
                    }
                    Some(Scripted::Transport { after_ms, error }) => {
                        now += after_ms;
                        events.push(json!({ "at": now, "transport": { "id": request.id, "error": error } }));
                        engine.handle_transport_error(&mut solve, now, request.id, *error)
                    }
                    Some(Scripted::Silence) => Ok(()),
                    None => {
                        events.push(json!({ "at": now, "error": "script exhausted" }));
                        return events;
                    }
                };
                if let Err(misuse) = fed {
                    events.push(misuse_event(now, &misuse));
                    return events;
                }
            }
            Output::WaitUntil(t) => now = now.max(t),
            terminal @ (Output::Solved(_) | Output::Failed(_)) => {
                let again = engine.poll_output(&mut solve, now + 1_000);
                if again.as_ref() != Ok(&terminal) {
                    events.push(json!({ "at": now + 1_000, "error": "terminal output was not sticky" }));
                }
                return events;
            }
        }
    }
    events.push(json!({ "at": now, "error": "too many events" }));
    events
}
