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
//!
//! **Submits in doubt.** Just before a submit is sent, the record notes it (`submitting`) and the
//! solve's thread slot is extended to the latest the solve waits on its CaptchaAI task (the
//! engine's `ends_by`, known from the solve's start). The checkpoint of the submit's
//! result clears the note. A driver that finds the note set (its driver stopped, e.g. killed, after
//! sending and before saving the reply) cannot know whether CaptchaAI took the task. It submits
//! again (the engine restored from the last checkpoint sends the submit once more: at-least-once),
//! counts it (`captchaai_submits_in_doubt_total`), and leaves the old slot held until it expires,
//! for the possible orphan task, taking a fresh slot for the new submit: the budget never counts
//! fewer threads than CaptchaAI may have busy.
//!
//! **Keyed solves.** A POST with an `Idempotency-Key` claims its id (`solve/{id}/claim`,
//! incremented to 1 by one request only) and must have the record written within
//! [`CREATE_MS`] of sending the claim; a creator whose writes end later gives up without
//! submitting (503). A request that loses the claim waits for the record; when it is still
//! missing [`CREATE_MS`] + [`CLOCK_SKEW_MS`] after the request saw the claim, the claimer
//! stopped (killed, or the store failed under it), and the request moves on to the next
//! attempt's id (`crate::ids::next_attempt`), claimed the same way. So a failed creation never
//! blocks its key, and one solve is created per key: an attempt whose successor is claimed is
//! never driven.

mod record;

use serde_json::Value;

pub use record::Chain;
pub use record::StoredResult;
use record::{Lease, Loaded, SolveRecord};

use crate::clock::{now_ms, sleep_ms};
use crate::drive::{self, Progress};
use crate::engine::{Failure, HttpRequest, RequestKind, Solution, Solve};
use crate::ids::{new_id, next_attempt};
use crate::kv::{Kv, StoreError, Swapped};
use crate::settings::{RESULT_RETENTION_MS, Settings};
use crate::{budget, metrics, plan, sweep, times};

/// Time a request may spend before its first upstream send (lease, plan lookup, thread slot), ms.
const PREPARE_MS: u64 = 2_000;

/// How often a request waiting for a thread slot tries again, ms.
const QUEUE_POLL_MS: u64 = 500;

/// How often a request waiting for another request's lease looks again, ms.
const LEASE_POLL_MS: u64 = 250;

/// When a request answers "come back later" because another driver is in the way, ms.
const CONTENDED_RETRY_MS: u64 = 1_000;

/// Time the request that claims a keyed solve has, from sending its claim to the end of the
/// record's write, ms. Writing the record is two `set`s (the task up to ~1.5 MB, the record);
/// a store slower than this fails the request with a 503 and a later attempt creates the solve.
pub const CREATE_MS: u64 = 2_000;

/// The most two instances' clocks may differ, ms, as far as claims are concerned: a request
/// takes over a claim only this long after the claimer's own deadline could have passed.
pub const CLOCK_SKEW_MS: u64 = 1_000;

/// When a claim whose record is gone is looked at again while a later attempt holds the
/// chain, ms.
const CLAIM_RECHECK_MS: u64 = 60_000;

/// What a request finds at `solve/{id}` ([`lease`]).
pub enum Found {
    /// No such solve: never created, deleted, or expired (an expired one is removed now).
    Missing,
    /// A solve started with an `Idempotency-Key` and another body than this request's.
    OtherRequest,
    /// The solve of an `Idempotency-Key` is claimed but not created yet: its creator is still
    /// at it, or stopped in between ([`join`] tells which).
    Creating,
    /// The solve ended: its stored response, to repeat.
    Finished(StoredResult),
    /// Nothing to do within this request's wait: the next upstream request is due later, or
    /// another request held the lease all along.
    Pending { retry_after_ms: u64 },
    /// This request holds the lease: [`Held::advance`] it.
    Leased(Box<Held>),
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
    Ended(Box<Ended>),
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

/// Claims solve `id` for an `Idempotency-Key`: true for the one request that may [`create`] it.
pub fn claim(kv: &Kv, id: &str) -> anyhow::Result<bool> {
    record::claim(kv, id)
}

/// What a keyed solve's creator brings to [`create`].
pub struct Keyed {
    /// The body's fingerprint: a retry with the same key must bring the same body.
    pub fingerprint: String,
    /// The attempts before this one, if any.
    pub chain: Option<Chain>,
    /// When the request sent its claim (epoch ms): the record must be written within
    /// [`CREATE_MS`] of it.
    pub claimed_at: u64,
}

/// Creates solve `id` (fresh and random, or [`claim`]ed: nobody else writes its keys) from the
/// engine's new `solve`: the task (`snapshot-base`) once, the record leased to this request for
/// a wait ending at `wait_until`, and its entry in the expiry queue. A keyed solve is queued
/// first (so a claim whose record never comes is swept) and fails with a [`StoreError`],
/// submitting nothing, when its writes ended later than its deadline ([`Keyed::claimed_at`]).
pub fn create(
    kv: &Kv,
    settings: &Settings,
    id: &str,
    solve: &Solve,
    keyed: Option<Keyed>,
    times: Option<String>,
    wait_until: u64,
) -> anyhow::Result<Held> {
    let holder = new_id()?;
    let lease_until = lease_until(settings, wait_until);
    let exp = lease_until + settings.abandon_after_ms;
    let deadline = keyed.as_ref().map(|k| k.claimed_at + CREATE_MS);
    let (request, chain) = keyed.map_or((None, None), |k| (Some(k.fingerprint), k.chain));
    let record = SolveRecord {
        exp,
        state: Some(solve.snapshot_state()),
        lease: Some(Lease { holder: holder.clone(), until: lease_until }),
        slot: None,
        slot_exp: 0,
        result: None,
        due: None,
        rev: holder,
        submitting: None,
        request,
        chain,
        times,
    };
    if deadline.is_some() {
        sweep::enqueue(kv, id, exp)?;
    }
    let mut loaded = record::create(kv, id, solve.snapshot_base(), &record)?;
    if let Some(deadline) = deadline {
        if now_ms() >= deadline {
            // Requests that lost the claim may have moved on to the next attempt: this one
            // must not submit. Should they have found the record after all, they drive it.
            release(kv, id, &mut loaded)?;
            anyhow::bail!(StoreError::new(format!(
                "creating solve {id} took over {CREATE_MS} ms: the key-value store is too slow"
            )));
        }
    } else {
        sweep::enqueue(kv, id, exp)?;
    }
    Ok(Held { id: id.to_owned(), loaded })
}

/// What [`join`] found for a keyed solve another request claimed.
pub enum Joined {
    /// The solve (never [`Found::Creating`]), or [`Found::Missing`] when it ended and expired
    /// or was deleted meanwhile, its claims with it: the key starts afresh.
    Found(Found),
    /// Its creator stopped before writing it, or a later attempt already holds the key: go on
    /// with the next attempt's id ([`next_attempt`]).
    NextAttempt,
}

/// Joins keyed solve `id`, claimed by another request, which this request saw claimed at
/// `seen_at` (epoch ms, when its own claim's answer came back): waits for the record up to
/// [`CREATE_MS`] + [`CLOCK_SKEW_MS`] after `seen_at`, even past `wait_until` (the claimer has
/// that long), then [`lease`]s it for a wait ending at `wait_until`. `fingerprint`: the body's.
pub async fn join(
    kv: &Kv,
    settings: &Settings,
    id: &str,
    fingerprint: &str,
    seen_at: u64,
    wait_until: u64,
) -> anyhow::Result<Joined> {
    let give_up = seen_at + CREATE_MS + CLOCK_SKEW_MS;
    loop {
        if record::claimed(kv, &next_attempt(id))? {
            return Ok(Joined::NextAttempt);
        }
        match lease(kv, settings, id, Some(fingerprint), wait_until).await? {
            Found::Creating if now_ms() >= give_up => return Ok(Joined::NextAttempt),
            Found::Creating => sleep_ms(LEASE_POLL_MS).await,
            found => return Ok(Joined::Found(found)),
        }
    }
}

/// Loads solve `id` and takes its lease for a wait ending at `wait_until`, waiting within it
/// while another request holds the lease. An expired solve is removed. A solve with nothing
/// due before `wait_until` is answered from the one record read, writing nothing; so is a
/// finished one. Every other outcome runs one bounded sweep ([`sweep`]).
///
/// `request`: the body's fingerprint of a POST with an `Idempotency-Key` that lost the id's
/// [`claim`]: the solve must have been started with the same body, and while its record is
/// not there yet, the request waits for it within its wait.
pub async fn lease(
    kv: &Kv,
    settings: &Settings,
    id: &str,
    request: Option<&str>,
    wait_until: u64,
) -> anyhow::Result<Found> {
    let holder = new_id()?;
    let mut swept = false;
    loop {
        let now = now_ms();
        let Some(mut loaded) = record::load(kv, id)? else {
            if request.is_some() {
                return Ok(Found::Creating);
            }
            self::sweep(kv);
            return Ok(Found::Missing);
        };
        if request.is_some() && loaded.record.request.as_deref() != request {
            return Ok(Found::OtherRequest);
        }
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
                return Ok(Found::Leased(Box::new(Held { id: id.to_owned(), loaded })));
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
        if self.loaded.record.submitting.is_some() && !self.doubt(kv)? {
            return Ok(Advanced::Pending { retry_after_ms: CONTENDED_RETRY_MS });
        }
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
        Ok(Advanced::Ended(Box::new(Ended { held: self, outcome, at })))
    }

    /// A submit in doubt (see the module docs): the note is cleared and the slot left to the
    /// possible orphan task until it expires, so [`Held::admit`] takes a fresh one for the submit
    /// sent again; counted once, by the request whose swap does it. False if the record changed.
    fn doubt(&mut self, kv: &Kv) -> anyhow::Result<bool> {
        let orphan = self.loaded.record.slot;
        let mut next = self.loaded.record.clone();
        next.submitting = None;
        next.slot = None;
        next.slot_exp = 0;
        if let Swapped::Conflict = record::swap(kv, &self.id, &mut self.loaded, next)? {
            return Ok(false);
        }
        metrics::submit_in_doubt(kv);
        let kept = orphan.map(|n| format!("; thread slot {n} stays held until it expires")).unwrap_or_default();
        eprintln!("edge: solve {}: a submit was sent but its reply never saved: sending it again{kept}", self.id);
        Ok(true)
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

    /// Runs the engine (`crate::drive`), checkpointing into the record each submit about to be
    /// sent and each result (see [`Checkpoints`]).
    async fn run(
        &mut self,
        kv: &Kv,
        settings: &Settings,
        solve: &Solve,
        lease_until: u64,
        wait_until: u64,
    ) -> anyhow::Result<Progress> {
        let mut checkpoints = Checkpoints { kv, settings, held: self, lost_slot: false };
        let progress = drive::run(solve, wait_until, lease_until, kv, &mut checkpoints).await?;
        if checkpoints.lost_slot {
            eprintln!("edge: solve {} lost its thread slot while in flight", self.id);
        }
        Ok(progress)
    }
}

/// The record's side of a run: a submit is noted before it is sent, and each result's
/// state is saved; each a swap that fails if the solve was taken over or deleted meanwhile.
struct Checkpoints<'a> {
    kv: &'a Kv,
    settings: &'a Settings,
    held: &'a mut Held,
    /// The solve's thread slot turned out to be held by another solve (it had expired).
    lost_slot: bool,
}

impl Checkpoints<'_> {
    /// Swaps in `next`, first extending the record and its thread slot to the latest the solve
    /// can wait on CaptchaAI (the engine's `ends_by`: a request timeout after the later of its
    /// deadline and its last-poll window), and a grace to collect the outcome. The sweep queue's
    /// entry re-reads the record's `exp`, so a later expiry needs no entry.
    fn save(&mut self, solve: &Solve, mut next: record::SolveRecord) -> anyhow::Result<bool> {
        let Held { id, loaded } = &mut *self.held;
        if let Some(ends_by) = solve.ends_by() {
            let slot_exp = ends_by + drive::LEASE_MARGIN_MS;
            next.exp = next.exp.max(slot_exp + self.settings.abandon_after_ms);
            if let Some(n) = next.slot
                && next.slot_exp < slot_exp
            {
                if !budget::renew(self.kv, n, id, slot_exp)? {
                    self.lost_slot = true;
                }
                next.slot_exp = slot_exp;
            }
        }
        Ok(matches!(record::swap(self.kv, id, loaded, next)?, Swapped::Yes))
    }
}

impl drive::Checkpoint for Checkpoints<'_> {
    fn sending(&mut self, solve: &Solve, request: &HttpRequest) -> anyhow::Result<bool> {
        if request.kind != RequestKind::Submit {
            return Ok(true);
        }
        let mut next = self.held.loaded.record.clone();
        next.submitting = Some(request.id);
        self.save(solve, next)
    }

    fn answered(&mut self, solve: &Solve) -> anyhow::Result<bool> {
        let mut next = self.held.loaded.record.clone();
        next.state = Some(solve.snapshot_state());
        next.due = None;
        next.submitting = None;
        self.save(solve, next)
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
    pub async fn settle(mut self, kv: &Kv, status: u16, body: &Value) -> anyhow::Result<()> {
        let exp = match &self.outcome {
            Outcome::Solved(solution) => {
                let keep_until = solution.solved_at + RESULT_RETENTION_MS;
                solution.expires_at.map_or(keep_until, |expires| expires.min(keep_until))
            }
            Outcome::Failed(_) => self.at + RESULT_RETENTION_MS,
        };
        let Held { id, loaded } = &mut self.held;
        let slot = loaded.record.slot;
        let task_type = loaded.record.times.clone();
        let next = SolveRecord {
            exp,
            state: None,
            lease: None,
            slot: None,
            slot_exp: 0,
            result: Some(StoredResult { status, body: body.clone() }),
            due: None,
            rev: String::new(),
            submitting: None,
            request: loaded.record.request.clone(),
            chain: loaded.record.chain.clone(),
            times: None,
        };
        if let Swapped::Conflict = record::swap(kv, id, loaded, next)? {
            return Ok(());
        }
        record::drop_base(kv, id)?;
        if let Some(n) = slot {
            budget::release(kv, n, id)?;
        }
        match &self.outcome {
            Outcome::Solved(solution) => {
                metrics::solved(kv, solution.elapsed_ms);
                if let Some(task_type) = task_type {
                    times::observe(kv, &task_type, solution).await;
                }
            }
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
    record::remove(kv, id, record)?;
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
    record::remove(kv, id, &loaded.record)?;
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
        None => Ok((!record::remove_claim(kv, id)?).then_some(now + CLAIM_RECHECK_MS)),
    };
    if let Err(e) = sweep::run(kv, visit) {
        eprintln!("edge: sweep: {e:#}");
    }
}
