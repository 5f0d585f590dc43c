//! Adaptive polling across instances: ONE solve-times model per captcha type (the engine's
//! `solve-times` resource), kept in the store and shared by every instance. A new solve is
//! created with its type's current model (`create-with-times`: the engine decides the first
//! wait); a solved solve is observed into the model by the one request that stores its ending.
//! The edge only moves the model's text form (`to-text`, `from-text`) between the engine and
//! the store: what the model learns and the waits it gives are the engine's.
//!
//! Keys (docs/state.md):
//! - `solve-times/{type}`: JSON `{model, revs}`: the model's text form and the random revisions
//!   of its last writes (each observation's own: see [`Stored`]). Created once, by the winner of
//!   the `solve-times/{type}/init` ticket (an `increment`), so no compare-and-swap meets an
//!   absent key; from then on changed only by compare-and-swap: read, `from-text`, `observe`,
//!   `to-text`, swap; a lost race reads again (at most [`MAX_TRIES`] times, then the observation
//!   is dropped and counted). No update is lost, and none is counted twice.
//! - `solve-times/types/count` (counter) and `solve-times/types/{n}` (a type's name): the types
//!   with a model, for `/metrics`, registered once per type by the same ticket's winner.
//!
//! The model never fails a request: a store error or an unreadable stored model is logged (a
//! solve then starts with a fresh model; an observation replaces an unreadable one), and the
//! answer is stored before the model is touched.

use serde::{Deserialize, Serialize};

use crate::clock::sleep_ms;
use crate::engine::{Solution, SolveTimes};
use crate::ids::random_u64;
use crate::kv::{Kv, Swapped};

/// Reads and swaps an observation tries before it is dropped (and counted).
pub const MAX_TRIES: u32 = 8;

/// The longest pause between two tries, ms (each pause is random, up to 10 ms doubled per try).
const MAX_BACKOFF_MS: u64 = 160;

/// Revisions a model's value remembers: how many later writes an observer that could not tell
/// whether its swap happened may meet and still find its own.
const REVS_KEPT: usize = 32;

/// The value at `solve-times/{type}`.
#[derive(Serialize, Deserialize)]
struct Stored {
    /// The engine's `to-text`.
    model: String,
    /// The revisions of the last [`REVS_KEPT`] writes, newest last: each observation's own,
    /// random. They make each written value unique to its writer (see `Cas::swap`), and tell an
    /// observer whose swap was reported failed yet happened (Spin 4.1's Redis store,
    /// docs/state.md) and was overwritten since that its observation is in: it stops there
    /// instead of counting it twice.
    #[serde(default)]
    revs: Vec<String>,
}

fn model_key(task_type: &str) -> String {
    format!("solve-times/{task_type}")
}

const TYPES_COUNT: &str = "solve-times/types/count";

fn type_key(n: i64) -> String {
    format!("solve-times/types/{n}")
}

/// The `type` of a task JSON body, if it has a string one (nothing else of the task is read:
/// the engine validates it).
fn body_type(task: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: Option<serde_json::Value>,
    }
    let typed: Typed = serde_json::from_str(task).ok()?;
    typed.kind?.as_str().map(str::to_owned)
}

/// The model a new solve of `task` (its JSON body) starts with: its type's stored model, or a
/// fresh one where none is stored or the stored one cannot be read. `None` when the task has no
/// type the engine knows (the engine's own `create` refuses it then).
pub fn for_task(kv: &Kv, task: &str) -> Option<SolveTimes> {
    let empty = fresh(&body_type(task)?).ok()?;
    let task_type = empty.task_type();
    match load(kv, &task_type) {
        Ok(Some(model)) => Some(model),
        Ok(None) => Some(empty),
        Err(e) => {
            eprintln!("edge: solve times of {task_type}: {e:#}; this solve starts with a fresh model");
            Some(empty)
        }
    }
}

/// The stored model of `task_type`; `Err` for a store error or a value the engine refuses.
fn load(kv: &Kv, task_type: &str) -> anyhow::Result<Option<SolveTimes>> {
    kv.get(&model_key(task_type))?.map(|bytes| parse_stored(&bytes, task_type).map(|(model, _)| model)).transpose()
}

/// An empty model of `task_type`.
fn fresh(task_type: &str) -> anyhow::Result<SolveTimes> {
    SolveTimes::create(task_type).map_err(|e| anyhow::anyhow!("the engine refused a model of {task_type}: {e:?}"))
}

/// A stored value's model, if the engine takes it as a model of `task_type`, and the revisions
/// it remembers.
fn parse_stored(bytes: &[u8], task_type: &str) -> anyhow::Result<(SolveTimes, Vec<String>)> {
    let stored: Stored =
        serde_json::from_slice(bytes).map_err(|e| anyhow::anyhow!("the stored value is not a model record: {e}"))?;
    let model = SolveTimes::from_text(&stored.model)
        .map_err(|e| anyhow::anyhow!("the engine refused the stored model: {e:?}"))?;
    let actual = model.task_type();
    anyhow::ensure!(actual == task_type, "the stored model is of {actual}");
    Ok((model, stored.revs))
}

/// The value storing `model`, written by `rev` after the writes `before` remembers.
fn stored(model: &SolveTimes, mut before: Vec<String>, rev: &str) -> anyhow::Result<Vec<u8>> {
    before.drain(..before.len().saturating_sub(REVS_KEPT - 1));
    before.push(rev.to_owned());
    Ok(serde_json::to_vec(&Stored { model: model.to_text(), revs: before })?)
}

/// A fresh revision: 64 random bits, as 16 hex characters.
fn new_rev() -> anyhow::Result<String> {
    Ok(format!("{:016x}", random_u64()?))
}

/// What [`observe`] did.
enum Observed {
    /// Learned, and stored.
    Saved,
    /// The engine did not use it (a resubmitted or synchronous solve): nothing to store.
    Unused,
    /// Every try lost its race.
    GaveUp,
}

/// Observes `solution`, a solve of `task_type` solved just now, into the type's shared model.
/// Never fails: a dropped observation is logged and counted
/// (`metrics/solve_times/dropped/{reason}`, which `/metrics` shows).
pub async fn observe(kv: &Kv, task_type: &str, solution: &Solution) {
    match try_observe(kv, task_type, solution).await {
        Ok(Observed::Saved | Observed::Unused) => {}
        Ok(Observed::GaveUp) => {
            eprintln!("edge: solve times of {task_type}: {MAX_TRIES} tries lost their race; one observation dropped");
            count(kv, "metrics/solve_times/dropped/contention");
        }
        Err(e) => {
            eprintln!("edge: solve times of {task_type}: {e:#}; one observation dropped");
            count(kv, "metrics/solve_times/dropped/store");
        }
    }
}

async fn try_observe(kv: &Kv, task_type: &str, solution: &Solution) -> anyhow::Result<Observed> {
    let key = model_key(task_type);
    // One revision per observation: whichever try's swap happened, a later try finds it.
    let rev = new_rev()?;
    for attempt in 0..MAX_TRIES {
        if attempt > 0 {
            // Random, growing pauses: instances that all lost a race do not meet again.
            let cap = (10u64 << attempt.min(8)).min(MAX_BACKOFF_MS);
            sleep_ms(random_u64()? % (cap + 1)).await;
        }
        let (current, cas) = kv.cas(&key)?;
        let Some(bytes) = current else {
            // Created once, by the winner of the init ticket; the others read again.
            if kv.increment(&format!("{key}/init"), 1)? == 1 {
                register(kv, task_type)?;
                kv.set(&key, &stored(&fresh(task_type)?, Vec::new(), &new_rev()?)?)?;
            }
            continue;
        };
        let (model, revs) = match parse_stored(&bytes, task_type) {
            // An earlier try's swap happened after all (reported failed, then overwritten).
            Ok((_, revs)) if revs.contains(&rev) => return Ok(Observed::Saved),
            Ok(read) => read,
            Err(e) => {
                eprintln!("edge: solve times of {task_type}: {e:#}; replaced by a fresh model");
                (fresh(task_type)?, Vec::new())
            }
        };
        if !model.observe(solution) {
            return Ok(Observed::Unused);
        }
        if let Swapped::Yes = cas.swap(&stored(&model, revs, &rev)?)? {
            return Ok(Observed::Saved);
        }
        count(kv, "metrics/solve_times/conflicts");
    }
    // The last try's swap may have happened and been overwritten before its check.
    let last = kv.get(&key)?.and_then(|bytes| serde_json::from_slice::<Stored>(&bytes).ok());
    Ok(if last.is_some_and(|stored| stored.revs.contains(&rev)) { Observed::Saved } else { Observed::GaveUp })
}

/// Lists `task_type` among the types with a model (once per type: by the init ticket's winner).
fn register(kv: &Kv, task_type: &str) -> anyhow::Result<()> {
    let n = kv.increment(TYPES_COUNT, 1)?;
    kv.set(&type_key(n), task_type.as_bytes())
}

/// One type's model as `/metrics` shows it.
pub struct Summary {
    pub task_type: String,
    pub observations: u32,
    pub first_wait_ms: Option<u64>,
    /// (permille, ms) for each of [`QUANTILES`] the model has.
    pub quantiles: Vec<(u32, u64)>,
}

/// The quantiles `/metrics` shows, permille.
pub const QUANTILES: &[u32] = &[500, 900, 990];

/// Every stored model, by type name. A model that cannot be read is logged and left out.
pub fn summaries(kv: &Kv) -> anyhow::Result<Vec<Summary>> {
    let count = kv.counter(TYPES_COUNT)?;
    let mut types = Vec::new();
    for n in 1..=count {
        if let Some(name) = kv.get(&type_key(n))?.and_then(|bytes| String::from_utf8(bytes).ok()) {
            types.push(name);
        }
    }
    types.sort();
    types.dedup();
    let mut summaries = Vec::new();
    for task_type in types {
        let model = match load(kv, &task_type) {
            Ok(Some(model)) => model,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("edge: metrics: solve times of {task_type}: {e:#}");
                continue;
            }
        };
        let quantiles = QUANTILES.iter().filter_map(|p| model.quantile_ms(*p).map(|ms| (*p, ms))).collect();
        summaries.push(Summary {
            observations: model.observations(),
            first_wait_ms: model.first_wait_ms(),
            quantiles,
            task_type,
        });
    }
    Ok(summaries)
}

/// Counts a dropped observation or a lost swap under its `/metrics` key (kept here, not in
/// `crate::metrics`, which reads these models: no import circle).
fn count(kv: &Kv, key: &str) {
    if let Err(e) = kv.increment(key, 1) {
        eprintln!("edge: metrics: {e:#}");
    }
}
