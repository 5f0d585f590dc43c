//! [`Runner`]: many solves at once through one engine instance, with checkpoints and recovery.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use wasmtime::component::ResourceAny;

use crate::clock::Clock;
use crate::component::{
    Config, EngineHost, EngineInstance, Failure, Misuse, Output, Solution, SolveTimesError, ThreadsInfo,
};
use crate::gate::Gate;
use crate::http::HttpClient;

/// The default cap on the engine's linear memory (4 GiB, the wasm32 maximum).
pub const DEFAULT_MAX_MEMORY: usize = 4 << 30;

/// How a [`Runner`] works.
pub struct RunnerOptions {
    /// The time the engine is given and sleeps run on.
    pub clock: Clock,
    /// How requests are sent.
    pub http: HttpClient,
    /// Cap on the engine instance's linear memory.
    pub max_memory: usize,
    /// Keep a snapshot of every solve after each change, so a trapped instance can be replaced
    /// without losing solves. Off only for measuring the engine alone.
    pub checkpoints: bool,
    /// Adaptive polling: keep one solve-times model per captcha type (the engine's
    /// `solve-times`), create each solve with its type's model and let the model learn from
    /// each solved solve. Off by default here (solves then take the type table's waits, which
    /// keeps measurements comparable); the `captchaai` CLI turns it on. Models loaded with
    /// [`Runner::set_solve_times`] are used only when it is on.
    pub adaptive: bool,
}

impl RunnerOptions {
    /// Real HTTP (at most `max_in_flight` requests at once) on `clock`, checkpoints on.
    pub fn new(clock: Clock, max_in_flight: usize) -> RunnerOptions {
        RunnerOptions {
            clock,
            http: HttpClient::new(clock, max_in_flight),
            max_memory: DEFAULT_MAX_MEMORY,
            checkpoints: true,
            adaptive: false,
        }
    }
}

/// How a solve ended, as the engine decided.
#[derive(Clone, Debug)]
pub struct SolveReport {
    /// The engine's terminal output.
    pub outcome: Result<Solution, Failure>,
    /// HTTP requests sent for this solve.
    pub requests: u32,
}

/// Counters for measurements.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunnerStats {
    /// Calls into the engine (excluding checkpoints).
    pub engine_calls: u64,
    /// Time spent inside those calls.
    pub engine_ns: u64,
    /// Snapshots taken for checkpoints.
    pub checkpoints: u64,
    /// Time spent taking them.
    pub checkpoint_ns: u64,
    /// Instances replaced after a trap.
    pub recoveries: u64,
}

/// What a captcha type's solve-times model gives now ([`Runner::first_waits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstWait {
    /// The first wait a new solve of the type gets, ms; `None` while the type's table applies
    /// (under the engine's minimum of observations).
    pub first_wait_ms: Option<u64>,
    /// Solved solves the model has learned from.
    pub observations: u32,
}

/// Drives many solves concurrently through one engine instance.
pub struct Runner {
    host: EngineHost,
    options: RunnerOptions,
    engines: Mutex<Engines>,
    next_id: AtomicU64,
    engine_calls: AtomicU64,
    engine_ns: AtomicU64,
    checkpoints: AtomicU64,
    checkpoint_ns: AtomicU64,
    recoveries: AtomicU64,
}

/// The instance and the solves inside it.
struct Engines {
    instance: EngineInstance,
    solves: HashMap<u64, Slot>,
    /// With adaptive polling: one model per captcha type in the current instance, with its text
    /// form after its latest change (a replacement instance's model continues from it, so a trap
    /// loses no observation).
    times: BTreeMap<String, Model>,
}

/// A captcha type's solve-times model: its handle in the current instance and its text form.
struct Model {
    handle: ResourceAny,
    text: String,
}

/// An in-flight solve: its handle in the current instance and what is needed to restore it
/// (the snapshot's base, kept once, and its latest state).
struct Slot {
    handle: ResourceAny,
    base: String,
    checkpoint: String,
    key: String,
}

impl Runner {
    /// A runner with one fresh instance of `host`'s component.
    pub fn new(host: EngineHost, options: RunnerOptions) -> Result<Runner> {
        let instance = host.instantiate(options.max_memory)?;
        Ok(Runner {
            host,
            options,
            engines: Mutex::new(Engines { instance, solves: HashMap::new(), times: BTreeMap::new() }),
            next_id: AtomicU64::new(1),
            engine_calls: AtomicU64::new(0),
            engine_ns: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            checkpoint_ns: AtomicU64::new(0),
            recoveries: AtomicU64::new(0),
        })
    }

    /// The clock solves run on.
    pub fn clock(&self) -> Clock {
        self.options.clock
    }

    /// A thread gate for `plan_threads - reserve` concurrent solves, decided by the engine.
    pub fn gate(&self, plan_threads: u64, reserve: u64) -> Result<Result<Gate, Failure>> {
        Gate::new(&self.host, plan_threads, reserve)
    }

    /// Counters so far.
    pub fn stats(&self) -> RunnerStats {
        RunnerStats {
            engine_calls: self.engine_calls.load(Ordering::Relaxed),
            engine_ns: self.engine_ns.load(Ordering::Relaxed),
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
            checkpoint_ns: self.checkpoint_ns.load(Ordering::Relaxed),
            recoveries: self.recoveries.load(Ordering::Relaxed),
        }
    }

    /// The engine instance's linear memory in bytes, and how many solves are in it.
    pub fn memory(&self) -> (usize, usize) {
        let engines = self.lock();
        (engines.instance.memory_bytes(), engines.solves.len())
    }

    /// Makes the current instance trap on its next memory growth (for recovery tests).
    pub fn freeze_memory(&self) {
        self.lock().instance.freeze_memory();
    }

    /// Runs one solve to its end: validates and creates it in the engine, then sends what it
    /// asks, sleeps as long as it says, and returns its terminal output. An `Err` is a host
    /// problem (the engine could not be instantiated, or reported host misuse), never an API
    /// failure: those are in [`SolveReport::outcome`].
    ///
    /// With [`RunnerOptions::adaptive`], the solve is created with its captcha type's model, and
    /// a solved solve is observed into it.
    pub async fn solve(&self, task_json: &str, key: &str, config: &Config) -> Result<SolveReport> {
        let kind = if self.options.adaptive { task_type(task_json) } else { None };
        let id = match self.register(task_json, key, config, kind.as_deref())? {
            Ok(id) => id,
            Err(failure) => return Ok(SolveReport { outcome: Err(failure), requests: 0 }),
        };
        let result = self.drive(id).await;
        let mut engines = self.lock();
        if let Some(slot) = engines.solves.remove(&id) {
            // Dropping can only fail if the instance trapped; then the handle is gone anyway.
            let _ = engines.instance.drop_solve(slot.handle);
        }
        if let (Some(kind), Ok(SolveReport { outcome: Ok(solution), .. })) = (&kind, &result) {
            let started = Instant::now();
            self.retrying(&mut engines, |engines| {
                let Some(model) = engines.times.get_mut(kind.as_str()) else { return Ok(()) };
                if engines.instance.times_observe(model.handle, solution)? {
                    model.text = engines.instance.times_to_text(model.handle)?;
                }
                Ok(())
            })?;
            self.count(started, &self.engine_calls, &self.engine_ns);
        }
        result
    }

    /// Loads a captcha type's solve-times model from its text form (as [`Self::solve_times`]
    /// gives it), replacing any the runner has; a model of another type is refused as
    /// `invalid`. Used only with [`RunnerOptions::adaptive`].
    pub fn set_solve_times(&self, task_type: &str, text: &str) -> Result<Result<(), SolveTimesError>> {
        let mut engines = self.lock();
        self.retrying(&mut engines, |engines| {
            let handle = match engines.instance.times_from_text(text)? {
                Ok(handle) => handle,
                Err(error) => return Ok(Err(error)),
            };
            let of = engines.instance.times_task_type(handle)?;
            if of != task_type {
                engines.instance.drop_times(handle)?;
                return Ok(Err(SolveTimesError::Invalid(format!(
                    "a model of `{of}` was given for captcha type `{task_type}`"
                ))));
            }
            let model = Model { handle, text: text.to_owned() };
            if let Some(old) = engines.times.insert(task_type.to_owned(), model) {
                engines.instance.drop_times(old.handle)?;
            }
            Ok(Ok(()))
        })
    }

    /// Every captcha type's solve-times model in its text form (versioned JSON under 1 KiB:
    /// counts and times, never a key or a token), to save and give a later runner with
    /// [`Self::set_solve_times`].
    pub fn solve_times(&self) -> BTreeMap<String, String> {
        self.lock().times.iter().map(|(kind, model)| (kind.clone(), model.text.clone())).collect()
    }

    /// What each captcha type's model gives a new solve now.
    pub fn first_waits(&self) -> Result<BTreeMap<String, FirstWait>> {
        let mut engines = self.lock();
        self.retrying(&mut engines, |engines| {
            let mut waits = BTreeMap::new();
            for (kind, model) in &engines.times {
                let first_wait_ms = engines.instance.times_first_wait_ms(model.handle)?;
                let observations = engines.instance.times_observations(model.handle)?;
                waits.insert(kind.clone(), FirstWait { first_wait_ms, observations });
            }
            Ok(waits)
        })
    }

    /// Creates a solve and keeps its first checkpoint, in one step under the lock.
    /// With `kind` (adaptive polling), the solve is created with that type's model, made empty
    /// on first use.
    fn register(
        &self,
        task_json: &str,
        key: &str,
        config: &Config,
        kind: Option<&str>,
    ) -> Result<Result<u64, Failure>> {
        let now = self.options.clock.now_ms();
        let checkpoints = self.options.checkpoints;
        let mut engines = self.lock();
        let started = Instant::now();
        let created = self.retrying(&mut engines, |engines| {
            let times = match kind {
                Some(kind) => model(engines, kind)?,
                None => None,
            };
            let created = match times {
                Some(times) => engines.instance.create_with_times(task_json, key, config, now, times)?,
                None => engines.instance.create(task_json, key, config, now)?,
            };
            let handle = match created {
                Ok(handle) => handle,
                Err(failure) => return Ok(Err(failure)),
            };
            let (base, checkpoint) = if checkpoints {
                (engines.instance.snapshot_base(handle)?, engines.instance.snapshot_state(handle)?)
            } else {
                Default::default()
            };
            Ok(Ok((handle, base, checkpoint)))
        });
        self.count(started, &self.engine_calls, &self.engine_ns);
        Ok(created?.map(|(handle, base, checkpoint)| {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            engines.solves.insert(id, Slot { handle, base, checkpoint, key: key.to_owned() });
            id
        }))
    }

    async fn drive(&self, id: u64) -> Result<SolveReport> {
        let clock = self.options.clock;
        let misuse = |m: Misuse| anyhow!("engine reported host misuse: {m:?}");
        let mut requests = 0;
        let mut output =
            self.call(id, |instance, solve| instance.poll_output(solve, clock.now_ms()))?.map_err(misuse)?;
        loop {
            match output {
                Output::Send(request) => {
                    clock.sleep_until(request.at).await;
                    requests += 1;
                    let fed = match self.options.http.send(&request).await {
                        Ok(response) => self.call(id, |instance, solve| {
                            instance.handle_response(solve, clock.now_ms(), request.id, &response)
                        })?,
                        Err(error) => self.call(id, |instance, solve| {
                            instance.handle_transport_error(solve, clock.now_ms(), request.id, error)
                        })?,
                    };
                    output = fed.map_err(misuse)?;
                    if matches!(output, Output::Send(_)) {
                        self.checkpoint(id)?;
                    }
                }
                Output::Solved(solution) => return Ok(SolveReport { outcome: Ok(solution), requests }),
                Output::Failed(failure) => return Ok(SolveReport { outcome: Err(failure), requests }),
            }
        }
    }

    /// Asks the plan's threads through the engine's account functions.
    pub async fn threads_info(&self, key: &str, config: &Config) -> Result<Result<ThreadsInfo, Failure>> {
        let request = match self.with_instance(|instance| instance.threads_info_request(key, config))? {
            Ok(request) => request,
            Err(failure) => return Ok(Err(failure)),
        };
        let reply = self.options.http.send(&request).await;
        self.with_instance(|instance| instance.parse_threads_info(&reply))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Engines> {
        self.engines.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A call that needs no solve; retried once on a fresh instance after a trap.
    fn with_instance<T>(&self, f: impl Fn(&mut EngineInstance) -> wasmtime::Result<T>) -> Result<T> {
        let mut engines = self.lock();
        let started = Instant::now();
        let result = self.retrying(&mut engines, |engines| f(&mut engines.instance));
        self.count(started, &self.engine_calls, &self.engine_ns);
        result
    }

    /// A call on solve `id`; after a trap, every solve is restored and the call is retried once.
    fn call<T>(&self, id: u64, f: impl Fn(&mut EngineInstance, ResourceAny) -> wasmtime::Result<T>) -> Result<T> {
        let mut engines = self.lock();
        let started = Instant::now();
        let result = self.retrying(&mut engines, |engines| {
            let handle =
                engines.solves.get(&id).map(|slot| slot.handle).ok_or_else(|| wasmtime::Error::msg("unknown solve"))?;
            f(&mut engines.instance, handle)
        });
        self.count(started, &self.engine_calls, &self.engine_ns);
        result
    }

    /// Keeps the solve's snapshot state after a change (no-op when checkpoints are off); the base
    /// was kept at creation.
    fn checkpoint(&self, id: u64) -> Result<()> {
        if !self.options.checkpoints {
            return Ok(());
        }
        let mut engines = self.lock();
        let started = Instant::now();
        let snapshot = self.retrying(&mut engines, |engines| {
            let handle =
                engines.solves.get(&id).map(|slot| slot.handle).ok_or_else(|| wasmtime::Error::msg("unknown solve"))?;
            engines.instance.snapshot_state(handle)
        })?;
        engines.solves.get_mut(&id).context("unknown solve")?.checkpoint = snapshot;
        self.count(started, &self.checkpoints, &self.checkpoint_ns);
        Ok(())
    }

    /// Runs `f`; if the instance traps, replaces it (restoring every solve) and runs `f` once more.
    fn retrying<T>(&self, engines: &mut Engines, mut f: impl FnMut(&mut Engines) -> wasmtime::Result<T>) -> Result<T> {
        match f(engines) {
            Ok(value) => Ok(value),
            Err(trap) => {
                self.recover(engines).with_context(|| format!("recovering from: {trap:#}"))?;
                f(engines)
                    .map_err(anyhow::Error::from)
                    .with_context(|| format!("the engine trapped again on a fresh instance (first: {trap:#})"))
            }
        }
    }

    fn count(&self, started: Instant, calls: &AtomicU64, ns: &AtomicU64) {
        calls.fetch_add(1, Ordering::Relaxed);
        ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// Replaces a trapped instance and restores every solve-times model from its latest text and
    /// every in-flight solve from its checkpoint.
    fn recover(&self, engines: &mut Engines) -> Result<()> {
        self.recoveries.fetch_add(1, Ordering::Relaxed);
        engines.instance = self.host.instantiate(self.options.max_memory)?;
        for model in engines.times.values_mut() {
            let restored = engines.instance.times_from_text(&model.text)?;
            model.handle = restored.map_err(|e| anyhow!("restoring a solve-times model failed: {e:?}"))?;
        }
        for slot in engines.solves.values_mut() {
            if slot.checkpoint.is_empty() {
                return Err(anyhow!("a solve has no checkpoint yet (or checkpoints are off); it cannot be restored"));
            }
            let restored = engines.instance.restore_parts(&slot.base, &slot.checkpoint, &slot.key)?;
            slot.handle = restored.map_err(|e| anyhow!("restoring a solve failed: {e:?}"))?;
        }
        Ok(())
    }
}

/// The `type` of a task's JSON, if it has one (the engine judges the rest).
fn task_type(task_json: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(task_json).ok()?;
    value.get("type")?.as_str().map(str::to_owned)
}

/// The model of captcha type `kind` in the current instance, made empty on first use; `None`
/// for a type the engine does not know (it then refuses the task itself).
fn model(engines: &mut Engines, kind: &str) -> wasmtime::Result<Option<ResourceAny>> {
    if let Some(model) = engines.times.get(kind) {
        return Ok(Some(model.handle));
    }
    let Ok(handle) = engines.instance.times_create(kind)? else { return Ok(None) };
    let text = engines.instance.times_to_text(handle)?;
    engines.times.insert(kind.to_owned(), Model { handle, text });
    Ok(Some(handle))
}
