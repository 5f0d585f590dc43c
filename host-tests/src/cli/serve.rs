//! `host-tests serve`: serves a spin-sdk 7 HTTP component with [`crate::serve`] until
//! SIGINT/SIGTERM (graceful: see [`Server::shutdown`]). Prints `serving http://ADDR` on stdout once listening; a summary (variable
//! names, never values) goes to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use std::time::Duration;

use crate::serve::kv::{SQLITE_FILE, backend_from_runtime_config};
use crate::serve::{Allocation, KvBackend, Limits, ServeConfig, Server, variables};

/// Flags of `host-tests serve`. (No `Debug`: `--variable` values are secrets.)
#[derive(Args)]
pub struct ServeArgs {
    /// The component (.wasm). Optional with --manifest: the component's `source` is used.
    #[arg(long, value_name = "PATH")]
    pub component: Option<PathBuf>,
    /// Address to listen on (port 0 = any free port).
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// An application variable, NAME=VALUE (wins over SPIN_VARIABLE_NAME). Repeatable.
    #[arg(long = "variable", value_name = "NAME=VALUE")]
    pub variables: Vec<String>,
    /// The `default` key-value store: `memory`, `sqlite:PATH` or `redis://HOST[:PORT]`.
    /// Default: SQLite in --state-dir (like `spin up`).
    #[arg(long, value_name = "memory|sqlite:PATH|redis://…", conflicts_with = "runtime_config_file")]
    pub kv: Option<KvBackend>,
    /// Where the default SQLite store lives: DIR/sqlite_key_value.db (Spin's file name and table).
    #[arg(long, value_name = "DIR", default_value = ".spin")]
    pub state_dir: PathBuf,
    /// A Spin runtime config file; its `[key_value_store.default]` (`type = "redis"` + `url`,
    /// or `type = "spin"` + `path`) chooses the store.
    #[arg(long, value_name = "FILE")]
    pub runtime_config_file: Option<PathBuf>,
    /// An allowed outbound destination, `scheme://host[:port]` (`*` wildcards as in Spin).
    /// Repeatable; added to the manifest's allowed_outbound_hosts.
    #[arg(long = "allow-outbound", value_name = "URL")]
    pub allow_outbound: Vec<String>,
    /// A spin.toml: variables, allowed_outbound_hosts, key_value_stores (and source) of one
    /// component.
    #[arg(long, value_name = "spin.toml")]
    pub manifest: Option<PathBuf>,
    /// Which [component.NAME] of the manifest (default: the only one).
    #[arg(long, value_name = "NAME", requires = "manifest")]
    pub component_name: Option<String>,
    /// Directory for compiled components (faster restarts).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Discard the guest's stdout/stderr instead of passing them through.
    #[arg(long)]
    pub quiet_guest: bool,
    /// Pooled instances = requests served at once (more get 503); 0 allocates every instance on
    /// demand (no cap, slower instantiation).
    #[arg(long, default_value_t = 1_000)]
    pub max_instances: u32,
    /// Linear memory cap per pooled instance, MiB.
    #[arg(long, default_value_t = 512)]
    pub max_memory_mib: usize,
    /// Seconds a connection has to send a whole request head.
    #[arg(long, default_value_t = Limits::default().header_read_timeout.as_secs())]
    pub header_timeout_secs: u64,
    /// Longest pause in a request body, seconds.
    #[arg(long, default_value_t = Limits::default().body_timeout.as_secs())]
    pub body_timeout_secs: u64,
    /// A request's deadline, seconds: a guest still running then is interrupted (JSON 503).
    #[arg(long, default_value_t = Limits::default().request_timeout.as_secs())]
    pub request_timeout_secs: u64,
    /// Connections served at once (more get a JSON 503).
    #[arg(long, default_value_t = Limits::default().max_connections)]
    pub max_connections: usize,
    /// Largest request body, bytes (413 beyond).
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    pub max_body_bytes: u64,
    /// On SIGTERM/SIGINT, seconds in-flight requests may still run (then a JSON 503).
    #[arg(long, default_value_t = Limits::default().shutdown_grace.as_secs())]
    pub shutdown_grace_secs: u64,
}

impl ServeArgs {
    /// The library configuration (variables parsed; values never appear in errors).
    pub fn config(&self) -> anyhow::Result<ServeConfig> {
        if self.component.is_none() && self.manifest.is_none() {
            anyhow::bail!("pass --component PATH (or --manifest spin.toml)");
        }
        let mut cfg = ServeConfig::new(PathBuf::new());
        cfg.component = self.component.clone();
        cfg.listen = self.listen;
        for flag in &self.variables {
            let (name, value) = variables::parse_assignment(flag)?;
            cfg.variables.insert(name, value);
        }
        cfg.kv = match (&self.kv, &self.runtime_config_file) {
            (Some(kv), _) => kv.clone(),
            (None, Some(file)) => backend_from_runtime_config(file)?
                .unwrap_or_else(|| KvBackend::Sqlite(self.state_dir.join(SQLITE_FILE))),
            (None, None) => KvBackend::Sqlite(self.state_dir.join(SQLITE_FILE)),
        };
        if self.max_connections == 0 {
            anyhow::bail!("--max-connections must be at least 1");
        }
        cfg.limits = Limits {
            header_read_timeout: Duration::from_secs(self.header_timeout_secs.max(1)),
            body_timeout: Duration::from_secs(self.body_timeout_secs.max(1)),
            request_timeout: Duration::from_secs(self.request_timeout_secs.max(1)),
            max_connections: self.max_connections,
            max_body_bytes: self.max_body_bytes,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            ..Limits::default()
        };
        cfg.allowed_outbound = self.allow_outbound.clone();
        cfg.manifest = self.manifest.clone();
        cfg.component_name = self.component_name.clone();
        cfg.cache_dir = self.cache_dir.clone();
        cfg.inherit_stdio = !self.quiet_guest;
        cfg.allocation = match self.max_instances {
            0 => Allocation::OnDemand,
            n => {
                Allocation::Pooling { max_instances: n, max_memory_bytes: self.max_memory_mib.saturating_mul(1 << 20) }
            }
        };
        Ok(cfg)
    }
}

/// Runs `serve`.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    let kv = cfg.kv.to_string();
    let server = Server::start(cfg).await.context("starting the server")?;
    let load = server.load_stats();
    eprintln!(
        "serve: component {} in {} ms; variables: [{}] (values hidden); allowed outbound: {:?}; key-value: {kv}",
        if load.compiled { "compiled" } else { "loaded from cache" },
        load.duration.as_millis(),
        server.variable_names().join(", "),
        server.allowed_outbound(),
    );
    println!("serving {}", server.url());
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    server.run_until_signal().await
}
