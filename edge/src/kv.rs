//! The key-value store through `wasi:keyvalue` 0.2.0-draft2 (store + atomics), the interfaces
//! Spin 4.1 implements for SQLite and Redis. The contract, and what real Spin does, is in
//! docs/state.md.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::engine::kv::{atomics, store};

/// The `default` store.
pub struct Kv {
    bucket: store::Bucket,
}

/// What a compare-and-swap did.
pub enum Swapped {
    /// Our value is stored.
    Yes,
    /// The key changed (or vanished) since it was read: nothing was written.
    Conflict,
}

/// The store failed (unreachable, timed out, refused): the request cannot go on now, but may
/// later. The API answers it with 503 and `Retry-After` (`crate::api`); its text names the
/// operation and key, never a value.
#[derive(Debug)]
pub struct StoreError(String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// A store failure the caller detected (a write that took too long), described by `what`.
    pub fn new(what: String) -> StoreError {
        StoreError(what)
    }
}

fn kv_error(what: &str, key: &str, e: store::Error) -> anyhow::Error {
    StoreError(format!("key-value {what} {key}: {e:?}")).into()
}

impl Kv {
    pub fn open() -> anyhow::Result<Kv> {
        let bucket = store::open("default").map_err(|e| kv_error("open", "default", e))?;
        Ok(Kv { bucket })
    }

    pub fn get(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        self.bucket.get(key).map_err(|e| kv_error("get", key, e))
    }

    pub fn set(&self, key: &str, value: &[u8]) -> anyhow::Result<()> {
        self.bucket.set(key, value).map_err(|e| kv_error("set", key, e))
    }

    pub fn delete(&self, key: &str) -> anyhow::Result<()> {
        self.bucket.delete(key).map_err(|e| kv_error("delete", key, e))
    }

    /// A JSON record; a value that does not parse is treated as absent (a foreign or torn
    /// value must not wedge a route; it is overwritten or expires with its owner).
    pub fn get_json<T: DeserializeOwned>(&self, key: &str) -> anyhow::Result<Option<T>> {
        Ok(self.get(key)?.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
    }

    pub fn set_json<T: Serialize>(&self, key: &str, value: &T) -> anyhow::Result<()> {
        self.set(key, &serde_json::to_vec(value)?)
    }

    /// Atomically adds `delta` to the counter at `key` (absent = 0) and returns the new value.
    pub fn increment(&self, key: &str, delta: i64) -> anyhow::Result<i64> {
        atomics::increment(&self.bucket, key, delta).map_err(|e| kv_error("increment", key, e))
    }

    /// A counter's value (`increment` by 0: the only portable way to read one).
    pub fn counter(&self, key: &str) -> anyhow::Result<i64> {
        self.increment(key, 0)
    }

    /// Starts a compare-and-swap on `key`: its current value, and the handle to swap it.
    pub fn cas(&self, key: &str) -> anyhow::Result<(Option<Vec<u8>>, Cas<'_>)> {
        let cas = atomics::Cas::new(&self.bucket, key).map_err(|e| kv_error("cas", key, e))?;
        let current = cas.current().map_err(|e| kv_error("cas current", key, e))?;
        Ok((current, Cas { kv: self, key: key.to_owned(), cas }))
    }

    /// Replaces `key`'s value `expected` (the exact bytes last read) by `new`, if it still
    /// holds `expected`. `new` must be unique to this writer (the records carry a holder id or
    /// a fresh time), which is what makes the confirmation in [`Cas::swap`] sound.
    pub fn compare_and_swap(&self, key: &str, expected: &[u8], new: &[u8]) -> anyhow::Result<Swapped> {
        let (current, cas) = self.cas(key)?;
        if current.as_deref() != Some(expected) {
            return Ok(Swapped::Conflict);
        }
        cas.swap(new)
    }
}

/// A started compare-and-swap.
pub struct Cas<'a> {
    kv: &'a Kv,
    key: String,
    cas: atomics::Cas,
}

impl Cas<'_> {
    /// Writes `value` if the key still holds what `current` returned. On `cas-failed` the key
    /// is read once: Spin 4.1's Redis store reports `cas-failed` even when its conditional
    /// write happened (docs/state.md), and `value` is unique to this writer, so finding it
    /// there means the swap took place.
    pub fn swap(self, value: &[u8]) -> anyhow::Result<Swapped> {
        match atomics::swap(self.cas, value) {
            Ok(()) => Ok(Swapped::Yes),
            Err(atomics::CasError::CasFailed(_)) => {
                if self.kv.get(&self.key)?.as_deref() == Some(value) {
                    Ok(Swapped::Yes)
                } else {
                    Ok(Swapped::Conflict)
                }
            }
            Err(atomics::CasError::StoreError(e)) => Err(kv_error("swap", &self.key, e)),
        }
    }
}
