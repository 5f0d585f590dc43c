//! Loading and instantiating the engine component with wasmtime, and typed calls into it.
//!
//! Every call returns `wasmtime::Result<_>`: an `Err` is a trap (the instance is then unusable and
//! must be replaced; see [`crate::Runner`]). The inner `Result` is the engine's own answer.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceAny};

/// The WIT world, with the component's types (`Config`, `Output`, `Failure`...) as Rust types
/// (generated; their contracts are the `///` docs in wit/engine.wit).
#[allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        world: "engine-component",
        path: "../wit",
    });
}

use bindings::{EngineComponent, EngineComponentPre, exports};

pub use exports::captchaai::engine::types::{
    Admission, Answer, Config, Failure, FailureClass, FailureOrigin, HttpRequest, HttpResponse, Misuse, Output,
    RequestBody, RequestKind, RestoreError, Solution, SolveTimesError, ThreadsInfo, TransportError,
};

/// The `endpoint` interface's types: reading CaptchaAI `in.php` / `res.php` requests and rendering
/// CaptchaAI's replies (their contracts are the `///` docs in wit/engine.wit).
pub mod endpoint {
    pub use super::exports::captchaai::engine::endpoint::{
        EndpointPath, EndpointReply, EndpointRequest, Header, HostRefusal, Param, Refusal, ReplyFormat, ResAction,
        ResRequest, SolveState, SubmitRequest, Upload,
    };
}

/// Every field unset: the engine's defaults (and the captcha type's timings).
impl Default for Config {
    fn default() -> Config {
        Config {
            base_url: None,
            request_timeout_ms: None,
            deadline_ms: None,
            initial_wait_ms: None,
            poll_interval_ms: None,
            max_submit_retries: None,
            max_poll_errors: None,
            unsolvable_retries: None,
            jitter_seed: None,
            max_jitter_ms: None,
            poll_cost_ms: None,
        }
    }
}

/// The engine component this crate was built with (`build.rs`: `$CAPTCHAAI_ENGINE_WASM`, else
/// `component/captchaai_engine.wasm` under `$CARGO_TARGET_DIR` or the workspace's `target/`).
pub static ENGINE_WASM: &[u8] = include_bytes!(env!("CAPTCHAAI_ENGINE_WASM_EMBEDDED"));

/// Live resource handles allowed per store: every in-flight solve holds one (two while a call
/// borrows it).
pub const MAX_HANDLES: usize = 4_000_000;

/// What loading the component cost.
#[derive(Clone, Copy, Debug)]
pub struct LoadStats {
    /// Whether the component was compiled (cold) rather than read from the cache.
    pub compiled: bool,
    /// How long loading took (reading, compiling or deserializing, pre-instantiating).
    pub duration: Duration,
}

/// A compiled engine component, ready to instantiate cheaply many times.
pub struct EngineHost {
    engine: wasmtime::Engine,
    pre: EngineComponentPre<HostState>,
    /// How the component was loaded.
    pub load: LoadStats,
}

/// Per-store host data: a memory cap and the memory in use (the component imports nothing).
pub struct HostState {
    max_memory: usize,
    memory: usize,
}

impl wasmtime::ResourceLimiter for HostState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            return Ok(false);
        }
        self.memory = desired;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

impl EngineHost {
    /// Loads the engine component embedded in this crate ([`ENGINE_WASM`]); see [`Self::from_bytes`].
    pub fn embedded(cache_dir: Option<&Path>) -> Result<EngineHost> {
        EngineHost::from_bytes(ENGINE_WASM, cache_dir)
    }

    /// Loads the engine component in the file `wasm`; see [`Self::from_bytes`].
    pub fn load(wasm: &Path, cache_dir: Option<&Path>) -> Result<EngineHost> {
        let bytes = std::fs::read(wasm).with_context(|| {
            format!("reading the engine component {} (build it with `cargo xtask component`)", wasm.display())
        })?;
        EngineHost::from_bytes(&bytes, cache_dir)
    }

    /// Compiles the component `bytes` or, when `cache_dir` holds a compiled copy made by this
    /// exact wasmtime build from these exact bytes, deserializes that (much faster).
    pub fn from_bytes(bytes: &[u8], cache_dir: Option<&Path>) -> Result<EngineHost> {
        let started = Instant::now();
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        // Calls here are synchronous; wasmtime's concurrency support (compiled in for `serve`)
        // would make each call ~40% slower (bench: canned solve 17.8 µs with it, 12.7 µs without).
        config.concurrency_support(false);
        let engine = wasmtime::Engine::new(&config)?;
        let cached = cache_dir.map(|dir| cache_path(dir, &engine, bytes));
        let (component, compiled) = match cached.as_deref().filter(|p| p.exists()) {
            // SAFETY: the file was written by `Component::serialize` of this wasmtime build (the
            // name includes the engine's compatibility hash and the component bytes' hash), in a
            // cache directory the caller controls.
            Some(path) => match unsafe { Component::deserialize_file(&engine, path) } {
                Ok(component) => (component, false),
                Err(_) => (Component::new(&engine, bytes)?, true),
            },
            None => (Component::new(&engine, bytes)?, true),
        };
        if let (Some(path), true) = (cached, compiled) {
            // Best effort: the component is compiled either way. Processes sharing a cold cache
            // each write their own temporary file (a shared name raced: one renamed it away
            // under the other, which then failed) and the last rename wins, whole.
            let _ = store_compiled(&path, &component);
        }
        let linker = Linker::new(&engine);
        let pre = EngineComponentPre::new(linker.instantiate_pre(&component)?)?;
        Ok(EngineHost { engine, pre, load: LoadStats { compiled, duration: started.elapsed() } })
    }

    /// A fresh instance with its own store (linear memory capped at `max_memory` bytes).
    pub fn instantiate(&self, max_memory: usize) -> Result<EngineInstance> {
        let mut store = Store::new(&self.engine, HostState { max_memory, memory: 0 });
        store.limiter(|state| state);
        // Every in-flight solve is a live handle; wasmtime's default cap is 100,000 per store.
        store.set_max_component_handles(MAX_HANDLES);
        let api = self.pre.instantiate(&mut store)?;
        Ok(EngineInstance { store, api })
    }
}

/// Writes `component`, compiled, to `path` atomically (a temporary file beside it, renamed).
fn store_compiled(path: &Path, component: &Component) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, &component.serialize()?)?;
    file.persist(path)?;
    Ok(())
}

fn cache_path(dir: &Path, engine: &wasmtime::Engine, bytes: &[u8]) -> PathBuf {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    bytes.hash(&mut hasher);
    dir.join(format!("captchaai_engine-{:016x}.cwasm", hasher.finish()))
}

/// One instance of the engine component. Solves are resources inside it.
pub struct EngineInstance {
    store: Store<HostState>,
    api: EngineComponent,
}

impl EngineInstance {
    /// `solve.create`.
    pub fn create(
        &mut self,
        task_json: &str,
        key: &str,
        config: &Config,
        now: u64,
    ) -> wasmtime::Result<Result<ResourceAny, Failure>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_create(&mut self.store, task_json, key, config, now)
    }

    /// `solve.create-with-times`: `create`, with the first wait the model `times` (a
    /// `solve-times` resource of this instance) gives.
    pub fn create_with_times(
        &mut self,
        task_json: &str,
        key: &str,
        config: &Config,
        now: u64,
        times: ResourceAny,
    ) -> wasmtime::Result<Result<ResourceAny, Failure>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_create_with_times(&mut self.store, task_json, key, config, now, times)
    }

    /// `solve-times.create`: an empty model of a captcha type.
    pub fn times_create(&mut self, task_type: &str) -> wasmtime::Result<Result<ResourceAny, SolveTimesError>> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_create(&mut self.store, task_type)
    }

    /// `solve-times.from-text`: a model from its text form.
    pub fn times_from_text(&mut self, text: &str) -> wasmtime::Result<Result<ResourceAny, SolveTimesError>> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_from_text(&mut self.store, text)
    }

    /// `solve-times.to-text`.
    pub fn times_to_text(&mut self, times: ResourceAny) -> wasmtime::Result<String> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_to_text(&mut self.store, times)
    }

    /// `solve-times.task-type`.
    pub fn times_task_type(&mut self, times: ResourceAny) -> wasmtime::Result<String> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_task_type(&mut self.store, times)
    }

    /// `solve-times.observations`.
    pub fn times_observations(&mut self, times: ResourceAny) -> wasmtime::Result<u32> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_observations(&mut self.store, times)
    }

    /// `solve-times.observe`: learns from a solved solve of the model's type; whether it was used.
    pub fn times_observe(&mut self, times: ResourceAny, solution: &Solution) -> wasmtime::Result<bool> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_observe(&mut self.store, times, solution)
    }

    /// `solve-times.first-wait-ms`: the first wait the model gives (`None`: the type's table).
    pub fn times_first_wait_ms(&mut self, times: ResourceAny) -> wasmtime::Result<Option<u64>> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_first_wait_ms(&mut self.store, times)
    }

    /// `solve-times.quantile-ms`.
    pub fn times_quantile_ms(&mut self, times: ResourceAny, permille: u32) -> wasmtime::Result<Option<u64>> {
        let api = self.api.captchaai_engine_engine().solve_times();
        api.call_quantile_ms(&mut self.store, times, permille)
    }

    /// `solve.restore`.
    pub fn restore(&mut self, snapshot: &str, key: &str) -> wasmtime::Result<Result<ResourceAny, RestoreError>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_restore(&mut self.store, snapshot, key)
    }

    /// `solve.poll-output`.
    pub fn poll_output(&mut self, solve: ResourceAny, now: u64) -> wasmtime::Result<Result<Output, Misuse>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_poll_output(&mut self.store, solve, now)
    }

    /// `solve.handle-response`.
    pub fn handle_response(
        &mut self,
        solve: ResourceAny,
        now: u64,
        id: u32,
        response: &HttpResponse,
    ) -> wasmtime::Result<Result<Output, Misuse>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_handle_response(&mut self.store, solve, now, id, response)
    }

    /// `solve.handle-transport-error`.
    pub fn handle_transport_error(
        &mut self,
        solve: ResourceAny,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> wasmtime::Result<Result<Output, Misuse>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_handle_transport_error(&mut self.store, solve, now, id, error)
    }

    /// `solution-json`: the solution as the JSON object a client gets.
    pub fn solution_json(&mut self, solution: &Solution) -> wasmtime::Result<String> {
        self.api.captchaai_engine_engine().call_solution_json(&mut self.store, solution)
    }

    /// `solve.snapshot-base`: the part of the snapshot that never changes.
    pub fn snapshot_base(&mut self, solve: ResourceAny) -> wasmtime::Result<String> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_snapshot_base(&mut self.store, solve)
    }

    /// `solve.snapshot-state`: the part that changes with each result.
    pub fn snapshot_state(&mut self, solve: ResourceAny) -> wasmtime::Result<String> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_snapshot_state(&mut self.store, solve)
    }

    /// `solve.restore-parts`.
    pub fn restore_parts(
        &mut self,
        base: &str,
        state: &str,
        key: &str,
    ) -> wasmtime::Result<Result<ResourceAny, RestoreError>> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_restore_parts(&mut self.store, base, state, key)
    }

    /// `solve.snapshot`.
    pub fn snapshot(&mut self, solve: ResourceAny) -> wasmtime::Result<String> {
        let api = self.api.captchaai_engine_engine().solve();
        api.call_snapshot(&mut self.store, solve)
    }

    /// Frees a solve resource.
    pub fn drop_solve(&mut self, solve: ResourceAny) -> wasmtime::Result<()> {
        solve.resource_drop(&mut self.store)
    }

    /// Frees a solve-times resource.
    pub fn drop_times(&mut self, times: ResourceAny) -> wasmtime::Result<()> {
        times.resource_drop(&mut self.store)
    }

    /// `is-fresh`.
    pub fn is_fresh(&mut self, solution: &Solution, now: u64, max_age_ms: u64) -> wasmtime::Result<bool> {
        self.api.captchaai_engine_engine().call_is_fresh(&mut self.store, solution, now, max_age_ms)
    }

    /// `account.threads-info-request`.
    pub fn threads_info_request(
        &mut self,
        key: &str,
        config: &Config,
    ) -> wasmtime::Result<Result<HttpRequest, Failure>> {
        self.api.captchaai_engine_account().call_threads_info_request(&mut self.store, key, config)
    }

    /// `account.parse-threads-info`.
    pub fn parse_threads_info(
        &mut self,
        reply: &Result<HttpResponse, TransportError>,
    ) -> wasmtime::Result<Result<ThreadsInfo, Failure>> {
        self.api.captchaai_engine_account().call_parse_threads_info(&mut self.store, reply)
    }

    /// `thread-gate.create`.
    pub fn gate_create(&mut self, plan_threads: u64, reserve: u64) -> wasmtime::Result<Result<ResourceAny, Failure>> {
        self.api.captchaai_engine_account().thread_gate().call_create(&mut self.store, plan_threads, reserve)
    }

    /// `thread-gate.enter`.
    pub fn gate_enter(&mut self, gate: ResourceAny) -> wasmtime::Result<(u64, Admission)> {
        self.api.captchaai_engine_account().thread_gate().call_enter(&mut self.store, gate)
    }

    /// `thread-gate.capacity`.
    pub fn gate_capacity(&mut self, gate: ResourceAny) -> wasmtime::Result<u64> {
        self.api.captchaai_engine_account().thread_gate().call_capacity(&mut self.store, gate)
    }

    /// `thread-gate.leave`: tickets admitted as a result (`None`: unknown ticket).
    pub fn gate_leave(&mut self, gate: ResourceAny, ticket: u64) -> wasmtime::Result<Option<Vec<u64>>> {
        self.api.captchaai_engine_account().thread_gate().call_leave(&mut self.store, gate, ticket)
    }

    /// `endpoint.read-request`: a CaptchaAI request read into a task or a question, or refused.
    pub fn read_request(
        &mut self,
        path: endpoint::EndpointPath,
        params: &[endpoint::Param],
        uploads: &[endpoint::Upload],
    ) -> wasmtime::Result<Result<endpoint::EndpointRequest, endpoint::Refusal>> {
        self.api.captchaai_engine_endpoint().call_read_request(&mut self.store, path, params, uploads)
    }

    /// `endpoint.read-format`: how a request asks to be answered (plain text where malformed).
    pub fn read_format(
        &mut self,
        path: endpoint::EndpointPath,
        params: &[endpoint::Param],
    ) -> wasmtime::Result<endpoint::ReplyFormat> {
        self.api.captchaai_engine_endpoint().call_read_format(&mut self.store, path, params)
    }

    /// `endpoint.render-submitted`.
    pub fn render_submitted(
        &mut self,
        format: endpoint::ReplyFormat,
        task_type: &str,
        id: &str,
    ) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_submitted(&mut self.store, format, task_type, id)
    }

    /// `endpoint.render-state`.
    pub fn render_state(
        &mut self,
        format: endpoint::ReplyFormat,
        task_type: &str,
        state: &endpoint::SolveState,
    ) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_state(&mut self.store, format, task_type, state)
    }

    /// `endpoint.render-states`.
    pub fn render_states(
        &mut self,
        format: endpoint::ReplyFormat,
        states: &[endpoint::SolveState],
    ) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_states(&mut self.store, format, states)
    }

    /// `endpoint.render-threads`.
    pub fn render_threads(
        &mut self,
        format: endpoint::ReplyFormat,
        info: ThreadsInfo,
    ) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_threads(&mut self.store, format, info)
    }

    /// `endpoint.render-balance`.
    pub fn render_balance(
        &mut self,
        format: endpoint::ReplyFormat,
        balance: f64,
    ) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_balance(&mut self.store, format, balance)
    }

    /// `endpoint.render-reported`.
    pub fn render_reported(&mut self, format: endpoint::ReplyFormat) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_reported(&mut self.store, format)
    }

    /// `endpoint.render-failure`.
    pub fn render_failure(
        &mut self,
        format: endpoint::ReplyFormat,
        failure: &Failure,
    ) -> wasmtime::Result<endpoint::EndpointReply> {
        self.api.captchaai_engine_endpoint().call_render_failure(&mut self.store, format, failure)
    }

    /// `endpoint.render-refusal`.
    pub fn render_refusal(
        &mut self,
        format: Option<endpoint::ReplyFormat>,
        refusal: endpoint::HostRefusal,
    ) -> wasmtime::Result<endpoint::Refusal> {
        self.api.captchaai_engine_endpoint().call_render_refusal(&mut self.store, format, refusal)
    }

    /// `endpoint.report-request`.
    pub fn report_request(
        &mut self,
        key: &str,
        config: &Config,
        task_id: &str,
        good: bool,
    ) -> wasmtime::Result<Result<HttpRequest, Failure>> {
        self.api.captchaai_engine_endpoint().call_report_request(&mut self.store, key, config, task_id, good)
    }

    /// `endpoint.parse-report`.
    pub fn parse_report(
        &mut self,
        reply: &Result<HttpResponse, TransportError>,
    ) -> wasmtime::Result<Result<(), Failure>> {
        self.api.captchaai_engine_endpoint().call_parse_report(&mut self.store, reply)
    }

    /// The engine's linear memory in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().memory
    }

    /// Caps the linear memory at its current size, so the next growth fails and the guest traps
    /// (out of memory). Tests use it to exercise trap recovery.
    pub fn freeze_memory(&mut self) {
        let state = self.store.data_mut();
        state.max_memory = state.memory;
    }
}
