//! A local Spin host: serves one spin-sdk 7 HTTP component (`wasi:http/handler@0.3.0`) the way
//! Spin ≥ 4.1 would, for tests and local runs on a machine without the Spin CLI.
//!
//! * wasmtime with component-model async; WASI p2 (Rust std's imports) and p3; wasi-http p3.
//! * `spin:variables@3.0.0`: values from [`ServeConfig::variables`] (flags) over
//!   `SPIN_VARIABLE_<NAME>` entries of [`ServeConfig::env`], or, with a manifest, exactly the
//!   component's `[component.NAME.variables]` templates resolved against them and `[variables]`
//!   defaults. Values are never printed.
//! * `spin:key-value@3.0.0`: the `default` store, shared by all requests, in memory or in a JSON
//!   file ([`KvBackend`]).
//! * `allowed_outbound_hosts` enforced on every outbound request (`HttpRequestDenied`, logged
//!   with scheme, host and port only).
//! * hyper HTTP/1.1 on [`ServeConfig::listen`], one task per connection; the component is
//!   compiled once (with an optional on-disk cache), pre-instantiated once, and every request
//!   gets a fresh `Store` and instance ([`Allocation`]: pooled by default). Request and response
//!   bodies are streamed. A guest error or trap gives a 500 and a log line (with variable values
//!   redacted); a full instance pool gives a 503.
//!
//! Differences from Spin: every route goes to the one component (no `[[trigger.http]]` routing;
//! the guest sees `spin-matched-route: /...`); no `self` requests, no CIDR ranges in
//! `allowed_outbound_hosts`, key-value stores other than `default` are not supported; an
//! instance serves exactly one request (Spin 4 may reuse an instance for several); outbound
//! requests open a new connection each time.

mod kv;
pub mod load;
pub mod manifest;
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
use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

pub use kv::KvBackend;
pub use manifest::Manifest;
pub use outbound::AllowedHosts;
pub use variables::{ComponentVariables, Redactor};

use kv::KvData;
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
}

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
    kv: KvData,
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
}

/// A running server. Dropping it stops accepting connections (like [`Server::shutdown`] without
/// waiting).
pub struct Server {
    app: Arc<App>,
    load: LoadStats,
    shutdown_tx: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
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
        let kv = KvData::open(&cfg.kv)?;

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
        let app = Arc::new(App { engine, pre, shared, addr });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, app.clone(), shutdown_rx));
        let load = LoadStats { compiled, duration: started.elapsed() };
        Ok(Server { app, load, shutdown_tx, task: Some(task) })
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
    pub fn kv_snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.app.shared.kv.snapshot()
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

    /// Stops accepting, aborts open connections and in-flight requests, and waits for that.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Serves until SIGINT (Ctrl-C) or SIGTERM, then shuts down.
    pub async fn run_until_signal(self) -> anyhow::Result<()> {
        wait_for_signal().await?;
        self.shutdown().await;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
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
    let mut store = Store::new(engine, HostState::new(shared.clone()));
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
    "serve-p3".hash(&mut hasher);
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

async fn accept_loop(listener: TcpListener, app: Arc<App>, shutdown: watch::Receiver<bool>) {
    let stop = shutdown.clone();
    captchaai_emulator::net::accept_loop(listener, shutdown, move |peer| {
        let (app, shutdown) = (app.clone(), stop.clone());
        hyper::service::service_fn(move |req| handle(app.clone(), req, peer, shutdown.clone()))
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

fn internal_error() -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::Fixed(Some(Bytes::from_static(b"Internal Server Error\n"))));
    *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// `503 Service Unavailable` with `Retry-After: 1`.
fn busy() -> Response<()> {
    let mut resp = Response::new(());
    *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    resp.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// One HTTP request: runs the guest in its own task (which outlives this function while it
/// streams the body) and answers with its response head, or 500.
async fn handle(
    app: Arc<App>,
    req: Request<Incoming>,
    peer: SocketAddr,
    shutdown: watch::Receiver<bool>,
) -> Result<Response<ResponseBody>, Infallible> {
    let what = format!("{} {}", req.method(), req.uri().path());
    let req = spin_request(req, app.addr, peer);
    let (head_tx, head_rx) = oneshot::channel();
    let (body_tx, body_rx) = mpsc::channel(8);
    let task_app = app.clone();
    let mut shutdown = shutdown;
    tokio::spawn(async move {
        let run = run_guest(&task_app, req, head_tx, body_tx);
        tokio::select! {
            result = run => {
                if let Err(e) = result {
                    let text = task_app.shared.redactor.redact(&format!("{e:#}"));
                    eprintln!("serve: {what}: guest failed: {text}");
                }
            }
            _ = shutdown.wait_for(|stop| *stop) => {}
        }
    });
    match head_rx.await {
        Ok(head) => Ok(Response::from_parts(head, ResponseBody::Streamed(body_rx))),
        Err(_) => Ok(internal_error()),
    }
}

/// Gives the guest what Spin gives it: an absolute URI (`http://HOST/path?query`) and the
/// `spin-*` headers of a component mounted at `/...`.
fn spin_request(req: Request<Incoming>, local: SocketAddr, peer: SocketAddr) -> Request<Incoming> {
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

/// Instantiates the component in a fresh store, calls its handler, sends the response head on
/// `head_tx` and streams the body into `body_tx` (all inside `run_concurrent`, which must keep
/// running while the guest writes its body). An `Err` is a guest failure to log.
async fn run_guest(
    app: &App,
    req: Request<Incoming>,
    head_tx: oneshot::Sender<http::response::Parts>,
    body_tx: mpsc::Sender<FrameResult>,
) -> anyhow::Result<()> {
    let mut store = Store::new(&app.engine, HostState::new(app.shared.clone()));
    let service = match app.pre.instantiate_async(&mut store).await {
        Ok(service) => service,
        Err(e) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
            // Every pooled instance is busy: tell the client to come back (empty body).
            let (head, ()) = busy().into_parts();
            let _ = head_tx.send(head);
            eprintln!("serve: all pooled instances are busy; answered 503");
            return Ok(());
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
