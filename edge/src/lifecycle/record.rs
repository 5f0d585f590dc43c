//! The solve record's format and keys (layout and semantics in docs/state.md), read and written
//! only by its lifecycle (`crate::lifecycle`).
//!
//! - `solve/{id}/base`: the engine's `snapshot-base` (the task, an image included), written
//!   once per solve and deleted when it finishes.
//! - `solve/{id}`: the solve record: the engine's `snapshot-state` (a few hundred bytes) after
//!   each result, the lease, the thread slot, a submit in flight, and once finished the response
//!   to repeat. It is created once with a plain `set` by the one writer of its id (a fresh random
//!   id, or the winner of the id's claim) and from then on changed only by compare-and-swap
//!   against the exact bytes last seen, so two instances never both drive a solve: whoever swaps
//!   in its lease drives, and a driver whose checkpoint fails to swap has lost the solve
//!   (deleted, or taken over after its lease ran out) and stops.
//! - `solve/{id}/claim`: a counter, for solves started with an `Idempotency-Key`: whoever
//!   increments it to 1 creates the solve. When that request stops before the record exists,
//!   the next attempt's id (`crate::ids::next_attempt`) is claimed the same way; the claims of
//!   the whole chain are removed with the solve at its end.
//!
//! Records written by earlier versions (without `submitting`, `request`, `times`, `owner`,
//! `client_slot` or `accepted_at`) read as solves with no submit in flight, started without a
//! key, not observed into a model, of no client, holding no client slot, already admitted.
//!
//! Every value carries `exp` (epoch ms): wasi:keyvalue has no TTL, so expired records are
//! removed when met and by the bounded sweep (`crate::sweep`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{new_id, next_attempt};
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
    /// The slot of its client's share (`threads/client/{label}/slot/{n}`) it holds with `slot`,
    /// where its client has a share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_slot: Option<u64>,
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
    /// The engine's id of a submit request sent and whose result is not saved yet: set just
    /// before the send, cleared with the checkpoint of its result. A driver that finds it set
    /// cannot know whether CaptchaAI took the task (`crate::lifecycle`, submits in doubt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitting: Option<u32>,
    /// The body's fingerprint (`crate::ids::fingerprint`) of a solve started with an
    /// `Idempotency-Key`: a retry with the same key must bring the same body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// For a keyed solve created by a later attempt (`crate::ids::next_attempt`): the chain it
    /// ends, whose claims are removed with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Chain>,
    /// The captcha type of a solve created with its type's shared solve-times model
    /// (`crate::times`): its answer is observed into that model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<String>,
    /// The label of the client that started the solve (`crate::settings::Client`): its share
    /// of the plan applies, its metrics count the solve, and only it may read a solve started
    /// through `in.php`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When the edge accepted the solve (epoch ms), until it is first admitted: its time in the
    /// queue is counted then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<u64>,
}

/// The claims before a keyed solve's own: the first attempt's id (`crate::ids::keyed_id`) and
/// how many attempts came before this one.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Debug)]
pub struct Chain {
    pub first: String,
    pub before: u32,
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

fn claim_key(id: &str) -> String {
    format!("solve/{id}/claim")
}

/// Claims `id` for its creator: true for the one caller that increments its claim first.
pub fn claim(kv: &Kv, id: &str) -> anyhow::Result<bool> {
    Ok(kv.increment(&claim_key(id), 1)? == 1)
}

/// Whether `id` is claimed (its claim counter exists; read without creating it).
pub fn claimed(kv: &Kv, id: &str) -> anyhow::Result<bool> {
    Ok(kv.get(&claim_key(id))?.is_some())
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

/// Removes everything of the solve. A keyed solve (`request` set) also removes the claims of
/// its chain, unless a later attempt claimed its successor (then the chain is that attempt's).
pub fn remove(kv: &Kv, id: &str, record: &SolveRecord) -> anyhow::Result<()> {
    kv.delete(&record_key(id))?;
    kv.delete(&base_key(id))?;
    if record.request.is_none() || claimed(kv, &next_attempt(id))? {
        return Ok(());
    }
    let mut claims = vec![id.to_owned()];
    if let Some(chain) = &record.chain {
        let mut attempt = chain.first.clone();
        for _ in 0..chain.before {
            let next = next_attempt(&attempt);
            claims.push(std::mem::replace(&mut attempt, next));
        }
    }
    for claim in claims {
        kv.delete(&claim_key(&claim))?;
    }
    Ok(())
}

/// Removes the claim of `id`, whose record is gone (its request stopped before creating it, or
/// it was removed without its claim), unless a later attempt claimed its successor: then it is
/// left to that attempt's solve, and false is returned.
pub fn remove_claim(kv: &Kv, id: &str) -> anyhow::Result<bool> {
    if claimed(kv, &next_attempt(id))? {
        return Ok(false);
    }
    kv.delete(&claim_key(id))?;
    Ok(true)
}
