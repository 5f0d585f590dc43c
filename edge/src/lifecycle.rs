//! The solve record's lifecycle: every transition of `solve/{id}` (its format in `record`), each
//! a compare-and-swap against the exact bytes last read, so any number of instances sharing the
//! store drive a solve one at a time, submit its task once, keep to the plan's threads
//! (`crate::budget`) and store its ending once.
//!
//! ```text
//! create ──▶ Held ──advance──▶ Pending (state kept, lease released) ──lease──▶ Held ...
//!                          └─▶ Ended ──settle──▶ Finished (the response, until it expires)
//! expire (met expired, or swept) and delete remove a solve in any state.
//! ```
//!
//! The HTTP API (`crate::api`) calls one transition per step and renders what it returns; the
//! engine decides everything about the protocol (`crate::drive`). This module decides only the
//! bookkeeping: who drives a solve and until when, when it takes a thread slot, how long its
//! record is kept.

mod record;

use serde_json::Value;

pub use record::StoredResult;
use record::{Lease, Loaded, SolveRecord};

use crate::clock::{now_ms, sleep_ms};
use crate::drive::{self, Progress};
use crate::engine::{Failure, Solution, Solve};
use crate::ids::new_id;
use crate::kv::{Kv, Swapped};
use crate::settings::{RESULT_RETENTION_MS, Settings};
use crate::{budget, metrics, plan, sweep};

/// Time a request may spend before its first upstream send (lease, plan lookup, thread slot), ms.
const PREPARE_MS: u64 = 2_000;

/// How often a request waiting for a thread slot tries again, ms.
const QUEUE_POLL_MS: u64 = 500;

/// How often a request waiting for another request's lease looks again, ms.
const LEASE_POLL_MS: u64 = 250;

/// When a request answers "come back later" because another driver is in the way, ms.
const CONTENDED_RETRY_MS: u64 = 1_000;

/// What a request finds at `solve/{id}` ([`lease`]).
pub enum Found {
    /// No such solve: never created, deleted, or expired (an expired one is removed now).
    Missing,
    /// The solve ended: its stored response, to repeat.
    Finished(StoredResult),
    /// Nothing to do within this request's wait: the next upstream request is due later, or
    /// another request held the lease all along.
    Pending { retry_after_ms: u64 },
    /// This request holds the lease: [`Held::advance`] it.
    Leased(Held),
}

/// A solve whose lease this request holds.
pub struct Held {
    id: String,
    loaded: Loaded,
}

/// Where [`Held::advance`] left a solve.
pub enum Advanced {
    /// Still in flight, and this request no longer drives it: its lease is released, or the
    /// record changed under it (deleted, or taken over after the lease ran out).
    Pending { retry_after_ms: u64 },
    /// Admission needs the plan's size and it could not be read: the engine's failure. The
    /// lease is released and the solve unchanged.
    Refused(Failure),
    /// The engine ended the solve: render it and [`Ended::settle`] it.
    Ended(Ended),
}

/// How a solve ended.
pub enum Outcome {
    Solved(Solution),
    Failed(Failure),
}

/// A solve the engine ended whose ending is not stored yet (the lease still held).
pub struct Ended {
    held: Held,
    outcome: Outcome,
    /// When the engine ended it (epoch ms).
    at: u64,
}

/// The end of the lease a request takes for a wait ending at `wait_until`: its last upstream
/// request starts by then (plus [`PREPARE_MS`] for the key-value work and plan lookup before a
/// send, so even `wait=0` sends a request that is due) and ends within the upstream timeout.
fn lease_until(settings: &Settings, wait_until: u64) -> u64 {
    wait_until + PREPARE_MS + settings.upstream_timeout_ms + drive::LEASE_MARGIN_MS
}

/// Creates solve `id` (fresh and random: nobody else writes its keys) from the engine's new
/// `solve`: the task (`snapshot-base`) once, the record leased to this request for a wait
/// ending at `wait_until`, and its entry in the expiry queue.
pub fn create(kv: &Kv, settings: &Settings, id: &str, solve: &Solve, wait_until: u64) -> anyhow::Result<Held> {
    let holder = new_id()?;
    let lease_until = lease_until(settings, wait_until);
    let record = SolveRecord {
        exp: lease_until + settings.abandon_after_ms,
        state: Some(solve.snapshot_state()),
        lease: Some(Lease { holder: holder.clone(), until: lease_until }),
        slot: None,
        slot_exp: 0,
        result: None,
        due: None,
        rev: holder,
    };
    let loaded = record::create(kv, id, solve.snapshot_base(), &record)?;
    sweep::enqueue(kv, id, record.exp)?;
    Ok(Held { id: id.to_owned(), loaded })
}

/// Loads solve `id` and takes its lease for a wait ending at `wait_until`, waiting within it
/// while another request holds the lease. An expired solve is removed. A solve with nothing
/// due before `wait_until` is answered from the one record read, writing nothing; so is a
/// finished one. Every other outcome runs one bounded sweep ([`sweep`]).
pub async fn lease(kv: &Kv, settings: &Settings, id: &str, wait_until: u64) -> anyhow::Result<Found> {
    let holder = new_id()?;
    let mut swept = false;
    loop {
        let now = now_ms();
        let Some(mut loaded) = record::load(kv, id)? else {
            self::sweep(kv);
            return Ok(Found::Missing);
        };
        if loaded.record.exp <= now {
            expire(kv, id, &loaded.record)?;
            self::sweep(kv);
            return Ok(Found::Missing);
        }
        if let Some(result) = loaded.record.result {
            return Ok(Found::Finished(result));
        }
        let busy = loaded.record.lease.as_ref().is_some_and(|l| l.until > now);
        if !busy && let Some(due) = loaded.record.due.filter(|due| *due > wait_until) {
            return Ok(Found::Pending { retry_after_ms: due - now });
        }
        if !std::mem::replace(&mut swept, true) {
            self::sweep(kv);
        }
        if !busy {
            let lease_until = lease_until(settings, wait_until);
            let mut next = loaded.record.clone();
            next.lease = Some(Lease { holder: holder.clone(), until: lease_until });
            next.exp = next.exp.max(lease_until + settings.abandon_after_ms);
            if let Swapped::Yes = record::swap(kv, id, &mut loaded, next)? {
                return Ok(Found::Leased(Held { id: id.to_owned(), loaded }));
            }
            continue;
        }
        // Another request is driving this solve: wait for it within our own wait.
        if now + LEASE_POLL_MS > wait_until {
            return Ok(Found::Pending { retry_after_ms: CONTENDED_RETRY_MS });
        }
        sleep_ms(LEASE_POLL_MS).await;
    }
}

impl Held {
    /// Drives the solve until it ends or the wait ending at `wait_until` runs out: takes a
    /// thread slot first unless it holds one (waiting for one within the wait), then runs the
    /// engine (`solve` if this request created it, else restored from the stored task and
    /// state), checkpointing the state after each upstream result. A pending solve keeps its
    /// state and gives up the lease; an ended one is returned still leased, for [`Ended::settle`].
    pub async fn advance(
        mut self,
        kv: &Kv,
        settings: &Settings,
        solve: Option<Solve>,
        wait_until: u64,
    ) -> anyhow::Result<Advanced> {
        let lease_until = self.loaded.record.lease.as_ref().map_or(0, |l| l.until);
        if let Some(answer) = self.admit(kv, settings, lease_until, wait_until).await? {
            return Ok(answer);
        }
        let solve = match solve {
            Some(solve) => solve,
            None => self.restore(kv, settings)?,
        };
        let progress = self.run(kv, settings, &solve, lease_until, wait_until).await?;
        let at = now_ms();
        let outcome = match progress {
            Progress::Lost => return Ok(Advanced::Pending { retry_after_ms: CONTENDED_RETRY_MS }),
            Progress::Pending { retry_after_ms, due } => {
                let mut next = self.loaded.record.clone();
                next.state = Some(solve.snapshot_state());
                next.lease = None;
                next.due = due;
                record::swap(kv, &self.id, &mut self.loaded, next)?;
                return Ok(Advanced::Pending { retry_after_ms });
            }
            Progress::Solved(solution) => Outcome::Solved(solution),
            Progress::Failed(failure) => Outcome::Failed(failure),
        };
        Ok(Advanced::Ended(Ended { held: self, outcome, at }))
    }

    /// Makes sure the solve holds a thread slot: renews the one it holds (the record forgets a
    /// slot lost meanwhile), else takes one, waiting for a free one until `wait_until`.
    /// `None` when it holds one (or the plan has no threads to share: the engine's own
    /// failure answers then); otherwise what to answer, the lease released where it was kept.
    async fn admit(
        &mut self,
        kv: &Kv,
        settings: &Settings,
        lease_until: u64,
        wait_until: u64,
    ) -> anyhow::Result<Option<Advanced>> {
        let id = self.id.as_str();
        if let Some(n) = self.loaded.record.slot {
            let exp = self.loaded.record.slot_exp.max(lease_until);
            if !budget::renew(kv, n, id, exp)? {
                let mut next = self.loaded.record.clone();
                next.slot = None;
                next.slot_exp = 0;
                if let Swapped::Conflict = record::swap(kv, id, &mut self.loaded, next)? {
                    return Ok(Some(Advanced::Pending { retry_after_ms: CONTENDED_RETRY_MS }));
                }
            }
        }
        if self.loaded.record.slot.is_some() {
            return Ok(None);
        }
        let capacity = match plan::threads(kv, settings).await? {
            Ok(threads) => threads,
            Err(failure) => {
                release(kv, id, &mut self.loaded)?;
                return Ok(Some(Advanced::Refused(failure)));
            }
        };
        if capacity == 0 {
            return Ok(None);
        }
        loop {
            if let Some(n) = budget::acquire(kv, id, capacity, lease_until)? {
                let mut next = self.loaded.record.clone();
                next.slot = Some(n);
                next.slot_exp = lease_until;
                if let Swapped::Conflict = record::swap(kv, id, &mut self.loaded, next)? {
                    budget::release(kv, n, id)?;
                    return Ok(Some(Advanced::Pending { retry_after_ms: CONTENDED_RETRY_MS }));
                }
                return Ok(None);
            }
            if now_ms() + QUEUE_POLL_MS > wait_until {
                release(kv, id, &mut self.loaded)?;
                return Ok(Some(Advanced::Pending { retry_after_ms: QUEUE_POLL_MS * 2 }));
            }
            sleep_ms(QUEUE_POLL_MS).await;
        }
    }

    /// The engine, restored from the stored task and the record's state.
    fn restore(&self, kv: &Kv, settings: &Settings) -> anyhow::Result<Solve> {
        let id = &self.id;
        let base = record::base(kv, id)?.ok_or_else(|| anyhow::anyhow!("solve {id} has no stored base"))?;
        let state = self.loaded.record.state.clone().unwrap_or_default();
        Solve::restore_parts(&base, &state, &settings.api_key)
            .map_err(|e| anyhow::anyhow!("restoring solve {id}: {e:?}"))
    }

    /// Runs the engine (`crate::drive`), checkpointing each result into the record: the state,
    /// and once the task is at CaptchaAI, the record's and the slot's expiry extended to the
    /// latest the task can hold a thread.
    async fn run(
        &mut self,
        kv: &Kv,
        settings: &Settings,
        solve: &Solve,
        lease_until: u64,
        wait_until: u64,
    ) -> anyhow::Result<Progress> {
        let id = self.id.as_str();
        let loaded = &mut self.loaded;
        let timeout = settings.upstream_timeout_ms;
        let mut lost_on_slot = false;
        let progress = drive::run(solve, wait_until, lease_until, kv, |solve| {
            let mut next = loaded.record.clone();
            next.state = Some(solve.snapshot_state());
            next.due = None;
            if let Some(deadline) = solve.deadline() {
                // The solve is at CaptchaAI now: keep it (and its thread slot) until its task can
                // no longer hold a thread, plus a grace to collect the outcome.
                let slot_exp = deadline + timeout + drive::LEASE_MARGIN_MS;
                next.exp = next.exp.max(slot_exp + settings.abandon_after_ms);
                if let Some(n) = next.slot
                    && next.slot_exp < slot_exp
                {
                    if !budget::renew(kv, n, id, slot_exp)? {
                        lost_on_slot = true;
                    }
                    next.slot_exp = slot_exp;
                }
            }
            // The sweep queue's entry re-reads the record's `exp`, so a later expiry needs no entry.
            Ok(matches!(record::swap(kv, id, loaded, next)?, Swapped::Yes))
        })
        .await?;
        if lost_on_slot {
            eprintln!("edge: solve {id} lost its thread slot while in flight");
        }
        Ok(progress)
    }
}

impl Ended {
    /// How the engine ended the solve.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// Stores the solve's rendered response (`status`, `body`) in place of its state, to be
    /// repeated until the token expires (a solution's `expires-at`) or for
    /// [`RESULT_RETENTION_MS`], and gives back the task and the thread slot. Counted in the
    /// metrics by the one request whose swap stores it; a request that lost the lease meanwhile
    /// stores nothing.
    pub fn settle(mut self, kv: &Kv, status: u16, body: &Value) -> anyhow::Result<()> {
        let exp = match &self.outcome {
            Outcome::Solved(solution) => {
                let keep_until = solution.solved_at + RESULT_RETENTION_MS;
                solution.expires_at.map_or(keep_until, |expires| expires.min(keep_until))
            }
            Outcome::Failed(_) => self.at + RESULT_RETENTION_MS,
        };
        let Held { id, loaded } = &mut self.held;
        let slot = loaded.record.slot;
        let next = SolveRecord {
            exp,
            state: None,
            lease: None,
            slot: None,
            slot_exp: 0,
            result: Some(StoredResult { status, body: body.clone() }),
            due: None,
            rev: String::new(),
        };
        if let Swapped::Conflict = record::swap(kv, id, loaded, next)? {
            return Ok(());
        }
        record::drop_base(kv, id)?;
        if let Some(n) = slot {
            budget::release(kv, n, id)?;
        }
        match &self.outcome {
            Outcome::Solved(solution) => metrics::solved(kv, solution.elapsed_ms),
            Outcome::Failed(failure) => metrics::failed(kv, failure.class, failure.origin),
        }
        Ok(())
    }
}

/// Ends the lease, keeping the solve's state.
fn release(kv: &Kv, id: &str, loaded: &mut Loaded) -> anyhow::Result<()> {
    let mut next = loaded.record.clone();
    next.lease = None;
    record::swap(kv, id, loaded, next).map(drop)
}

/// Removes an expired solve and gives back its thread slot.
fn expire(kv: &Kv, id: &str, record: &SolveRecord) -> anyhow::Result<()> {
    record::remove(kv, id)?;
    if let Some(n) = record.slot {
        budget::release(kv, n, id)?;
    }
    Ok(())
}

/// Removes solve `id` and its stored response (after one bounded [`sweep`]); false if there
/// was none. A solve still in flight keeps its thread slot until the slot expires (its
/// CaptchaAI task may still hold a thread); a driver still running loses its next checkpoint
/// and stops.
pub fn delete(kv: &Kv, id: &str) -> anyhow::Result<bool> {
    self::sweep(kv);
    let Some(loaded) = record::load(kv, id)? else { return Ok(false) };
    record::remove(kv, id)?;
    if loaded.record.result.is_some()
        && let Some(n) = loaded.record.slot
    {
        budget::release(kv, n, id)?;
    }
    Ok(true)
}

/// One bounded sweep of the expiry queue (`crate::sweep`): every request that writes or finds
/// nothing runs one (a pending or finished solve answered from its record alone does not), so
/// every solve created pays for the removal of at least [`sweep::PER_REQUEST`] expired ones.
/// Never fails the request: errors are logged.
pub fn sweep(kv: &Kv) {
    let visit = |id: &str, now: u64| match record::load(kv, id)? {
        Some(loaded) if loaded.record.exp > now => Ok(Some(loaded.record.exp)),
        Some(loaded) => expire(kv, id, &loaded.record).map(|()| None),
        None => record::remove(kv, id).map(|()| None),
    };
    if let Err(e) = sweep::run(kv, visit) {
        eprintln!("edge: sweep: {e:#}");
    }
}
