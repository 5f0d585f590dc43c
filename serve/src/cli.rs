//! The `captchaai-serve` command line: serves a spin-sdk 7 HTTP component (such as the edge app)
//! the way Spin would, until SIGINT/SIGTERM (graceful: see [`Server::shutdown`]). Prints `serving http://ADDR` on stdout once listening; a summary (variable
//! names, never values) goes to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use crate::kv::{SQLITE_FILE, backend_from_runtime_config};
use crate::{Allocation, KvBackend, Limits, ServeConfig, Server, variables};

/// Flags of `captchaai-serve`. (No `Debug`: `--variable` values are secrets.)
#[derive(Parser)]
#[command(
    name = "captchaai-serve",
    version,
    about = "Serve a spin-sdk 7 HTTP component the way Spin 4.1 would (variables, key-value, \
             allowed_outbound_hosts) until SIGINT/SIGTERM"
)]
pub struct ServeArgs {
    /// The component (.wasm). Optional with --manifest: the component's `source` is used.
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// Address to listen on (port 0 = any free port).
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// An application variable, NAME=VALUE (wins over SPIN_VARIABLE_NAME). Repeatable.
    #[arg(long = "variable", value_name = "NAME=VALUE")]
    variables: Vec<String>,
    /// The `default` key-value store: `memory`, `sqlite:PATH` or `redis://HOST[:PORT]`.
    /// Default: SQLite in --state-dir (like `spin up`).
    #[arg(long, value_name = "memory|sqlite:PATH|redis://…", conflicts_with = "runtime_config_file")]
    kv: Option<KvBackend>,
    /// Where the default SQLite store lives: DIR/sqlite_key_value.db (Spin's file name and table).
    #[arg(long, value_name = "DIR", default_value = ".spin")]
    state_dir: PathBuf,
    /// A Spin runtime config file; its `[key_value_store.default]` (`type = "redis"` + `url`,
    /// or `type = "spin"` + `path`) chooses the store.
    #[arg(long, value_name = "FILE")]
    runtime_config_file: Option<PathBuf>,
    /// An allowed outbound destination, `scheme://host[:port]` (`*` wildcards as in Spin).
    /// Repeatable; added to the manifest's allowed_outbound_hosts.
    #[arg(long = "allow-outbound", value_name = "URL")]
    allow_outbound: Vec<String>,
    /// A spin.toml: variables, allowed_outbound_hosts, key_value_stores (and source) of one
    /// component.
    #[arg(long, value_name = "spin.toml")]
    manifest: Option<PathBuf>,
    /// Which [component.NAME] of the manifest (default: the only one).
    #[arg(long, value_name = "NAME", requires = "manifest")]
    component_name: Option<String>,
    /// Directory for compiled components (faster restarts).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Discard the guest's stdout/stderr instead of passing them through.
    #[arg(long)]
    quiet_guest: bool,
    /// Pooled instances = requests served at once (more get 503); 0 allocates every instance on
    /// demand (no cap, slower instantiation).
    #[arg(long, default_value_t = 1_000)]
    max_instances: u32,
    /// Linear memory cap per pooled instance, MiB.
    #[arg(long, default_value_t = 512)]
    max_memory_mib: usize,
    /// Seconds a connection has to send a whole request head.
    #[arg(long, default_value_t = Limits::default().header_read_timeout.as_secs(), value_parser = seconds())]
    header_timeout_secs: u64,
    /// Longest pause in a request body, seconds.
    #[arg(long, default_value_t = Limits::default().body_timeout.as_secs(), value_parser = seconds())]
    body_timeout_secs: u64,
    /// A request's deadline, seconds: a guest still running then is interrupted (JSON 503).
    #[arg(long, default_value_t = Limits::default().request_timeout.as_secs(), value_parser = seconds())]
    request_timeout_secs: u64,
    /// Connections served at once (more get a JSON 503), 1 to 1000000.
    #[arg(long, default_value_t = Limits::default().max_connections as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: u32,
    /// Largest request body, bytes (413 beyond).
    #[arg(long, default_value_t = Limits::default().max_body_bytes)]
    max_body_bytes: u64,
    /// On SIGTERM/SIGINT, seconds in-flight requests may still run (then a JSON 503).
    #[arg(long, default_value_t = Limits::default().shutdown_grace.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=86_400))]
    shutdown_grace_secs: u64,
}

/// A timeout flag: 1 s to a day (0 would end every request at once; beyond, deadlines overflow).
fn seconds() -> impl clap::builder::TypedValueParser<Value = u64> {
    clap::value_parser!(u64).range(1..=86_400)
}

impl ServeArgs {
    /// The library configuration (variables parsed; values never appear in errors).
    fn config(&self) -> anyhow::Result<ServeConfig> {
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
        cfg.limits = Limits {
            header_read_timeout: Duration::from_secs(self.header_timeout_secs),
            body_timeout: Duration::from_secs(self.body_timeout_secs),
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            max_connections: self.max_connections as usize,
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

/// Parses the process's arguments and serves until a signal; the `captchaai-serve` binary's `main`.
pub fn main() -> ExitCode {
    let args = ServeArgs::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until a signal.
async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    let kv = cfg.kv.to_string();
    let server = Server::start(cfg).await.context("starting the server")?;
    let load = server.load_stats();
    eprintln!(
        "captchaai-serve: component {} in {} ms; variables: [{}] (values hidden); allowed outbound: {:?}; key-value: {kv}",
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
