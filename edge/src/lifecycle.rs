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
//! An API (`crate::api`) calls one transition per request, [`start`], [`resume`] or [`delete`],
//! and renders the [`Answer`] it returns (with the [`Render`] it passes, which also renders the
//! ending stored for later requests); the engine decides everything about the protocol
//! (`crate::drive`). This module decides only the bookkeeping: who drives a solve and until
//! when, when it takes a thread slot, how long its record is kept. An id is answered only once
//! its record is stored: a request that finds its record gone answers so, never "pending".
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

pub use record::StoredResult;
use record::{Chain, Lease, Loaded, SolveRecord};

use crate::budget::{self, Pool};
use crate::clock::{now_ms, sleep_ms};
use crate::drive::{self, Progress};
use crate::engine::{Failure, FailureOrigin, HttpRequest, RequestKind, Solution, Solve};
use crate::ids::{self, new_id, next_attempt};
use crate::kv::{Kv, StoreError, Swapped};
use crate::settings::{RESULT_RETENTION_MS, Settings};
use crate::{metrics, plan, sweep, times};

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

/// Claims a POST with an `Idempotency-Key` tries before giving up ([`Answer::Creating`]): each
/// failed creation (or a solve that ended meanwhile) moves it on once.
const MAX_KEYED_STEPS: usize = 8;

/// A request to start a solve.
pub struct Start<'a> {
    /// The task JSON, for the engine's `create`.
    pub task: &'a str,
    /// The label of the client starting it (`crate::settings::Client`).
    pub owner: &'a str,
    /// Makes the id of a solve started without a key (`ids::new_id`, or the id `in.php` hands
    /// out).
    pub new_id: fn() -> anyhow::Result<String>,
    /// Set for a request that names its solve with an idempotency key.
    pub keyed: Option<KeyedStart<'a>>,
    /// When the request's wait ends (epoch ms).
    pub wait_until: u64,
    /// Whether a solve that finds every thread its client may use busy waits for one (a queue)
    /// or is removed at once ([`Answer::Busy`]).
    pub queue: bool,
}

/// What names a keyed solve: the client's token and key, and the request body its retries must
/// repeat.
pub struct KeyedStart<'a> {
    pub token: &'a [u8],
    pub key: &'a str,
    pub body: &'a [u8],
}

/// Renders how a solve ended as the response stored for it and repeated to every later request
/// until it expires: the API's business, not the lifecycle's.
pub type Render<'a> = &'a dyn Fn(&Ending) -> anyhow::Result<StoredResult>;

/// How a solve ended, for its [`Render`].
pub struct Ending<'a> {
    pub id: &'a str,
    /// Its captcha type (the `type` in its task JSON), where the engine knows the type.
    pub task_type: Option<&'a str>,
    pub outcome: &'a Outcome,
}

/// What a request learns about a solve: all the API renders.
pub enum Answer {
    /// The engine refused the task before anything was sent: nothing is stored.
    Refused(Failure),
    /// No such solve: never created, deleted, or expired.
    Missing,
    /// A solve started with this idempotency key and another body.
    OtherRequest,
    /// The solve of an idempotency key could not be created in [`MAX_KEYED_STEPS`] attempts.
    Creating,
    /// In flight: ask again in `retry_after_ms`.
    Pending { retry_after_ms: u64 },
    /// Admission needs the plan's size and it could not be read: the engine's failure. The
    /// solve is unchanged.
    Unadmitted(Failure),
    /// The solve ended: its stored response (stored by this request, or earlier).
    Finished(StoredResult),
    /// Every thread its client may use was busy, and the request asked not to queue: the solve
    /// is removed, nothing was sent.
    Busy,
}

/// Why a request could not go on: the store failed (or the deployment is broken). `id` is the
/// solve's once one is stored; a failure before that has none, so a client retries its start.
pub struct Stalled {
    pub id: Option<String>,
    pub error: anyhow::Error,
}

impl Stalled {
    fn at(id: &str) -> impl FnOnce(anyhow::Error) -> Stalled + '_ {
        move |error| Stalled { id: Some(id.to_owned()), error }
    }

    fn before(error: anyhow::Error) -> Stalled {
        Stalled { id: None, error }
    }
}

/// An answer about solve `id`, or why there is none.
pub type Reply = Result<(Option<String>, Answer), Stalled>;

/// Starts a solve: the engine validates the task (a refused one is answered at once, nothing
/// stored or sent), it is created with its type's shared solve-times model (`crate::times`),
/// stored, and driven for the wait, its ending rendered with `render` and stored.
///
/// With an idempotency key, the solve's id is [`ids::keyed_id`] of the token and the key, and
/// only the request that wins its claim creates it: any other request with the same token, key
/// and body continues that solve as [`resume`] does (or answers its stored response), so a
/// client cut off mid-request retries and gets its solve, submitted once. The same key with
/// another body is [`Answer::OtherRequest`]. The key lives as long as the solve.
///
/// An id is only answered once its record is stored: a record that turns out missing when the
/// request next swaps it is a store failure ([`Stalled`] without an id).
pub async fn start(kv: &Kv, settings: &Settings, start: Start<'_>, render: Render<'_>) -> Reply {
    let now = now_ms();
    sweep(kv);
    let model = times::for_task(kv, start.task);
    let created = match &model {
        Some(model) => Solve::create_with_times(start.task, &settings.api_key, &settings.config, now, model),
        None => Solve::create(start.task, &settings.api_key, &settings.config, now),
    };
    let task_type = model.as_ref().map(|m| m.task_type());
    let solve = match created {
        Ok(solve) => solve,
        Err(failure) => {
            metrics::failed(kv, Some(start.owner), failure.class, failure.origin);
            return Ok((None, Answer::Refused(failure)));
        }
    };
    let wait_until = start.wait_until;
    let made = Made { solve: &solve, owner: start.owner, task_type, accepted_at: now, queue: start.queue };
    let Some(keyed) = start.keyed else {
        let id = (start.new_id)().map_err(Stalled::before)?;
        let held = create(kv, settings, &id, &made, None, wait_until).map_err(Stalled::before)?;
        return drive_created(kv, settings, held, solve, render, wait_until).await;
    };
    // The first attempt's id, then the next attempt's whenever a claimer stopped before
    // creating its solve (keyed solves, above); back to the first once the solve is gone.
    let first = ids::keyed_id(keyed.token, keyed.key);
    let fingerprint = ids::fingerprint(keyed.body);
    let mut chain: Option<Chain> = None;
    for _ in 0..MAX_KEYED_STEPS {
        let id = chain.as_ref().map_or_else(|| first.clone(), |c| ids::nth_attempt(&c.first, c.before));
        let claimed_at = now_ms();
        if record::claim(kv, &id).map_err(Stalled::at(&id))? {
            let keyed = Keyed { fingerprint, chain, claimed_at };
            // No id in a failure: the solve may never be driven; the client retries.
            let held = create(kv, settings, &id, &made, Some(keyed), wait_until).map_err(Stalled::before)?;
            return drive_created(kv, settings, held, solve, render, wait_until).await;
        }
        let joined = join(kv, settings, &id, &fingerprint, now_ms(), wait_until).await;
        match joined.map_err(Stalled::at(&id))? {
            Joined::Found(Found::Missing) => chain = None,
            Joined::Found(found) => return answer(kv, settings, &id, found, render, wait_until).await,
            Joined::NextAttempt => {
                let before = chain.as_ref().map_or(1, |c| c.before + 1);
                chain = Some(Chain { first: first.clone(), before });
            }
        }
    }
    Ok((None, Answer::Creating))
}

/// Continues solve `id` for a wait ending at `wait_until`: its stored response once it has
/// ended (until that expires), else the solve driven from its stored state. An unknown id
/// never touches the upstream; neither does a solve of another client than `owner`, when
/// given: it is [`Answer::Missing`].
pub async fn resume(
    kv: &Kv,
    settings: &Settings,
    id: &str,
    owner: Option<&str>,
    render: Render<'_>,
    wait_until: u64,
) -> Reply {
    let found = lease(kv, settings, id, Lessee { request: None, owner }, wait_until).await.map_err(Stalled::at(id))?;
    answer(kv, settings, id, found, render, wait_until).await
}

/// Drives a solve this request just created: one that turns out gone is a store failure,
/// answered without its id.
async fn drive_created(
    kv: &Kv,
    settings: &Settings,
    held: Held,
    solve: Solve,
    render: Render<'_>,
    wait_until: u64,
) -> Reply {
    let id = held.id.clone();
    match drive(kv, settings, held, Some(solve), render, wait_until).await? {
        Answer::Missing => {
            Err(Stalled::before(StoreError::new(format!("solve {id} was not found right after it was stored")).into()))
        }
        answer => Ok((Some(id), answer)),
    }
}

/// Answers about solve `id` from what [`lease`] found, driving it if leased.
async fn answer(kv: &Kv, settings: &Settings, id: &str, found: Found, render: Render<'_>, wait_until: u64) -> Reply {
    let answer = match found {
        Found::Missing => Answer::Missing,
        Found::OtherRequest => return Ok((None, Answer::OtherRequest)),
        Found::Creating => return Ok((None, Answer::Creating)),
        Found::Finished(result) => Answer::Finished(result),
        Found::Pending { retry_after_ms } => Answer::Pending { retry_after_ms },
        Found::Leased(held) => drive(kv, settings, *held, None, render, wait_until).await?,
    };
    Ok((Some(id.to_owned()), answer))
}

/// Drives the solve `held` (created by this request when `solve` is given) for the wait ending
/// at `wait_until`: pending, or ended, rendered and stored.
async fn drive(
    kv: &Kv,
    settings: &Settings,
    held: Held,
    solve: Option<Solve>,
    render: Render<'_>,
    wait_until: u64,
) -> Result<Answer, Stalled> {
    let id = held.id.clone();
    let ended = match held.advance(kv, settings, solve, wait_until).await.map_err(Stalled::at(&id))? {
        Advanced::Pending { retry_after_ms } => return Ok(Answer::Pending { retry_after_ms }),
        Advanced::Gone => return Ok(Answer::Missing),
        Advanced::Busy => return Ok(Answer::Busy),
        Advanced::Refused(failure) => return Ok(Answer::Unadmitted(failure)),
        Advanced::Ended(ended) => ended,
    };
    let task_type = ended.held.loaded.record.times.clone();
    let ending = Ending { id: &id, task_type: task_type.as_deref(), outcome: &ended.outcome };
    let result = render(&ending).map_err(Stalled::at(&id))?;
    ended.settle(kv, &result).await.map_err(Stalled::at(&id))?;
    Ok(Answer::Finished(result))
}

/// What a request finds at `solve/{id}` ([`lease`]).
enum Found {
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
struct Held {
    id: String,
    loaded: Loaded,
    /// Whether it may wait for a thread slot (false only for the request that created it not
    /// to queue).
    queue: bool,
}

/// Where [`Held::advance`] left a solve.
enum Advanced {
    /// Still in flight, and this request no longer drives it: its lease is released, or the
    /// record changed under it (taken over after the lease ran out).
    Pending { retry_after_ms: u64 },
    /// The record is gone: deleted or expired meanwhile, or never stored after all.
    Gone,
    /// No thread was free and the solve was not to queue: it is removed.
    Busy,
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
struct Ended {
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

/// What a keyed solve's creator brings to [`create`].
struct Keyed {
    /// The body's fingerprint: a retry with the same key must bring the same body.
    fingerprint: String,
    /// The attempts before this one, if any.
    chain: Option<Chain>,
    /// When the request sent its claim (epoch ms): the record must be written within
    /// [`CREATE_MS`] of it.
    claimed_at: u64,
}

/// A solve the engine just created, and what its record keeps of its start.
struct Made<'a> {
    solve: &'a Solve,
    /// The client's label.
    owner: &'a str,
    /// The captcha type of its shared solve-times model, if it was created with one.
    task_type: Option<String>,
    /// When the edge accepted it (epoch ms).
    accepted_at: u64,
    /// Whether it waits for a thread slot ([`Start::queue`]).
    queue: bool,
}

/// Creates solve `id` (fresh and random, or claimed: nobody else writes its keys) from the
/// engine's new solve: the task (`snapshot-base`) once, the record leased to this request for
/// a wait ending at `wait_until`, and its entry in the expiry queue. A keyed solve is queued
/// first (so a claim whose record never comes is swept) and fails with a [`StoreError`],
/// submitting nothing, when its writes ended later than its deadline ([`Keyed::claimed_at`]).
fn create(
    kv: &Kv,
    settings: &Settings,
    id: &str,
    made: &Made,
    keyed: Option<Keyed>,
    wait_until: u64,
) -> anyhow::Result<Held> {
    let holder = new_id()?;
    let lease_until = lease_until(settings, wait_until);
    let exp = lease_until + settings.abandon_after_ms;
    let deadline = keyed.as_ref().map(|k| k.claimed_at + CREATE_MS);
    let (request, chain) = keyed.map_or((None, None), |k| (Some(k.fingerprint), k.chain));
    let record = SolveRecord {
        exp,
        state: Some(made.solve.snapshot_state()),
        lease: Some(Lease { holder: holder.clone(), until: lease_until }),
        slot: None,
        client_slot: None,
        slot_exp: 0,
        result: None,
        due: None,
        rev: holder,
        submitting: None,
        request,
        chain,
        times: made.task_type.clone(),
        owner: Some(made.owner.to_owned()),
        accepted_at: Some(made.accepted_at),
    };
    if deadline.is_some() {
        sweep::enqueue(kv, id, exp)?;
    }
    let mut loaded = record::create(kv, id, made.solve.snapshot_base(), &record)?;
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
    Ok(Held { id: id.to_owned(), loaded, queue: made.queue })
}

/// What [`join`] found for a keyed solve another request claimed.
enum Joined {
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
async fn join(
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
        match lease(kv, settings, id, Lessee { request: Some(fingerprint), owner: None }, wait_until).await? {
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
/// Who asks for a lease ([`lease`]).
struct Lessee<'a> {
    /// The body's fingerprint of a request with an idempotency key that lost the id's claim:
    /// the solve must have been started with the same body, and while its record is not there
    /// yet, the request waits for it within its wait.
    request: Option<&'a str>,
    /// The client that must have started the solve, where only it may see it: another's solve
    /// is [`Found::Missing`], untouched.
    owner: Option<&'a str>,
}

async fn lease(kv: &Kv, settings: &Settings, id: &str, lessee: Lessee<'_>, wait_until: u64) -> anyhow::Result<Found> {
    let Lessee { request, owner } = lessee;
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
        if owner.is_some() && loaded.record.owner.as_deref() != owner {
            return Ok(Found::Missing);
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
                return Ok(Found::Leased(Box::new(Held { id: id.to_owned(), loaded, queue: true })));
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
    async fn advance(
        mut self,
        kv: &Kv,
        settings: &Settings,
        solve: Option<Solve>,
        wait_until: u64,
    ) -> anyhow::Result<Advanced> {
        let lease_until = self.loaded.record.lease.as_ref().map_or(0, |l| l.until);
        if self.loaded.record.submitting.is_some() && !self.doubt(kv)? {
            return changed(kv, &self.id);
        }
        let solve = match solve {
            Some(solve) => solve,
            None => self.restore(kv, settings)?,
        };
        // A solve waiting for a thread slot still ends when the engine says so (its deadline
        // counts from its creation): asked before taking a slot, so a queue that never frees
        // never keeps it pending past its deadline.
        let ended = match self.loaded.record.slot {
            None => drive::ended(&solve)?,
            Some(_) => None,
        };
        let progress = match ended {
            Some(progress) => progress,
            None => {
                if let Some(answer) = self.admit(kv, settings, lease_until, wait_until).await? {
                    return Ok(answer);
                }
                self.run(kv, settings, &solve, lease_until, wait_until).await?
            }
        };
        let at = now_ms();
        let outcome = match progress {
            Progress::Lost => return changed(kv, &self.id),
            Progress::Pending { retry_after_ms, due } => {
                let mut next = self.loaded.record.clone();
                next.state = Some(solve.snapshot_state());
                next.lease = None;
                next.due = due;
                if let Swapped::Conflict = record::swap(kv, &self.id, &mut self.loaded, next)? {
                    return changed(kv, &self.id);
                }
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
        (next.slot, next.client_slot, next.slot_exp) = (None, None, 0);
        if let Swapped::Conflict = record::swap(kv, &self.id, &mut self.loaded, next)? {
            return Ok(false);
        }
        metrics::submit_in_doubt(kv);
        let kept = orphan.map(|n| format!("; thread slot {n} stays held until it expires")).unwrap_or_default();
        eprintln!("edge: solve {}: a submit was sent but its reply never saved: sending it again{kept}", self.id);
        Ok(true)
    }

    /// Makes sure the solve holds its thread slots (the plan's, and its client's where the
    /// client has a share): renews those it holds (the record forgets them when one was lost
    /// meanwhile), else takes them, waiting for free ones until `wait_until`. `None` when it
    /// holds them (or the plan has no threads to share: the engine's own failure answers then);
    /// otherwise what to answer, the lease released where it was kept.
    async fn admit(
        &mut self,
        kv: &Kv,
        settings: &Settings,
        lease_until: u64,
        wait_until: u64,
    ) -> anyhow::Result<Option<Advanced>> {
        let id = self.id.clone();
        if self.loaded.record.slot.is_some() {
            let exp = self.loaded.record.slot_exp.max(lease_until);
            if renew_slots(kv, &id, &self.loaded.record, exp)? {
                return Ok(None);
            }
            release_slots(kv, &id, &self.loaded.record)?;
            let mut next = self.loaded.record.clone();
            (next.slot, next.client_slot, next.slot_exp) = (None, None, 0);
            if let Swapped::Conflict = record::swap(kv, &id, &mut self.loaded, next)? {
                return changed(kv, &id).map(Some);
            }
        }
        let capacity = match plan::threads(kv, settings).await? {
            Ok(threads) => threads,
            Err(failure) => {
                if let Swapped::Conflict = release(kv, &id, &mut self.loaded)? {
                    return changed(kv, &id).map(Some);
                }
                return Ok(Some(Advanced::Refused(failure)));
            }
        };
        if capacity == 0 {
            return Ok(None);
        }
        let owner = self.loaded.record.owner.clone();
        let share = owner.as_deref().and_then(|label| settings.client(label)).and_then(|c| c.threads);
        loop {
            if let Some((slot, client_slot)) = take_slots(kv, &id, owner.as_deref(), capacity, share, lease_until)? {
                let mut next = self.loaded.record.clone();
                (next.slot, next.client_slot, next.slot_exp) = (Some(slot), client_slot, lease_until);
                let accepted_at = next.accepted_at.take();
                if let Swapped::Conflict = record::swap(kv, &id, &mut self.loaded, next.clone())? {
                    release_slots(kv, &id, &next)?;
                    return changed(kv, &id).map(Some);
                }
                if let Some(accepted_at) = accepted_at {
                    metrics::queued(kv, owner.as_deref(), now_ms().saturating_sub(accepted_at));
                }
                return Ok(None);
            }
            if !self.queue {
                expire(kv, &id, &self.loaded.record)?;
                return Ok(Some(Advanced::Busy));
            }
            if now_ms() + QUEUE_POLL_MS > wait_until {
                if let Swapped::Conflict = release(kv, &id, &mut self.loaded)? {
                    return changed(kv, &id).map(Some);
                }
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
        let Held { id, loaded, .. } = &mut *self.held;
        if let Some(ends_by) = solve.ends_by() {
            let slot_exp = ends_by + drive::LEASE_MARGIN_MS;
            next.exp = next.exp.max(slot_exp + self.settings.abandon_after_ms);
            if next.slot.is_some() && next.slot_exp < slot_exp {
                if !renew_slots(self.kv, id, &next, slot_exp)? {
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
    /// Stores the solve's rendered response in place of its state, to be repeated until the
    /// token expires (a solution's `expires-at`) or for [`RESULT_RETENTION_MS`], and gives back
    /// the task and the thread slot (unless its CaptchaAI task may still be running). Counted
    /// in the metrics by the one request whose swap stores it; a request that lost the lease
    /// meanwhile stores nothing.
    async fn settle(mut self, kv: &Kv, result: &StoredResult) -> anyhow::Result<()> {
        let exp = match &self.outcome {
            Outcome::Solved(solution) => {
                let keep_until = solution.solved_at + RESULT_RETENTION_MS;
                solution.expires_at.map_or(keep_until, |expires| expires.min(keep_until))
            }
            Outcome::Failed(_) => self.at + RESULT_RETENTION_MS,
        };
        let Held { id, loaded, .. } = &mut self.held;
        let before = loaded.record.clone();
        let next = SolveRecord {
            exp,
            state: None,
            lease: None,
            slot: None,
            client_slot: None,
            slot_exp: 0,
            result: Some(result.clone()),
            due: None,
            rev: String::new(),
            submitting: None,
            request: before.request.clone(),
            chain: before.chain.clone(),
            times: None,
            owner: before.owner.clone(),
            accepted_at: None,
        };
        if let Swapped::Conflict = record::swap(kv, id, loaded, next)? {
            return Ok(());
        }
        record::drop_base(kv, id)?;
        // A solve that ended without CaptchaAI's last word on a task CaptchaAI took (the
        // deadline passed, an answer never came) may leave that task holding a thread there:
        // its slots stay held until they expire (the engine's `ends_by` and a margin), as a
        // deleted solve's do.
        let task_may_run = matches!(&self.outcome,
            Outcome::Failed(f) if f.origin == FailureOrigin::NoAnswer && f.task_id.is_some());
        if !task_may_run {
            release_slots(kv, id, &before)?;
        }
        let owner = before.owner.as_deref();
        match &self.outcome {
            Outcome::Solved(solution) => {
                metrics::solved(kv, owner, solution.elapsed_ms);
                if let Some(task_type) = &before.times {
                    times::observe(kv, task_type, solution).await;
                }
            }
            Outcome::Failed(failure) => metrics::failed(kv, owner, failure.class, failure.origin),
        }
        Ok(())
    }
}

/// Ends the lease, keeping the solve's state.
fn release(kv: &Kv, id: &str, loaded: &mut Loaded) -> anyhow::Result<Swapped> {
    let mut next = loaded.record.clone();
    next.lease = None;
    record::swap(kv, id, loaded, next)
}

/// The thread slots a record holds: the plan's, and its client's share's.
fn held(record: &SolveRecord) -> Vec<(Pool<'_>, u64)> {
    let plan = record.slot.map(|n| (Pool::Plan, n));
    let client = record.client_slot.zip(record.owner.as_deref()).map(|(n, label)| (Pool::Client(label), n));
    plan.into_iter().chain(client).collect()
}

/// Takes the slots a solve of `owner` needs: one of the client's `share` first (where it has
/// one), then one of the plan's `capacity`; none if either pool is full.
fn take_slots(
    kv: &Kv,
    id: &str,
    owner: Option<&str>,
    capacity: u64,
    share: Option<u64>,
    exp: u64,
) -> anyhow::Result<Option<(u64, Option<u64>)>> {
    let client = match owner.zip(share) {
        Some((label, share)) => match budget::acquire(kv, Pool::Client(label), id, share, exp)? {
            Some(n) => Some((label, n)),
            None => return Ok(None),
        },
        None => None,
    };
    match budget::acquire(kv, Pool::Plan, id, capacity, exp)? {
        Some(n) => Ok(Some((n, client.map(|(_, n)| n)))),
        None => {
            if let Some((label, n)) = client {
                budget::release(kv, Pool::Client(label), n, id)?;
            }
            Ok(None)
        }
    }
}

/// Extends every slot the record holds to `exp`; false if one was lost (expired and taken).
fn renew_slots(kv: &Kv, id: &str, record: &SolveRecord, exp: u64) -> anyhow::Result<bool> {
    let mut all = true;
    for (pool, n) in held(record) {
        all &= budget::renew(kv, pool, n, id, exp)?;
    }
    Ok(all)
}

/// Gives back every slot the record holds.
fn release_slots(kv: &Kv, id: &str, record: &SolveRecord) -> anyhow::Result<()> {
    held(record).into_iter().try_for_each(|(pool, n)| budget::release(kv, pool, n, id))
}

/// Where a solve stands whose record changed under this request's lease: taken over by
/// another driver (pending), or gone. Read once, so an id is never answered pending unless its
/// record is there.
fn changed(kv: &Kv, id: &str) -> anyhow::Result<Advanced> {
    Ok(match record::load(kv, id)? {
        Some(_) => Advanced::Pending { retry_after_ms: CONTENDED_RETRY_MS },
        None => Advanced::Gone,
    })
}

/// Removes an expired solve and gives back its thread slot.
fn expire(kv: &Kv, id: &str, record: &SolveRecord) -> anyhow::Result<()> {
    record::remove(kv, id, record)?;
    release_slots(kv, id, record)
}

/// Removes solve `id` and its stored response (after one bounded [`sweep`]); false if there
/// was none. A solve still in flight keeps its thread slot until the slot expires (its
/// CaptchaAI task may still hold a thread); a driver still running loses its next checkpoint
/// and stops.
pub fn delete(kv: &Kv, id: &str) -> anyhow::Result<bool> {
    self::sweep(kv);
    let Some(loaded) = record::load(kv, id)? else { return Ok(false) };
    record::remove(kv, id, &loaded.record)?;
    if loaded.record.result.is_some() {
        release_slots(kv, id, &loaded.record)?;
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
