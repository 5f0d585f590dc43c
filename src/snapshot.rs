//! The snapshot format: `{"format":"captchaai-engine/solve","version":1,"task":{..},"config":{..},"state":{..}}`.
//!
//! The task is stored as canonical task JSON and validated again on restore; the API key is never
//! stored. Any change to the state's shape needs a new version.

use crate::config::Config;
use crate::error::RestoreError;
use crate::json::{Fields, Json};
use crate::solve::State;
use crate::task::Task;

/// Identifies a snapshot of this engine.
pub const FORMAT: &str = "captchaai-engine/solve";
/// The snapshot version this engine writes. It also reads version 1 (engine 0.1), whose
/// in-flight request is sent again.
pub const VERSION: u64 = 2;

/// The snapshot text up to the state: `{"format":..,"version":1,"task":..,"config":..,"state":`.
/// It never changes during a solve, so a solve computes it once.
pub(crate) fn prefix(task: &Task, config: &Config) -> String {
    let head = Json::object([
        ("format", Json::from(FORMAT)),
        ("version", VERSION.into()),
        ("task", task.to_json()),
        ("config", config.to_json()),
        ("state", Json::Null),
    ])
    .to_text();
    head.strip_suffix("null}").map(str::to_owned).unwrap_or(head)
}

/// The whole snapshot: `prefix` (from [`prefix`]) followed by the state.
pub(crate) fn write(prefix: &str, state: &State) -> String {
    let state = state.to_json().to_text();
    let mut out = String::with_capacity(prefix.len() + state.len() + 1);
    out.push_str(prefix);
    out.push_str(&state);
    out.push('}');
    out
}

pub(crate) fn read(text: &str) -> Result<(Task, Config, State), RestoreError> {
    let value = Json::parse(text)
        .map_err(|e| if e.eof { RestoreError::Truncated } else { RestoreError::Malformed(e.to_string()) })?;
    if value.get("format").and_then(Json::as_str) != Some(FORMAT) {
        return Err(RestoreError::Foreign);
    }
    let version = match value.get("version").and_then(Json::as_u64) {
        Some(version @ (1 | VERSION)) => version,
        Some(other) => return Err(RestoreError::UnsupportedVersion(other)),
        None => return Err(RestoreError::Invalid("missing version".into())),
    };
    let f = Fields::new(&value, "snapshot", &["format", "version", "task", "config", "state"])
        .map_err(RestoreError::Invalid)?;
    let invalid = |what: &str, e: String| RestoreError::Invalid(format!("{what}: {e}"));
    let task = Task::from_json_value(f.value("task").map_err(RestoreError::Invalid)?)
        .map_err(|e| invalid("task", e.to_string()))?;
    let config =
        Config::from_value(f.value("config").map_err(RestoreError::Invalid)?).map_err(|e| invalid("config", e))?;
    let state =
        State::from_json(f.value("state").map_err(RestoreError::Invalid)?, version).map_err(RestoreError::Invalid)?;
    Ok((task, config, state))
}
