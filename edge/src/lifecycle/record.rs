//! The solve record's format and keys (layout and semantics in docs/state.md), read and written
//! only by its lifecycle (`crate::lifecycle`).
//!
//! - `solve/{id}/base`: the engine's `snapshot-base` (the task, an image included), written
//!   once per solve and deleted when it finishes.
//! - `solve/{id}`: the solve record: the engine's `snapshot-state` (a few hundred bytes) after
//!   each result, the lease, the thread slot, and once finished the response to repeat. It is
//!   created once with a plain `set` under a fresh random id and from then on changed only by
//!   compare-and-swap against the exact bytes last seen, so two instances never both drive a
//!   solve: whoever swaps in its lease drives, and a driver whose checkpoint fails to swap has
//!   lost the solve (deleted, or taken over after its lease ran out) and stops.
//!
//! Every value carries `exp` (epoch ms): wasi:keyvalue has no TTL, so expired records are
//! removed when met and by the bounded sweep (`crate::sweep`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::new_id;
use crate::kv::{Kv, Swapped};

/// Who drives a solve, until when (epoch ms). Nobody else may take it before `until`, and the
/// holder starts no upstream request that could end after it.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub until: u64,
}

/// A finished solve's response, repeated to every later `GET` until `exp`.
#[derive(Clone, Serialize, Deserialize)]
pub struct StoredResult {
    pub status: u16,
    pub body: Value,
}

/// The record at `solve/{id}`.
#[derive(Clone, Serialize, Deserialize)]
pub struct SolveRecord {
    /// When the record may be removed (epoch ms).
    pub exp: u64,
    /// The engine's `snapshot-state` while the solve is in flight.
    pub state: Option<String>,
    pub lease: Option<Lease>,
    /// The thread slot (`threads/slot/{n}`) the solve holds, once admitted.
    pub slot: Option<u64>,
    /// When the slot expires (epoch ms).
    pub slot_exp: u64,
    pub result: Option<StoredResult>,
    /// When the engine's next request is due (epoch ms), as of `state`, if the last driver
    /// stopped only to wait for it. A `GET` whose wait ends before then answers 202 from the
    /// record alone: nothing is due, so nothing is written.
    #[serde(default)]
    pub due: Option<u64>,
    /// A random value per write: makes every written value unique to its writer (see
    /// `Cas::swap`).
    pub rev: String,
}

#[derive(Serialize, Deserialize)]
struct Base {
    exp: u64,
    base: String,
}

fn record_key(id: &str) -> String {
    format!("solve/{id}")
}

fn base_key(id: &str) -> String {
    format!("solve/{id}/base")
}

/// A solve record as read: its exact bytes (what a compare-and-swap must find) and contents.
pub struct Loaded {
    pub bytes: Vec<u8>,
    pub record: SolveRecord,
}

/// Creates a solve: the base once, then the record. The id is fresh and random, so nobody
/// else writes these keys.
pub fn create(kv: &Kv, id: &str, base: String, record: &SolveRecord) -> anyhow::Result<Loaded> {
    kv.set_json(&base_key(id), &Base { exp: record.exp, base })?;
    let bytes = serde_json::to_vec(record)?;
    kv.set(&record_key(id), &bytes)?;
    Ok(Loaded { bytes, record: record.clone() })
}

/// The record, if there is one (a value that does not parse counts as none).
pub fn load(kv: &Kv, id: &str) -> anyhow::Result<Option<Loaded>> {
    let Some(bytes) = kv.get(&record_key(id))? else { return Ok(None) };
    Ok(serde_json::from_slice(&bytes).ok().map(|record| Loaded { bytes, record }))
}

/// The engine's `snapshot-base` of the solve.
pub fn base(kv: &Kv, id: &str) -> anyhow::Result<Option<String>> {
    Ok(kv.get_json::<Base>(&base_key(id))?.map(|b| b.base))
}

/// Replaces the record `current` by `next` if nobody changed it meanwhile; on success
/// `current` becomes `next`.
pub fn swap(kv: &Kv, id: &str, current: &mut Loaded, mut next: SolveRecord) -> anyhow::Result<Swapped> {
    next.rev = new_id()?;
    let bytes = serde_json::to_vec(&next)?;
    let swapped = kv.compare_and_swap(&record_key(id), &current.bytes, &bytes)?;
    if matches!(swapped, Swapped::Yes) {
        *current = Loaded { bytes, record: next };
    }
    Ok(swapped)
}

/// Drops the task (the base) once it is no longer needed.
pub fn drop_base(kv: &Kv, id: &str) -> anyhow::Result<()> {
    kv.delete(&base_key(id))
}

/// Removes everything of the solve.
pub fn remove(kv: &Kv, id: &str) -> anyhow::Result<()> {
    kv.delete(&record_key(id))?;
    kv.delete(&base_key(id))
}
