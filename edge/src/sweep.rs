//! Removing what expired: every solve id is queued once (`sweep/{n}` between the counters
//! `sweep/head` and `sweep/tail`), and each authenticated request looks at no more than
//! [`PER_REQUEST`] entries at the head. An entry whose solve has expired (or is gone) is removed
//! with the solve's records; a solve still live is queued again at the tail with its current
//! expiry. The head waits while its entry's expiry is in the future, so the store holds at most
//! the solves of the longest record lifetime (a deadline plus result retention); the task
//! itself (`solve/{id}/base`) is deleted as soon as a solve finishes, not by the sweep.
//!
//! Entries are claimed with `increment` on `sweep/head`, so each is processed once. A producer
//! that finds the head already past its new entry (a sweeper claimed the slot before the entry
//! was written) queues it again.

use serde::{Deserialize, Serialize};

use crate::budget;
use crate::drive::now_ms;
use crate::kv::Kv;
use crate::store;

/// Queue entries looked at per request.
pub const PER_REQUEST: usize = 2;

#[derive(Serialize, Deserialize)]
struct Entry {
    exp: u64,
    id: String,
}

fn entry_key(n: i64) -> String {
    format!("sweep/{n}")
}

/// Queues solve `id` for removal after `exp`.
pub fn enqueue(kv: &Kv, id: &str, exp: u64) -> anyhow::Result<()> {
    for _ in 0..8 {
        let n = kv.increment("sweep/tail", 1)? - 1;
        kv.set_json(&entry_key(n), &Entry { exp, id: id.to_owned() })?;
        if kv.counter("sweep/head")? <= n {
            return Ok(());
        }
        kv.delete(&entry_key(n))?;
    }
    anyhow::bail!("the sweep queue's head keeps passing its tail")
}

/// Looks at up to [`PER_REQUEST`] entries at the head of the queue; returns how many solves it
/// removed.
pub fn run(kv: &Kv) -> anyhow::Result<usize> {
    let mut removed = 0;
    for _ in 0..PER_REQUEST {
        let now = now_ms();
        let tail = kv.counter("sweep/tail")?;
        let head = kv.counter("sweep/head")?;
        if head >= tail {
            break;
        }
        if kv.get_json::<Entry>(&entry_key(head))?.is_some_and(|entry| entry.exp > now) {
            break;
        }
        let claimed = kv.increment("sweep/head", 1)? - 1;
        if claimed >= tail {
            break;
        }
        let key = entry_key(claimed);
        let Some(entry) = kv.get_json::<Entry>(&key)? else { continue };
        match store::load(kv, &entry.id)? {
            Some(loaded) if loaded.record.exp > now => enqueue(kv, &entry.id, loaded.record.exp)?,
            Some(loaded) => {
                expire(kv, &entry.id, &loaded.record)?;
                removed += 1;
            }
            None => store::remove(kv, &entry.id)?,
        }
        kv.delete(&key)?;
    }
    Ok(removed)
}

/// Removes an expired solve and gives back its thread slot.
pub fn expire(kv: &Kv, id: &str, record: &store::SolveRecord) -> anyhow::Result<()> {
    store::remove(kv, id)?;
    if let Some(n) = record.slot {
        budget::release(kv, n, id)?;
    }
    Ok(())
}
