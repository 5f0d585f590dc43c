//! Solve records in Spin's default key-value store.
//!
//! - `solve/{id}`: `{"snapshot": <engine snapshot>, "lease": {"holder", "until"} | null}` for a
//!   solve in flight. The snapshot never holds the CaptchaAI key.
//! - `done/{id}`: `{"at": ms, "error": {"status": u16, "body": <error JSON>} | null}` once the
//!   outcome was handed out: a failure is kept as the error response it was rendered as (no
//!   secrets in it), so later calls repeat it exactly; a solved token itself is never stored.
//!
//! Spin's key-value interface has no compare-and-swap, so a request takes a lease by writing it
//! and reading it back, and checks it again before every upstream request: two requests racing
//! for one id almost never both drive it, and never for more than one upstream request.

use serde_json::{Value, json};
use spin_sdk::key_value::Store;

/// A solve in flight.
pub struct Record {
    pub snapshot: String,
    pub lease: Option<Lease>,
}

/// Who is driving a solve, until when (epoch ms).
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub until: u64,
}

/// What happened to a finished solve.
pub enum Finished {
    /// The solution was handed out.
    Delivered,
    /// It failed with this error response (HTTP status and JSON body), to be repeated.
    Failed { status: u16, body: Value },
}

pub struct Records {
    store: Store,
}

fn solve_key(id: &str) -> String {
    format!("solve/{id}")
}

fn done_key(id: &str) -> String {
    format!("done/{id}")
}

impl Records {
    pub async fn open() -> anyhow::Result<Records> {
        let store = Store::open_default().await.map_err(|e| anyhow::anyhow!("opening the key-value store: {e:?}"))?;
        Ok(Records { store })
    }

    pub async fn get(&self, id: &str) -> anyhow::Result<Option<Record>> {
        let Some(bytes) = self.store.get(solve_key(id)).await.map_err(kv)? else { return Ok(None) };
        let value: Value = serde_json::from_slice(&bytes)?;
        let snapshot = value["snapshot"].as_str().unwrap_or_default().to_owned();
        let lease = value["lease"].as_object().map(|lease| Lease {
            holder: lease.get("holder").and_then(Value::as_str).unwrap_or_default().to_owned(),
            until: lease.get("until").and_then(Value::as_u64).unwrap_or(0),
        });
        Ok(Some(Record { snapshot, lease }))
    }

    pub async fn put(&self, id: &str, record: &Record) -> anyhow::Result<()> {
        let lease = record.lease.as_ref().map(|l| json!({"holder": l.holder, "until": l.until}));
        let value = json!({"snapshot": record.snapshot, "lease": lease});
        self.store.set(solve_key(id), serde_json::to_vec(&value)?).await.map_err(kv)
    }

    /// Takes the lease on `id` for `holder` until `until`, unless someone else holds a live one.
    /// Returns the record as it stands after taking it.
    pub async fn acquire(&self, id: &str, holder: &str, now: u64, until: u64) -> anyhow::Result<Acquired> {
        let Some(mut record) = self.get(id).await? else { return Ok(Acquired::Missing) };
        if record.lease.as_ref().is_some_and(|l| l.holder != holder && l.until > now) {
            return Ok(Acquired::Busy);
        }
        record.lease = Some(Lease { holder: holder.to_owned(), until });
        self.put(id, &record).await?;
        match self.get(id).await? {
            Some(check) if check.lease.as_ref().is_some_and(|l| l.holder == holder) => Ok(Acquired::Held(check)),
            Some(_) => Ok(Acquired::Busy),
            None => Ok(Acquired::Missing),
        }
    }

    /// Whether `holder` still holds the lease on `id`.
    pub async fn still_holds(&self, id: &str, holder: &str) -> anyhow::Result<bool> {
        Ok(self.get(id).await?.is_some_and(|r| r.lease.is_some_and(|l| l.holder == holder)))
    }

    /// Records the outcome (`error`: the rendered error response of a failure, none for a
    /// delivered solution) and drops the solve (and with it the snapshot).
    pub async fn finish(&self, id: &str, now: u64, error: Option<(u16, Value)>) -> anyhow::Result<()> {
        let error = error.map(|(status, body)| json!({"status": status, "body": body}));
        let value = json!({"at": now, "error": error});
        self.store.set(done_key(id), serde_json::to_vec(&value)?).await.map_err(kv)?;
        self.store.delete(solve_key(id)).await.map_err(kv)
    }

    /// How a finished solve ended, if it did.
    pub async fn finished(&self, id: &str) -> anyhow::Result<Option<Finished>> {
        let Some(bytes) = self.store.get(done_key(id)).await.map_err(kv)? else { return Ok(None) };
        let value: Value = serde_json::from_slice(&bytes)?;
        Ok(Some(match (value["error"]["status"].as_u64(), value["error"].get("body")) {
            (Some(status), Some(body)) => {
                Finished::Failed { status: u16::try_from(status).unwrap_or(500), body: body.clone() }
            }
            _ => Finished::Delivered,
        }))
    }
}

/// The result of [`Records::acquire`].
pub enum Acquired {
    Held(Record),
    Busy,
    Missing,
}

fn kv(e: spin_sdk::key_value::Error) -> anyhow::Error {
    anyhow::anyhow!("key-value store: {e:?}")
}
