//! The expiry queue, ordered by time: a ring of [`RING`] one-second buckets, each a queue
//! (`expiry/{slot}/{n}` between the counters `expiry/{slot}/head` and `expiry/{slot}/tail`),
//! and a cursor (`expiry/cursor`): every bucket before it has been swept.
//!
//! A solve id due at `exp` is queued in the bucket that ends after `exp` (at most `RING - 2`
//! buckets ahead; one that lives longer is visited early and queued again). Each call of [`run`]
//! sweeps the buckets from the cursor to now: it hands each entry's id to its caller, which
//! removes the solve if it expired (or is gone) or says until when it lives (then it is queued
//! again for that time), and moves the cursor past each bucket it empties. So whatever else is
//! queued, a solve is removed by the first sweep at least one bucket after its expiry; a call
//! looks at no more than [`PER_REQUEST`] entries and [`MAX_STEPS`] empty buckets.
//!
//! A slot holds its bucket's entries and, behind them, those of the same slot one turn later
//! (queued only once the cursor reached this turn's bucket): the sweep of a bucket stops at the
//! first entry of a later turn. A cursor that fell more than a turn behind (no requests for a
//! while) jumps to one turn ago: every entry is in the ring, so the next turn visits it.
//!
//! Entries are claimed with `increment` on the slot's head, so each is processed once; an entry
//! claimed early (of a later turn, when two sweepers meet) is visited and queued again, which
//! is harmless. A producer that finds the head already past its new entry (a sweeper claimed the
//! place before the entry was written) queues it again. The cursor moves by compare-and-swap
//! and only forward.
//!
//! The previous version's queue (`sweep/head`, `sweep/tail`, `sweep/{n}`, in arrival order) is
//! drained into the ring as the cursor moves, whatever its entries' expiry.

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::ids::new_id;
use crate::kv::Kv;

/// Width of a bucket, ms: a solve is removed at most this long after its expiry (plus the
/// wait for the next sweeping request).
pub const BUCKET_MS: u64 = 1_000;

/// Buckets in the ring: its slot counters are at most `2 * RING` keys.
const RING: u64 = 64;

/// Due entries visited per call.
pub const PER_REQUEST: usize = 2;

/// Buckets a call moves the cursor past at most.
const MAX_STEPS: usize = 16;

/// The value at `expiry/{slot}/{n}`.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// The bucket it is queued for.
    at: u64,
    id: String,
}

/// The value at `expiry/cursor`.
#[derive(Serialize, Deserialize)]
struct Cursor {
    /// The next bucket to sweep.
    bucket: u64,
    /// Unique per write (see `Cas::swap`).
    rev: String,
}

/// An entry of the previous version's queue, at `sweep/{n}`.
#[derive(Deserialize)]
struct LegacyEntry {
    id: String,
}

const CURSOR: &str = "expiry/cursor";

fn head_key(slot: u64) -> String {
    format!("expiry/{slot}/head")
}

fn tail_key(slot: u64) -> String {
    format!("expiry/{slot}/tail")
}

fn entry_key(slot: u64, n: i64) -> String {
    format!("expiry/{slot}/{n}")
}

/// The bucket an entry due at `exp` is queued in at `now`: the first to start after it, at most
/// `RING - 1` buckets ahead of now's.
fn bucket_for(now: u64, exp: u64) -> u64 {
    exp.clamp(now, now + (RING - 2) * BUCKET_MS) / BUCKET_MS + 1
}

/// A counter's value without creating it (`increment` by 0 would: a slot never used stays
/// without keys). Its bytes are the host's, so only its presence is read with `get`.
fn count(kv: &Kv, key: &str) -> anyhow::Result<i64> {
    match kv.get(key)? {
        Some(_) => kv.counter(key),
        None => Ok(0),
    }
}

/// Queues solve `id` for removal after `exp`.
pub fn enqueue(kv: &Kv, id: &str, exp: u64) -> anyhow::Result<()> {
    let at = bucket_for(now_ms(), exp);
    let slot = at % RING;
    for _ in 0..8 {
        let n = kv.increment(&tail_key(slot), 1)? - 1;
        kv.set_json(&entry_key(slot, n), &Entry { at, id: id.to_owned() })?;
        if kv.counter(&head_key(slot))? <= n {
            return Ok(());
        }
        kv.delete(&entry_key(slot, n))?;
    }
    anyhow::bail!("the expiry queue's head keeps passing its tail")
}

/// Sweeps the buckets due from the cursor on: for up to [`PER_REQUEST`] entries, `visit` gets
/// the solve id and the time (epoch ms) and removes the solve if it has expired by then,
/// returning `None`, or returns the solve's current expiry, and the id is queued again for it.
pub fn run(kv: &Kv, mut visit: impl FnMut(&str, u64) -> anyhow::Result<Option<u64>>) -> anyhow::Result<()> {
    let now = now_ms();
    let due = now / BUCKET_MS;
    // The first sweep of a store starts the cursor now (a plain set: whoever writes last, all
    // write about now; an entry queued before it is visited a turn later).
    let Some(bytes) = kv.get(CURSOR)? else {
        return kv.set_json(CURSOR, &Cursor { bucket: due, rev: new_id()? });
    };
    let Ok(cursor) = serde_json::from_slice::<Cursor>(&bytes) else {
        return kv.set_json(CURSOR, &Cursor { bucket: due, rev: new_id()? });
    };
    let mut bucket = cursor.bucket.max(due.saturating_sub(RING - 1));
    let (mut visited, mut steps) = (0, 0);
    // Every round moves a head or the cursor; the bound only guards against a store gone wrong.
    for _ in 0..4 * (PER_REQUEST + MAX_STEPS) {
        if bucket > due || visited >= PER_REQUEST || steps >= MAX_STEPS {
            break;
        }
        let slot = bucket % RING;
        let tail = count(kv, &tail_key(slot))?;
        let head = count(kv, &head_key(slot))?;
        let later_turn =
            head < tail && kv.get_json::<Entry>(&entry_key(slot, head))?.is_some_and(|entry| entry.at > bucket);
        if head >= tail || later_turn {
            bucket += 1;
            steps += 1;
            continue;
        }
        let claimed = kv.increment(&head_key(slot), 1)? - 1;
        if claimed >= tail {
            continue;
        }
        let key = entry_key(slot, claimed);
        let Some(entry) = kv.get_json::<Entry>(&key)? else { continue };
        visited += 1;
        if let Some(exp) = visit(&entry.id, now)? {
            enqueue(kv, &entry.id, exp)?;
        }
        kv.delete(&key)?;
    }
    if bucket != cursor.bucket {
        let next = serde_json::to_vec(&Cursor { bucket, rev: new_id()? })?;
        // Another sweeper may have moved it meanwhile: then it stays where that one put it.
        kv.compare_and_swap(CURSOR, &bytes, &next)?;
        drain_legacy(kv, &mut visit, now)?;
    }
    Ok(())
}

/// Moves up to [`PER_REQUEST`] entries of the previous version's queue into the ring (see the
/// module docs), visiting each. Reads one key while that queue does not exist.
fn drain_legacy(
    kv: &Kv,
    visit: &mut impl FnMut(&str, u64) -> anyhow::Result<Option<u64>>,
    now: u64,
) -> anyhow::Result<()> {
    if kv.get("sweep/tail")?.is_none() {
        return Ok(());
    }
    for _ in 0..PER_REQUEST {
        let tail = kv.counter("sweep/tail")?;
        if kv.counter("sweep/head")? >= tail {
            break;
        }
        let claimed = kv.increment("sweep/head", 1)? - 1;
        if claimed >= tail {
            break;
        }
        let key = format!("sweep/{claimed}");
        let Some(entry) = kv.get_json::<LegacyEntry>(&key)? else { continue };
        if let Some(exp) = visit(&entry.id, now)? {
            enqueue(kv, &entry.id, exp)?;
        }
        kv.delete(&key)?;
    }
    Ok(())
}
