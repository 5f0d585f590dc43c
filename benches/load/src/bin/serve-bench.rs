//! Requests per second and latency of a component served by `captchaai_serve` in this process,
//! measured by wrk (server and client share the machine's cores, as on any single-box
//! benchmark).
//!
//! ```sh
//! cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release
//! cargo run --release -p captchaai-benches --bin serve-bench -- --duration 10 --connections 16
//! # an already running server instead (e.g. `captchaai-serve …`):
//! cargo run --release -p captchaai-benches --bin serve-bench -- --url http://127.0.0.1:3000/healthz
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use captchaai_benches::{Load, run};
use captchaai_serve::{Allocation, ServeConfig, Server, variables};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Component to serve in-process (default: the edge-hello build).
    #[arg(long)]
    component: Option<PathBuf>,
    /// Path (and query) to request from the in-process server.
    #[arg(long, default_value = "/")]
    path: String,
    /// Benchmark this URL instead of starting a server.
    #[arg(long, conflicts_with_all = ["component", "path"])]
    url: Option<String>,
    /// `NAME: VALUE` header added to every request. Repeatable.
    #[arg(long = "header")]
    headers: Vec<String>,
    /// An application variable for the in-process server, NAME=VALUE. Repeatable.
    #[arg(long = "variable")]
    variables: Vec<String>,
    /// Connections, one request in flight each.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Pooled instances for the in-process server; 0 = on-demand allocation.
    #[arg(long, default_value_t = 1_000)]
    max_instances: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut server = None;
    let url = match &args.url {
        Some(url) => url.clone(),
        None => {
            let component = args.component.clone().unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../../host-tests/edge-hello/target/wasm32-wasip2/release/edge_hello.wasm")
            });
            let mut cfg = ServeConfig::new(component);
            cfg.listen = SocketAddr::from(([127, 0, 0, 1], 0));
            cfg.inherit_stdio = false;
            if args.max_instances == 0 {
                cfg.allocation = Allocation::OnDemand;
            } else if let Allocation::Pooling { max_instances, .. } = &mut cfg.allocation {
                *max_instances = args.max_instances;
            }
            for flag in &args.variables {
                let (name, value) = variables::parse_assignment(flag)?;
                cfg.variables.insert(name, value);
            }
            let started = Server::start(cfg).await.context("starting the server (is the component built?)")?;
            let url = format!("{}{}", started.url(), args.path);
            eprintln!("serving in-process at {} (loaded in {:?})", started.url(), started.load_stats().duration);
            server = Some(started);
            url
        }
    };
    let mut load = Load::get(url.clone());
    load.connections = args.connections;
    load.duration = std::time::Duration::from_secs(args.duration);
    for h in &args.headers {
        let (k, v) = h.split_once(':').context("--header expects `NAME: VALUE`")?;
        load.headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let report = run(&load).await?;
    println!("GET {url} with {} connections: {report}", load.connections);
    if let Some(server) = server {
        server.shutdown().await;
    }
    Ok(())
}
