//! A running [`Server`]: start (the component loaded, what requests share resolved) and graceful
//! shutdown.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{Allocation, LoadStats, ServeConfig};
use crate::handler::accept_loop;
use crate::kv::KvStore;
use crate::load::{load_blocking, probe};
use crate::manifest::Manifest;
use crate::net::Phase;
use crate::outbound::AllowedHosts;
use crate::state::{App, DEFAULT_STORE, KvAccess, Shared};
use crate::variables::{self, ComponentVariables};

/// How often the engine's epoch advances: a running guest yields to the scheduler this often and
/// is checked against its deadline.
const EPOCH_TICK: Duration = Duration::from_millis(10);

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
                if let Some(label) = resolved.key_value_stores.iter().find(|l| *l != DEFAULT_STORE) {
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
    /// flight may finish within [`crate::Limits::shutdown_grace`], then those still waiting for
    /// their response get a JSON 503 (`shutting_down`) and the rest are cut off. Returns when
    /// every connection is closed.
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
