//! The global thread budget: at most the plan's threads (`crate::plan`) solves hold a CaptchaAI
//! thread at once, across every instance sharing the store.
//!
//! Each admitted solve holds one slot `threads/slot/{n}`, `n < plan`, taken and given back by
//! compare-and-swap; a slot carries its expiry (the engine's `ends_by`, the latest the solve
//! waits on its CaptchaAI task; before the first submit's result, the driver's lease), so a
//! slot whose holder vanished frees itself. A slot key is created once, by
//! whoever wins its `threads/slot/{n}/init` ticket (an `increment`), so no compare-and-swap ever
//! meets an absent key (docs/state.md).
//!
//! A client with a share of the plan (`client_threads`) also holds one of its own slots
//! `threads/client/{label}/slot/{n}`, `n < share`, taken first and kept the same way: a
//! [`Pool`] of its own.

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::ids::{new_id, random_u64};
use crate::kv::{Kv, Swapped};

/// The value at `threads/slot/{n}`.
#[derive(Serialize, Deserialize)]
struct Slot {
    /// When the slot frees itself (epoch ms); 0 when free.
    exp: u64,
    /// The solve id holding it; empty when free.
    holder: String,
    /// Unique per write (see `Cas::swap`).
    rev: String,
}

/// A set of slots: the plan's, or one client's share of it.
#[derive(Clone, Copy)]
pub enum Pool<'a> {
    Plan,
    /// The client with this label.
    Client(&'a str),
}

impl Pool<'_> {
    fn slot_key(self, n: u64) -> String {
        match self {
            Pool::Plan => format!("threads/slot/{n}"),
            Pool::Client(label) => format!("threads/client/{label}/slot/{n}"),
        }
    }
}

/// Takes a free (or expired) slot of `pool` below `capacity` for solve `id` until `exp`.
pub fn acquire(kv: &Kv, pool: Pool, id: &str, capacity: u64, exp: u64) -> anyhow::Result<Option<u64>> {
    let start = random_u64()? % capacity.max(1);
    for i in 0..capacity {
        let n = (start + i) % capacity;
        if take(kv, pool, n, id, exp, false)? {
            return Ok(Some(n));
        }
    }
    Ok(None)
}

/// Extends slot `n` of `pool` to `exp` if `id` still holds it; false if it does not.
pub fn renew(kv: &Kv, pool: Pool, n: u64, id: &str, exp: u64) -> anyhow::Result<bool> {
    take(kv, pool, n, id, exp, true)
}

/// Frees slot `n` of `pool` if `id` holds it.
pub fn release(kv: &Kv, pool: Pool, n: u64, id: &str) -> anyhow::Result<()> {
    let key = pool.slot_key(n);
    let (current, cas) = kv.cas(&key)?;
    let Some(slot) = current.and_then(|bytes| serde_json::from_slice::<Slot>(&bytes).ok()) else { return Ok(()) };
    if slot.holder == id {
        let free = Slot { exp: 0, holder: String::new(), rev: new_id()? };
        cas.swap(&serde_json::to_vec(&free)?)?;
    }
    Ok(())
}

/// Slots of `pool` below `capacity` held now.
pub fn busy(kv: &Kv, pool: Pool, capacity: u64) -> anyhow::Result<u64> {
    let now = now_ms();
    let mut busy = 0;
    for n in 0..capacity {
        if let Some(slot) = kv.get_json::<Slot>(&pool.slot_key(n))?
            && !slot.holder.is_empty()
            && slot.exp > now
        {
            busy += 1;
        }
    }
    Ok(busy)
}

/// Sets slot `n` of `pool` to (`id`, `exp`) if it is free, expired, or (`renewing`) held by
/// `id`.
fn take(kv: &Kv, pool: Pool, n: u64, id: &str, exp: u64, renewing: bool) -> anyhow::Result<bool> {
    let key = pool.slot_key(n);
    let (current, cas) = kv.cas(&key)?;
    let Some(bytes) = current else {
        // Created once, by the winner of the init ticket; the others skip it this time.
        if renewing || kv.increment(&format!("{key}/init"), 1)? != 1 {
            return Ok(false);
        }
        let free = Slot { exp: 0, holder: String::new(), rev: new_id()? };
        kv.set_json(&key, &free)?;
        return take(kv, pool, n, id, exp, renewing);
    };
    let free = match serde_json::from_slice::<Slot>(&bytes) {
        Ok(slot) if renewing => slot.holder == id,
        Ok(slot) => slot.holder.is_empty() || slot.exp <= now_ms(),
        Err(_) => !renewing,
    };
    if !free {
        return Ok(false);
    }
    let mine = Slot { exp, holder: id.to_owned(), rev: new_id()? };
    Ok(matches!(cas.swap(&serde_json::to_vec(&mine)?)?, Swapped::Yes))
}
