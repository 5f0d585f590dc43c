//! The expiry queue: every solve id is queued once (`sweep/{n}` between the counters
//! `sweep/head` and `sweep/tail`), and each call of [`run`] looks at no more than
//! [`PER_REQUEST`] entries at the head, handing each due entry's id to its caller, which removes
//! the solve if it expired (or is gone) or says until when it lives: then it is queued again at
//! the tail with that expiry. The head waits while its entry's expiry is in the future, so the
//! store holds at most the solves of the longest record lifetime (a deadline plus result
//! retention).
//!
//! Entries are claimed with `increment` on `sweep/head`, so each is processed once. A producer
//! that finds the head already past its new entry (a sweeper claimed the slot before the entry
//! was written) queues it again.

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::kv::Kv;

/// Queue entries looked at per request.
pub const PER_REQUEST: usize = 2;

/// The value at `sweep/{n}`.
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

/// Looks at up to [`PER_REQUEST`] entries at the head of the queue. For each one due, `visit`
/// gets the solve id and the time (epoch ms) and removes the solve if it has expired by then,
/// returning `None`, or returns the solve's current expiry, and the id is queued again for it.
pub fn run(kv: &Kv, mut visit: impl FnMut(&str, u64) -> anyhow::Result<Option<u64>>) -> anyhow::Result<()> {
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
        if let Some(exp) = visit(&entry.id, now)? {
            enqueue(kv, &entry.id, exp)?;
        }
        kv.delete(&key)?;
    }
    Ok(())
}
