//! The snapshot format: `{"format":"captchaai-engine/solve","version":2,"task":{..},"config":{..},"state":{..}}`
//! (version 3 when the solve has a learned gap: `"second_wait_ms":..` before the state, and
//! `"gap_after_polls":..` when the gap follows more than one regular poll).
//!
//! The task is stored as canonical task JSON and validated again on restore; the API key is never
//! stored. Any change to the state's shape ([`crate::state`]) needs a new version. Written and read
//! with serde.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::config::Config;
use crate::error::ValidationError;
use crate::schedule::Gap;
use crate::state::{State, StateJson};
use crate::task::Task;

/// Identifies a snapshot of this engine.
pub(crate) const FORMAT: &str = "captchaai-engine/solve";
/// The snapshot version this engine writes. It also reads version 1 (engine 0.1), whose
/// in-flight request is sent again.
pub(crate) const VERSION: u64 = 2;
/// The version written instead when the solve has a learned gap ([`crate::SolveTimes`]):
/// version 2 plus, before the state, the gap's wait `second_wait_ms` and, when it follows more
/// than one regular poll, their number `gap_after_polls` (absent: one; an engine that predates
/// the field refuses a snapshot with it as invalid). Solves without a gap keep writing version
/// 2, byte for byte as before.
pub(crate) const GAP_VERSION: u64 = 3;

/// Why a snapshot could not be restored.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The text is not JSON.
    #[error("snapshot is not valid JSON: {0}")]
    Malformed(String),
    /// The JSON ends early (a truncated snapshot).
    #[error("snapshot is truncated")]
    Truncated,
    /// Valid JSON, but not a snapshot of this engine.
    #[error("not a captchaai-engine snapshot")]
    Foreign,
    /// A snapshot of another format version.
    #[error("snapshot version {0} is not supported (this engine reads version {current})", current = VERSION)]
    UnsupportedVersion(u64),
    /// Our format, but its content is inconsistent or fails validation.
    #[error("snapshot is invalid: {0}")]
    Invalid(String),
    /// The key supplied with the snapshot is malformed.
    #[error("{0}")]
    Key(ValidationError),
}

impl RestoreError {
    /// A stable snake_case name (used by the WIT interface).
    pub fn kind(&self) -> &'static str {
        match self {
            RestoreError::Malformed(_) => "malformed",
            RestoreError::Truncated => "truncated",
            RestoreError::Foreign => "foreign",
            RestoreError::UnsupportedVersion(_) => "unsupported_version",
            RestoreError::Invalid(_) => "invalid",
            RestoreError::Key(_) => "invalid_key",
        }
    }
}

/// What a snapshot holds before the state, in the order it is written.
#[derive(Serialize)]
struct Head<'a> {
    format: &'static str,
    version: u64,
    task: &'a Task,
    config: &'a Config,
    #[serde(skip_serializing_if = "Option::is_none")]
    second_wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gap_after_polls: Option<u32>,
    /// Written as null, which [`prefix`] cuts off: [`write`] appends the state in its place.
    state: (),
}

/// A snapshot as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Snapshot {
    #[serde(rename = "format")]
    _format: Format,
    version: u64,
    task: Task,
    config: Config,
    #[serde(default)]
    second_wait_ms: Option<u64>,
    #[serde(default)]
    gap_after_polls: Option<u32>,
    state: StateJson,
}

/// What a snapshot restores.
pub(crate) struct Restored {
    pub task: Task,
    pub config: Config,
    /// The learned gap (version 3).
    pub gap: Option<Gap>,
    pub state: State,
}

/// The `format` field, which must be [`FORMAT`].
struct Format;

impl<'de> Deserialize<'de> for Format {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Format, D::Error> {
        let format = Cow::<'de, str>::deserialize(deserializer)?;
        if format == FORMAT { Ok(Format) } else { Err(serde::de::Error::custom("not a captchaai-engine snapshot")) }
    }
}

/// The snapshot text up to the state: `{"format":..,"version":2,"task":..,"config":..,"state":`.
/// It never changes during a solve, so a solve computes it once.
pub(crate) fn prefix(task: &Task, config: &Config, gap: Option<Gap>) -> String {
    let version = if gap.is_some() { GAP_VERSION } else { VERSION };
    let second_wait_ms = gap.map(|gap| gap.wait_ms);
    let gap_after_polls = gap.map(|gap| gap.after_polls).filter(|&polls| polls > 1);
    let head = Head { format: FORMAT, version, task, config, second_wait_ms, gap_after_polls, state: () };
    let text = serde_json::to_string(&head).unwrap_or_default();
    text.strip_suffix("null}").map(str::to_owned).unwrap_or(text)
}

/// The whole snapshot: `prefix` (from [`prefix`]) followed by the state.
pub(crate) fn write(prefix: &str, state: &State) -> String {
    let mut out = Vec::with_capacity(prefix.len() + 256);
    out.extend_from_slice(prefix.as_bytes());
    // Serializing plain data into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, state);
    out.push(b'}');
    String::from_utf8(out).unwrap_or_default()
}

/// The snapshot's base: everything but the state, `{"format":..,"version":2,"task":..,"config":..}`.
pub(crate) fn base(prefix: &str) -> String {
    let head = prefix.strip_suffix(r#","state":"#).unwrap_or(prefix);
    [head, "}"].concat()
}

/// The state alone, as the whole snapshot holds it.
pub(crate) fn state(state: &State) -> String {
    // Serializing plain data cannot fail.
    serde_json::to_string(state).unwrap_or_default()
}

/// Reads a snapshot kept as its two parts ([`base`] and [`state`]): the same checks as [`read`]
/// on the whole they make.
pub(crate) fn read_parts(base: &str, state: &str) -> Result<Restored, RestoreError> {
    for part in [base, state] {
        match serde_json::from_str::<serde::de::IgnoredAny>(part) {
            Ok(_) => {}
            Err(e) if e.is_eof() => return Err(RestoreError::Truncated),
            Err(e) => return Err(RestoreError::Malformed(e.to_string())),
        }
    }
    let head = base.trim_end().strip_suffix('}').ok_or(RestoreError::Foreign)?;
    read(&[head, r#","state":"#, state, "}"].concat())
}

/// Reads a snapshot in one typed pass. Only when that fails is the text read again, to say why:
/// truncated, not JSON, foreign, another version, or invalid content.
pub(crate) fn read(text: &str) -> Result<Restored, RestoreError> {
    let error = match serde_json::from_str::<Snapshot>(text) {
        Ok(snapshot) if matches!(snapshot.version, 1 | VERSION | GAP_VERSION) => {
            if snapshot.second_wait_ms.is_some() != (snapshot.version == GAP_VERSION) {
                return Err(RestoreError::Invalid("second_wait_ms belongs to version 3 snapshots only".into()));
            }
            if snapshot.gap_after_polls.is_some_and(|polls| polls < 2 || snapshot.second_wait_ms.is_none()) {
                return Err(RestoreError::Invalid("gap_after_polls is at least 2, with second_wait_ms".into()));
            }
            let state = snapshot.state.into_state(snapshot.version).map_err(RestoreError::Invalid)?;
            let gap = snapshot
                .second_wait_ms
                .map(|wait_ms| Gap { after_polls: snapshot.gap_after_polls.unwrap_or(1), wait_ms });
            return Ok(Restored { task: snapshot.task, config: snapshot.config, gap, state });
        }
        Ok(snapshot) => return Err(RestoreError::UnsupportedVersion(snapshot.version)),
        Err(e) if e.is_eof() => return Err(RestoreError::Truncated),
        Err(e) if e.is_syntax() => return Err(RestoreError::Malformed(e.to_string())),
        Err(e) => e,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| RestoreError::Malformed(e.to_string()))?;
    if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
        return Err(RestoreError::Foreign);
    }
    match value.get("version").and_then(Value::as_u64) {
        Some(1 | VERSION | GAP_VERSION) => Err(RestoreError::Invalid(error.to_string())),
        Some(other) => Err(RestoreError::UnsupportedVersion(other)),
        None => Err(RestoreError::Invalid("missing version".into())),
    }
}
