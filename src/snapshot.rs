//! The snapshot format: `{"format":"captchaai-engine/solve","version":1,"task":{..},"config":{..},"state":{..}}`.
//!
//! The task is stored as canonical task JSON and validated again on restore; the API key is never
//! stored. Any change to the state's shape needs a new version.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Config;
use crate::error::RestoreError;
use crate::solve::State;
use crate::task::Task;

/// Identifies a snapshot of this engine.
pub const FORMAT: &str = "captchaai-engine/solve";
/// The snapshot version this engine writes and reads.
pub const VERSION: u64 = 1;

#[derive(Serialize)]
struct Out<'a> {
    format: &'static str,
    version: u64,
    task: Value,
    config: &'a Config,
    state: &'a State,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct In {
    #[allow(dead_code)]
    format: String,
    #[allow(dead_code)]
    version: u64,
    task: Value,
    config: Config,
    state: State,
}

pub(crate) fn write(task: &Task, config: &Config, state: &State) -> String {
    let out = Out { format: FORMAT, version: VERSION, task: task.to_value(), config, state };
    // Serializing plain data into a String cannot fail.
    serde_json::to_string(&out).unwrap_or_default()
}

pub(crate) fn read(text: &str) -> Result<(Task, Config, State), RestoreError> {
    let value: Value = serde_json::from_str(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Eof => RestoreError::Truncated,
        _ => RestoreError::Malformed(e.to_string()),
    })?;
    if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(RestoreError::Foreign);
    }
    match value.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        Some(other) => return Err(RestoreError::UnsupportedVersion(other)),
        None => return Err(RestoreError::Invalid("missing version".into())),
    }
    let snapshot: In = serde_json::from_value(value).map_err(|e| RestoreError::Invalid(e.to_string()))?;
    let task = Task::from_value(&snapshot.task).map_err(|e| RestoreError::Invalid(format!("task: {e}")))?;
    Ok((task, snapshot.config, snapshot.state))
}
