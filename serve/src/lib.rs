//! A local Spin host: serves one spin-sdk 7 HTTP component (`wasi:http/handler@0.3.0`) the way
//! Spin ≥ 4.1 would, for tests and local runs on a machine without the Spin CLI (the
//! `captchaai-serve` binary; `scripts/run.sh` uses it when no Spin CLI is present).
//!
//! * wasmtime with component-model async; WASI p2 (Rust std's imports) and p3; wasi-http p3.
//! * `spin:variables@3.0.0`: values from [`ServeConfig::variables`] (flags) over
//!   `SPIN_VARIABLE_<NAME>` entries of [`ServeConfig::env`], or, with a manifest, exactly the
//!   component's `[component.NAME.variables]` templates resolved against them and `[variables]`
//!   defaults. Values are never printed.
//! * `wasi:keyvalue/{store,atomics,batch}@0.2.0-draft2` (as Spin 4.1) and `spin:key-value@3.0.0`:
//!   the `default` store, shared by all requests: in memory, SQLite or Redis ([`KvBackend`],
//!   [`kv::KvStore`]); increment and compare-and-swap are atomic across processes.
//! * `allowed_outbound_hosts` enforced on every outbound request (`HttpRequestDenied`, logged
//!   with scheme, host and port only).
//! * hyper HTTP/1.1 on [`ServeConfig::listen`], one task per connection; the component is
//!   compiled once (with an optional on-disk cache), pre-instantiated once, and every request
//!   gets a fresh `Store` and instance ([`Allocation`]: pooled by default). Request and response
//!   bodies are streamed. A guest error or trap gives a JSON 500 and a log line (with variable
//!   values redacted); a full instance pool gives a JSON 503.
//! * Hardening ([`Limits`]): header-read timeout, body idle timeout and size limit, a
//!   per-request deadline enforced with epoch interruption (a guest stuck in a loop is trapped
//!   and its instance freed), a connection limit, JSON bodies (`{"code","class":"host",
//!   "message","retry_after_s"}`) for the host's own 413/414/431/500/503, and a graceful
//!   shutdown ([`Server::shutdown`]). HTTP/1.0 clients get `Content-Length` or a
//!   close-delimited body (hyper). `HEAD` goes to the guest like any method (as in Spin; the edge
//!   app answers it for its GET routes; hyper never sends a body for it).
//!
//! Differences from Spin: every route goes to the one component (no `[[trigger.http]]` routing;
//! the guest sees `spin-matched-route: /...`); no `self` requests, no CIDR ranges in
//! `allowed_outbound_hosts`, key-value stores other than `default` are not supported;
//! `wasi:keyvalue` `list-keys` returns all keys at once; an
//! instance serves exactly one request (Spin 4 may reuse an instance for several); outbound
//! requests open a new connection each time.

pub mod cli;
mod keyvalue;
pub mod kv;
pub mod manifest;
mod net;
pub mod outbound;
mod spin;
pub mod variables;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

pub use kv::{KvBackend, KvStore};
pub use manifest::Manifest;
pub use outbound::AllowedHosts;
pub use variables::{ComponentVariables, Redactor};

use net::Phase;
use outbound::OutboundHooks;
use spin::KvAccess;

/// How to serve a component. Build with [`ServeConfig::new`] and adjust the fields. `Debug`
/// shows variable names, never values.
#[derive(Clone)]
pub struct ServeConfig {
    /// The component (`.wasm`). `None`: the manifest component's `source`.
    pub component: Option<PathBuf>,
    /// Address to listen on (port 0 = any free port). Default `127.0.0.1:3000`.
    pub listen: SocketAddr,
    /// Application variables given as flags (`--variable name=value`); they win over `env`.
    pub variables: BTreeMap<String, String>,
    /// The environment `SPIN_VARIABLE_<NAME>` entries are read from (other entries are ignored).
    /// [`ServeConfig::new`] fills it from the process environment.
    pub env: BTreeMap<String, String>,
    /// A spin.toml: the component's variables, `allowed_outbound_hosts`, `key_value_stores` and
    /// (when [`ServeConfig::component`] is `None`) `source` come from it.
    pub manifest: Option<PathBuf>,
    /// Which `[component.NAME]` of the manifest (`None`: the only one).
    pub component_name: Option<String>,
    /// Where the `default` key-value store lives.
    pub kv: KvBackend,
    /// Allowed outbound destinations (`scheme://host[:port]` patterns, see [`AllowedHosts`]), in
    /// addition to the manifest's.
    pub allowed_outbound: Vec<String>,
    /// Directory for compiled components (`None`: compile at every start).
    pub cache_dir: Option<PathBuf>,
    /// Whether the guest's stdout/stderr go to this process's (like `spin up`); otherwise they
    /// are discarded.
    pub inherit_stdio: bool,
    /// How instances are allocated (pooled by default).
    pub allocation: Allocation,
    /// Timeouts and size limits.
    pub limits: Limits,
}

/// Timeouts and limits of the HTTP front end. Requests over a limit get a JSON error from the
/// host and never reach the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A connection must deliver a whole request head within this (else it is closed).
    pub header_read_timeout: Duration,
    /// Longest pause between two chunks of a request body (the guest then sees a read error).
    pub body_timeout: Duration,
    /// A request's whole life: a guest that has not answered by then is interrupted (epoch
    /// interruption, also inside a busy loop), its instance freed, and the client gets a JSON
    /// 503 (`deadline_exceeded`); a response still streaming is cut off.
    pub request_timeout: Duration,
    /// Connections served at once; more get a JSON 503 and are closed.
    pub max_connections: usize,
    /// Largest request body: a larger `Content-Length` gets 413; a longer chunked body is cut
    /// off (the guest sees an error).
    pub max_body_bytes: u64,
    /// Longest request target (path and query): 414 beyond.
    pub max_uri_bytes: usize,
    /// Most request header bytes (names + values) and headers (100): 431 beyond.
    pub max_header_bytes: usize,
    /// On shutdown, how long in-flight requests may still run before they get a JSON 503.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    /// 10 s head, 30 s body pause, 60 s per request (the edge's longest wait is 25 s plus its
    /// upstream timeout), 4,096 connections, 16 MiB body, 8 KiB target, 64 KiB headers, 10 s
    /// shutdown grace.
    fn default() -> Limits {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            max_connections: 4_096,
            max_body_bytes: 16 << 20,
            max_uri_bytes: 8 << 10,
            max_header_bytes: 64 << 10,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Most request headers (431 beyond).
const MAX_HEADERS: usize = 100;

/// How often the engine's epoch advances: a running guest yields to the scheduler this often and
/// is checked against its deadline.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How wasmtime allocates instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// wasmtime's pooling allocator: instance and memory slots reserved once and reused, which
    /// makes instantiation cheaper (about 40% more requests per second for a hello component).
    /// At most `max_instances` requests run at once; more get `503` with `Retry-After: 1`. Each
    /// instance's linear memory is capped at `max_memory_bytes`. If the component does not fit
    /// the pool, the server falls back to [`Allocation::OnDemand`] (with a warning).
    Pooling {
        /// Concurrent instances (= requests in flight).
        max_instances: u32,
        /// Linear memory cap per instance, bytes.
        max_memory_bytes: usize,
    },
    /// Allocate every instance on demand: no cap on concurrency or memory.
    OnDemand,
}

impl Default for Allocation {
    /// Pooling, 1,000 instances of at most 512 MiB each.
    fn default() -> Allocation {
        Allocation::Pooling { max_instances: 1_000, max_memory_bytes: 512 << 20 }
    }
}

impl fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeConfig")
            .field("component", &self.component)
            .field("listen", &self.listen)
            .field("variables", &self.variables.keys().collect::<Vec<_>>())
            .field("env", &self.env.keys().filter(|k| k.starts_with(variables::ENV_PREFIX)).collect::<Vec<_>>())
            .field("manifest", &self.manifest)
            .field("component_name", &self.component_name)
            .field("kv", &self.kv)
            .field("allowed_outbound", &self.allowed_outbound)
            .field("cache_dir", &self.cache_dir)
            .field("inherit_stdio", &self.inherit_stdio)
            .field("allocation", &self.allocation)
            .field("limits", &self.limits)
            .finish()
    }
}

impl ServeConfig {
    /// Serves `component` on 127.0.0.1:3000 with variables from the process environment, an
    /// in-memory store, no outbound access, no compile cache, guest stdio inherited.
    pub fn new(component: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            component: Some(component.into()),
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            variables: BTreeMap::new(),
            env: std::env::vars().filter(|(k, _)| k.starts_with(variables::ENV_PREFIX)).collect(),
            manifest: None,
            component_name: None,
            kv: KvBackend::Memory,
            allowed_outbound: Vec::new(),
            cache_dir: None,
            inherit_stdio: true,
            allocation: Allocation::default(),
            limits: Limits::default(),
        }
    }
}

/// How the component was loaded.
#[derive(Clone, Copy, Debug)]
pub struct LoadStats {
    /// Compiled now (`false`: deserialized from the cache).
    pub compiled: bool,
    /// Time to compile or deserialize, link and pre-instantiate.
    pub duration: Duration,
}

/// What every request's store can see: resolved once at start.
struct Shared {
    variables: ComponentVariables,
    kv: KvStore,
    kv_access: KvAccess,
    allowed: Arc<AllowedHosts>,
    redactor: Redactor,
    inherit_stdio: bool,
}

/// Per-request store data.
pub(crate) struct HostState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: OutboundHooks,
    shared: Arc<Shared>,
    open_stores: usize,
}

impl HostState {
    fn new(shared: Arc<Shared>) -> HostState {
        let mut wasi = WasiCtx::builder();
        if shared.inherit_stdio {
            wasi.inherit_stdout().inherit_stderr();
        }
        HostState {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: OutboundHooks { allowed: shared.allowed.clone() },
            shared,
            open_stores: 0,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

/// The compiled component and everything requests share.
struct App {
    engine: wasmtime::Engine,
    pre: ServicePre<HostState>,
    shared: Arc<Shared>,
    addr: SocketAddr,
    limits: Limits,
}

/// A running server. Dropping it stops accepting connections (like [`Server::shutdown`] without
/// waiting).
pub struct Server {
    app: Arc<App>,
    load: LoadStats,
    phase: watch::Sender<Phase>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Stops the epoch ticker thread.
    ticker_stop: Arc<AtomicBool>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.app.addr)
            .field("variables", &self.app.shared.variables)
            .field("allowed_outbound", &self.app.shared.allowed)
            .field("load", &self.load)
            .finish()
    }
}

impl Server {
    /// Loads the component, resolves variables and allowed hosts, opens the key-value backend
    /// and starts listening. Errors (bad flags, manifest, component, address in use) name what is
    /// wrong and never contain variable values.
    pub async fn start(cfg: ServeConfig) -> anyhow::Result<Server> {
        let started = Instant::now();
        for name in cfg.variables.keys() {
            variables::validate_name(name).map_err(anyhow::Error::msg)?;
        }
        let provided = provided_variables(&cfg);
        let (component_path, vars, mut allowed, kv_access) = match &cfg.manifest {
            Some(path) => {
                let manifest = Manifest::load(path)?;
                let resolved = manifest.resolve(cfg.component_name.as_deref(), &provided)?;
                if let Some(label) = resolved.key_value_stores.iter().find(|l| *l != spin::DEFAULT_STORE) {
                    bail!(
                        "[component.{}] key_value_stores lists {label:?}: this host only provides the `default` store",
                        resolved.id
                    );
                }
                let component = cfg.component.clone().or(resolved.source).with_context(|| {
                    format!("[component.{}] has no local `source`; pass the component path", resolved.id)
                })?;
                (
                    component,
                    resolved.variables,
                    resolved.allowed_outbound_hosts,
                    KvAccess::Listed(resolved.key_value_stores),
                )
            }
            None => {
                if cfg.component_name.is_some() {
                    bail!("a component name needs a manifest");
                }
                let component = cfg.component.clone().context("no component given (and no manifest)")?;
                (component, ComponentVariables::new(provided), Vec::new(), KvAccess::DefaultOnly)
            }
        };
        allowed.extend(cfg.allowed_outbound.iter().cloned());
        let allowed = AllowedHosts::parse(&allowed)?;
        let kv = KvStore::open(&cfg.kv).await?;

        let shared = Arc::new(Shared {
            redactor: vars.redactor(),
            variables: vars,
            kv,
            kv_access,
            allowed: Arc::new(allowed),
            inherit_stdio: cfg.inherit_stdio,
        });
        let (engine, pre, compiled) = load_blocking(&component_path, cfg.cache_dir.clone(), cfg.allocation).await?;
        // Instantiate once now: proves the component fits the instance pool (and fails early on
        // instantiation errors). A component that does not fit is served with on-demand
        // allocation instead.
        let (engine, pre, compiled) = match (cfg.allocation, probe(&engine, &pre, &shared).await) {
            (_, Ok(())) => (engine, pre, compiled),
            (Allocation::Pooling { .. }, Err(e)) => {
                eprintln!("serve: the component does not fit the instance pool ({e:#}); using on-demand allocation");
                let (engine, pre, compiled) =
                    load_blocking(&component_path, cfg.cache_dir.clone(), Allocation::OnDemand).await?;
                probe(&engine, &pre, &shared).await?;
                (engine, pre, compiled)
            }
            (Allocation::OnDemand, Err(e)) => return Err(e),
        };

        let listener = TcpListener::bind(cfg.listen).await.with_context(|| format!("listening on {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(engine.clone(), ticker_stop.clone());
        let app = Arc::new(App { engine, pre, shared, addr, limits: cfg.limits });
        let (phase, phase_rx) = watch::channel(Phase::Running);
        let task = tokio::spawn(accept_loop(listener, app.clone(), phase_rx));
        let load = LoadStats { compiled, duration: started.elapsed() };
        Ok(Server { app, load, phase, task: Some(task), ticker_stop })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.app.addr
    }

    /// `http://ADDR` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.app.addr)
    }

    /// A copy of the `default` key-value store (for tests).
    pub async fn kv_snapshot(&self) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
        Ok(self.app.shared.kv.snapshot().await?)
    }

    /// The `default` key-value store itself.
    pub fn kv(&self) -> &KvStore {
        &self.app.shared.kv
    }

    /// How the component was loaded.
    pub fn load_stats(&self) -> LoadStats {
        self.load
    }

    /// The variable names the component can read (never the values).
    pub fn variable_names(&self) -> Vec<String> {
        self.app.shared.variables.names().map(str::to_owned).collect()
    }

    /// The allowed outbound destinations in effect.
    pub fn allowed_outbound(&self) -> &AllowedHosts {
        &self.app.shared.allowed
    }

    /// Graceful shutdown: stops accepting and closes idle connections at once; requests in
    /// flight may finish within [`Limits::shutdown_grace`], then those still waiting for their
    /// response get a JSON 503 (`shutting_down`) and the rest are cut off. Returns when every
    /// connection is closed.
    pub async fn shutdown(self) {
        let grace = self.app.limits.shutdown_grace;
        self.shutdown_with(tokio::time::sleep(grace)).await;
    }

    /// [`Server::shutdown`], with the grace ending when `grace` completes (or the connections
    /// are all closed, whichever comes first).
    async fn shutdown_with(mut self, grace: impl Future<Output = ()>) {
        self.phase.send_replace(Phase::Draining);
        let Some(mut task) = self.task.take() else { return };
        tokio::select! {
            _ = &mut task => return,
            _ = grace => {}
        }
        self.phase.send_replace(Phase::Stopped);
        let _ = task.await;
    }

    /// Serves until SIGINT (Ctrl-C) or SIGTERM, then shuts down gracefully; a second signal
    /// ends the grace period at once.
    pub async fn run_until_signal(self) -> anyhow::Result<()> {
        wait_for_signal().await?;
        eprintln!(
            "serve: stopping: in-flight requests have {} s to finish (signal again to stop now)",
            self.app.limits.shutdown_grace.as_secs()
        );
        let grace = self.app.limits.shutdown_grace;
        self.shutdown_with(async move {
            tokio::select! {
                _ = tokio::time::sleep(grace) => {}
                _ = wait_for_signal() => {}
            }
        })
        .await;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.phase.send_replace(Phase::Stopped);
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// Advances `engine`'s epoch every [`EPOCH_TICK`] until `stop`.
fn spawn_epoch_ticker(engine: wasmtime::Engine, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("serve-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })
        .expect("spawning the epoch thread");
}

/// A store for one request: interrupted (trapped) at the first epoch check after `deadline`,
/// yielding to the scheduler at every tick before.
fn new_store(engine: &wasmtime::Engine, shared: &Arc<Shared>, deadline: Instant) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(shared.clone()));
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        Ok(if Instant::now() >= deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
    store
}

#[cfg(unix)]
async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await?;
    Ok(())
}

/// Application variables from the providers: flags over `SPIN_VARIABLE_*` environment entries.
fn provided_variables(cfg: &ServeConfig) -> BTreeMap<String, String> {
    let mut vars = variables::from_env(cfg.env.iter().map(|(k, v)| (k.as_str(), v.clone())));
    vars.extend(cfg.variables.iter().map(|(k, v)| (k.clone(), v.clone())));
    vars
}

/// The wasmtime engine configuration: component model with async, and the allocator.
fn engine(allocation: Allocation) -> anyhow::Result<wasmtime::Engine> {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    config.wasm_component_model_async(true);
    config.epoch_interruption(true);
    if let Allocation::Pooling { max_instances, max_memory_bytes } = allocation {
        // A Rust wasip2 component holds a handful of core instances and tables and one or two
        // memories; the totals leave room for that.
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(max_instances)
            .total_core_instances(max_instances.saturating_mul(8))
            .total_memories(max_instances.saturating_mul(2))
            .total_tables(max_instances.saturating_mul(8))
            .total_stacks(max_instances.saturating_mul(2))
            .max_memory_size(max_memory_bytes);
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    }
    Ok(wasmtime::Engine::new(&config)?)
}

/// [`load`] on the blocking pool (compiling takes a while).
async fn load_blocking(
    path: &Path,
    cache_dir: Option<PathBuf>,
    allocation: Allocation,
) -> anyhow::Result<(wasmtime::Engine, ServicePre<HostState>, bool)> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || load(&path, cache_dir.as_deref(), allocation))
        .await
        .context("the component loader panicked")?
}

/// One instantiation in a throwaway store.
async fn probe(engine: &wasmtime::Engine, pre: &ServicePre<HostState>, shared: &Arc<Shared>) -> anyhow::Result<()> {
    let mut store = new_store(engine, shared, Instant::now() + Duration::from_secs(60));
    pre.instantiate_async(&mut store).await.map_err(anyhow::Error::from).context("instantiating the component")?;
    Ok(())
}

/// Compiles (or loads from `cache_dir`) and pre-instantiates the component against the linker.
fn load(
    path: &Path,
    cache_dir: Option<&Path>,
    allocation: Allocation,
) -> anyhow::Result<(wasmtime::Engine, ServicePre<HostState>, bool)> {
    let engine = engine(allocation)?;
    let bytes = std::fs::read(path).with_context(|| format!("reading the component {}", path.display()))?;
    let cached = cache_dir.map(|dir| cache_path(dir, &engine, &bytes));
    let from_cache = match cached.as_deref().filter(|p| p.exists()) {
        // SAFETY: the file was written by `Component::serialize` of this wasmtime build (its name
        // holds the engine's compatibility hash and a hash of the component bytes), in a cache
        // directory the caller chose.
        Some(p) => unsafe { Component::deserialize_file(&engine, p) }.ok(),
        None => None,
    };
    let compiled = from_cache.is_none();
    let component = match from_cache {
        Some(component) => component,
        None => Component::new(&engine, &bytes)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("compiling {} (is it a wasm component?)", path.display()))?,
    };
    if let (Some(cache), true) = (&cached, compiled) {
        // A cache that cannot be written only costs the next start a compile.
        if let Err(e) = write_cache(cache, &component) {
            eprintln!("serve: cannot write the compile cache {}: {e:#}", cache.display());
        }
    }
    let mut linker = Linker::<HostState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi::p3::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    spin::add_to_linker(&mut linker)?;
    keyvalue::add_to_linker(&mut linker)?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("linking {}: it imports something this host does not provide", path.display()))?;
    let pre = ServicePre::new(pre).map_err(anyhow::Error::from).with_context(|| {
        format!("{} does not export wasi:http/handler@0.3.0 (is it a spin-sdk 7 HTTP component?)", path.display())
    })?;
    Ok((engine, pre, compiled))
}

fn cache_path(dir: &Path, engine: &wasmtime::Engine, bytes: &[u8]) -> PathBuf {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    "serve-p3-epoch".hash(&mut hasher);
    bytes.hash(&mut hasher);
    dir.join(format!("spin-component-{:016x}.cwasm", hasher.finish()))
}

fn write_cache(path: &Path, component: &Component) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, component.serialize()?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

async fn accept_loop(listener: TcpListener, app: Arc<App>, phase: watch::Receiver<Phase>) {
    let stop = phase.clone();
    net::accept_loop(listener, app.limits, phase, move |peer| {
        let (app, phase) = (app.clone(), stop.clone());
        hyper::service::service_fn(move |req| handle(app.clone(), req, peer, phase.clone()))
    })
    .await;
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type FrameResult = Result<Frame<Bytes>, BoxError>;

/// The response body: a fixed message, or the guest's body as the request task streams it.
pub(crate) enum ResponseBody {
    Fixed(Option<Bytes>),
    Streamed(mpsc::Receiver<FrameResult>),
}

impl hyper::body::Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<FrameResult>> {
        match self.get_mut() {
            ResponseBody::Fixed(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Streamed(rx) => rx.poll_recv(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ResponseBody::Fixed(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Fixed(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ResponseBody::Fixed(None) => SizeHint::with_exact(0),
            ResponseBody::Streamed(_) => SizeHint::default(),
        }
    }
}

/// A JSON error from the host itself: `{"code","class":"host","message","retry_after_s"}`
/// (the edge app's error shape), with `Retry-After` when `retry_after_s` is given.
fn host_error(status: StatusCode, code: &str, message: &str, retry_after_s: Option<u32>) -> Response<ResponseBody> {
    let body = serde_json::json!({
        "code": code,
        "class": "host",
        "message": message,
        "retry_after_s": retry_after_s,
    });
    let mut resp = Response::new(ResponseBody::Fixed(Some(Bytes::from(body.to_string()))));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(seconds) = retry_after_s {
        resp.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    resp
}

/// Every pooled instance is busy.
#[derive(Debug, thiserror::Error)]
#[error("every pooled instance is busy")]
struct PoolBusy;

/// How a request's guest task ended without (necessarily) having sent a response head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The guest answered (or its client went away).
    Done,
    /// The guest trapped or returned an error.
    Failed,
    /// Every pooled instance was busy.
    Busy,
    /// [`Limits::request_timeout`] passed.
    Deadline,
    /// The server stopped.
    Stopped,
}

impl Outcome {
    /// The response for a request whose guest never sent a head.
    fn response(self) -> Response<ResponseBody> {
        match self {
            Outcome::Done | Outcome::Failed => host_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the application failed to answer (see the server log)",
                None,
            ),
            Outcome::Busy => host_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "every instance of the application is busy",
                Some(1),
            ),
            Outcome::Deadline => host_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "deadline_exceeded",
                "the application did not answer within the request deadline",
                Some(1),
            ),
            Outcome::Stopped => {
                host_error(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is shutting down", Some(1))
            }
        }
    }
}

/// The host's checks before a request reaches the guest: target length (414), header count
/// and size (431), declared body size (413).
fn check_limits(limits: &Limits, req: &Request<Incoming>) -> Option<Response<ResponseBody>> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len())
        + req.uri().authority().map_or(0, |a| a.as_str().len());
    if target > limits.max_uri_bytes {
        let message = format!("the request target is longer than {} bytes", limits.max_uri_bytes);
        return Some(host_error(StatusCode::URI_TOO_LONG, "uri_too_long", &message, None));
    }
    let header_bytes: usize = req.headers().iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if req.headers().len() > MAX_HEADERS || header_bytes > limits.max_header_bytes {
        let message = format!("more than {MAX_HEADERS} request headers or {} bytes of them", limits.max_header_bytes);
        return Some(host_error(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large", &message, None));
    }
    let declared = req.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes) {
        let message = format!("the request body is larger than {} bytes", limits.max_body_bytes);
        let mut resp = host_error(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", &message, None);
        // The unread body cannot be skipped cheaply: close the connection after answering.
        resp.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return Some(resp);
    }
    None
}

/// The request body as the guest reads it: fails with `connection-read-timeout` after
/// [`Limits::body_timeout`] without data, and with `http-request-body-size` past
/// [`Limits::max_body_bytes`].
struct GuardedBody {
    inner: Incoming,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    read: u64,
    max: u64,
}

impl GuardedBody {
    fn new(inner: Incoming, limits: &Limits) -> GuardedBody {
        GuardedBody {
            inner,
            idle: limits.body_timeout,
            timer: Box::pin(tokio::time::sleep(limits.body_timeout)),
            read: 0,
            max: limits.max_body_bytes,
        }
    }
}

impl hyper::body::Body for GuardedBody {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, wasmtime_wasi_http::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.read = this.read.saturating_add(data.len() as u64);
                    if this.read > this.max {
                        return Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpRequestBodySize(Some(this.read)))));
                    }
                }
                let next = tokio::time::Instant::now() + this.idle;
                this.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(wasmtime_wasi_http::Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One HTTP request: runs the guest in its own task (which outlives this function while it
/// streams the body) and answers with its response head, or a JSON error from the host.
async fn handle(
    app: Arc<App>,
    req: Request<Incoming>,
    peer: SocketAddr,
    phase: watch::Receiver<Phase>,
) -> Result<Response<ResponseBody>, Infallible> {
    if let Some(resp) = check_limits(&app.limits, &req) {
        return Ok(resp);
    }
    let what = format!("{} {}", req.method(), req.uri().path());
    let limits = app.limits;
    let req = spin_request(req, app.addr, peer).map(|body| GuardedBody::new(body, &limits));
    let deadline = Instant::now() + limits.request_timeout;
    let (head_tx, head_rx) = oneshot::channel();
    let (body_tx, body_rx) = mpsc::channel(8);
    let task_app = app.clone();
    let mut task_phase = phase.clone();
    let guest = tokio::spawn(async move {
        let run = tokio::time::timeout_at(deadline.into(), run_guest(&task_app, req, head_tx, body_tx, deadline));
        tokio::select! {
            result = run => match result {
                Ok(Ok(())) => Outcome::Done,
                Ok(Err(e)) if e.downcast_ref::<PoolBusy>().is_some() => {
                    eprintln!("serve: {what}: all pooled instances are busy; answered 503");
                    Outcome::Busy
                }
                Ok(Err(e)) => {
                    let late = Instant::now() >= deadline;
                    let text = task_app.shared.redactor.redact(&format!("{e:#}"));
                    if late {
                        eprintln!("serve: {what}: interrupted at the request deadline: {text}");
                        Outcome::Deadline
                    } else {
                        eprintln!("serve: {what}: guest failed: {text}");
                        Outcome::Failed
                    }
                }
                Err(_elapsed) => {
                    eprintln!("serve: {what}: the request deadline ({} s) passed; instance dropped", limits.request_timeout.as_secs());
                    Outcome::Deadline
                }
            },
            _ = net::stopped(&mut task_phase) => Outcome::Stopped,
        }
    });
    let mut phase = phase;
    tokio::select! {
        head = head_rx => match head {
            Ok(head) => Ok(Response::from_parts(head, ResponseBody::Streamed(body_rx))),
            Err(_) => Ok(guest.await.unwrap_or(Outcome::Failed).response()),
        },
        _ = net::stopped(&mut phase) => Ok(Outcome::Stopped.response()),
    }
}

/// Gives the guest what Spin gives it: an absolute URI (`http://HOST/path?query`) and the
/// `spin-*` headers of a component mounted at `/...`.
fn spin_request<B>(req: Request<B>, local: SocketAddr, peer: SocketAddr) -> Request<B> {
    let (mut parts, body) = req.into_parts();
    let authority = parts
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<http::uri::Authority>().ok())
        .unwrap_or_else(|| {
            local.to_string().parse().unwrap_or_else(|_| http::uri::Authority::from_static("localhost"))
        });
    let path_and_query =
        parts.uri.path_and_query().cloned().unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    let path = path_and_query.path().to_owned();
    if let Ok(uri) =
        http::Uri::builder().scheme(http::uri::Scheme::HTTP).authority(authority).path_and_query(path_and_query).build()
    {
        let full = uri.to_string();
        parts.uri = uri;
        let headers = &mut parts.headers;
        let mut set = |name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), v);
            }
        };
        set("spin-full-url", &full);
        set("spin-path-info", &path);
        set("spin-matched-route", "/...");
        set("spin-raw-component-route", "/...");
        set("spin-component-route", "");
        set("spin-base-path", "/");
        set("spin-client-addr", &peer.to_string());
    }
    Request::from_parts(parts, body)
}

/// Instantiates the component in a fresh store (interrupted at `deadline`), calls its handler, sends the response head on
/// `head_tx` and streams the body into `body_tx` (all inside `run_concurrent`, which must keep
/// running while the guest writes its body). An `Err` is a guest failure to log.
async fn run_guest(
    app: &App,
    req: Request<GuardedBody>,
    head_tx: oneshot::Sender<http::response::Parts>,
    body_tx: mpsc::Sender<FrameResult>,
    deadline: Instant,
) -> anyhow::Result<()> {
    let mut store = new_store(&app.engine, &app.shared, deadline);
    let service = match app.pre.instantiate_async(&mut store).await {
        Ok(service) => service,
        // Every pooled instance is busy: the caller answers 503 (downcasts this error).
        Err(e) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
            return Err(anyhow::Error::new(PoolBusy));
        }
        Err(e) => return Err(anyhow::Error::from(e).context("instantiating the component")),
    };
    let (request, request_io) = wasmtime_wasi_http::p3::Request::from_http(&mut store.data_mut().hooks, req);
    store
        .run_concurrent(async move |accessor| -> anyhow::Result<()> {
            let response = match service
                .handle(accessor, request)
                .await
                .map_err(anyhow::Error::from)
                .context("the handler trapped")?
            {
                Ok(response) => response,
                Err(code) => bail!("the handler returned error {code:?}"),
            };
            let response = accessor
                .with(|mut access| response.into_http(&mut access, request_io))
                .map_err(anyhow::Error::from)
                .context("converting the response")?;
            let (head, mut body) = response.into_parts();
            if head_tx.send(head).is_err() {
                return Ok(()); // the client went away
            }
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(frame) => {
                        if body_tx.send(Ok(frame)).await.is_err() {
                            return Ok(()); // the client went away
                        }
                    }
                    Err(e) => {
                        let _ = body_tx.send(Err("the guest failed while writing the response body".into())).await;
                        bail!("response body: {e}");
                    }
                }
            }
            Ok(())
        })
        .await
        .map_err(anyhow::Error::from)
        .context("running the component")?
}
