//! Requests per second and p99 of `GET /v1/solve/{id}` while the solve is not yet due (the engine
//! says "wait", so no upstream request is made; the edge answers from the solve record, which
//! keeps when the next request is due, and writes nothing), on the edge app served by
//! `captchaai_serve`, next to a hello-world Spin component on the same host; load from wrk.
//!
//! ```sh
//! cargo xtask component && cargo xtask edge
//! cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release
//! cargo run --release -p captchaai-benches --bin edge-bench -- --duration 5 --connections 16
//! cargo run --release -p captchaai-benches --bin edge-bench -- --kv sqlite:target/bench-kv.db   # or redis://127.0.0.1:6379
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use captchaai_benches::{Load, LoadReport, run};
use captchaai_emulator::{Emulator, EmulatorConfig};
use captchaai_serve::{KvBackend, ServeConfig, Server};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Connections, one request in flight each.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Seconds of load per measurement (the two edge measurements must end before the solves'
    /// first poll is due, 26 s after their submit).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=10))]
    duration: u64,
    /// The edge app's key-value store: `memory`, `sqlite:PATH` or `redis://HOST:PORT`.
    #[arg(long, default_value = "memory")]
    kv: KvBackend,
}

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "bench-client-token-0123456789";

fn component(dir: &str, file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(dir).join("target/wasm32-wasip2/release").join(file)
}

async fn serve(
    component: PathBuf,
    variables: &[(&str, String)],
    manifest: Option<PathBuf>,
    kv: KvBackend,
) -> Result<Server> {
    let mut config = ServeConfig::new(component);
    config.kv = kv;
    config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.inherit_stdio = false;
    config.env.clear();
    config.manifest = manifest;
    for (name, value) in variables {
        config.variables.insert((*name).to_owned(), value.clone());
    }
    Server::start(config).await.context("starting the server (are the components built?)")
}

fn load(url: String, paths: Vec<String>, args: &Args, auth: bool) -> Load {
    let mut load = Load::get(url);
    load.paths = paths;
    load.connections = args.connections;
    load.duration = std::time::Duration::from_secs(args.duration);
    if auth {
        load.headers.push(("authorization".into(), format!("Bearer {TOKEN}")));
    }
    load
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 1_000)).await?;
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spin.toml");
    // The composed edge app (`cargo xtask edge`), as spin.toml serves it.
    let edge = serve(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/edge/captchaai_edge.wasm"),
        &[("captchaai_key", KEY.into()), ("client_tokens", TOKEN.into()), ("api_base", emulator.base_url())],
        Some(manifest),
        args.kv.clone(),
    )
    .await?;
    println!("edge key-value store: {}", args.kv);
    let hello = serve(component("host-tests/edge-hello", "edge_hello.wasm"), &[], None, KvBackend::Memory).await?;

    // reCAPTCHA solves: submitted, then not due for 26 s (the engine's first wait).
    let mut ids = Vec::new();
    for _ in 0..=args.connections {
        ids.push(start_solve(&edge).await?);
    }
    // A POST may answer 202 before submitting (the edge submits only when the upstream call fits
    // its lease); drive each solve once more until every one is at the emulator.
    for _ in 0..3 {
        let submitted = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
        if submitted >= ids.len() {
            break;
        }
        for id in &ids {
            get(&edge, id).await?;
        }
    }
    let upstream_before = emulator.requests().len();

    // Every connection on one id: the same record read by every connection at once.
    let not_due = run(&load(format!("{}/v1/solve/{}?wait=0", edge.url(), ids[0]), Vec::new(), &args, true)).await?;
    // Requests spread over as many ids as connections: each reads its own solve's record.
    let paths = ids[1..].iter().map(|id| format!("/v1/solve/{id}?wait=0")).collect();
    let spread = run(&load(edge.url(), paths, &args, true)).await?;
    let upstream_during = emulator.requests().len() - upstream_before;
    let hello_report = run(&load(format!("{}/", hello.url()), Vec::new(), &args, false)).await?;
    let health = run(&load(format!("{}/healthz", edge.url()), Vec::new(), &args, false)).await?;

    report("edge GET /v1/solve/{id} (not yet due), all connections on one id", &not_due);
    report("edge GET /v1/solve/{id} (not yet due), requests spread over one id per connection", &spread);
    report("edge GET /healthz", &health);
    report("hello-world GET /", &hello_report);
    println!(
        "ratio edge not-yet-due / hello: {:.2} of the throughput, {:.1}x the p99; upstream requests during the run: {upstream_during}",
        not_due.req_per_s / hello_report.req_per_s,
        not_due.p99.as_secs_f64() / hello_report.p99.as_secs_f64()
    );
    for r in emulator.requests().iter().skip(upstream_before) {
        eprintln!(
            "upstream during the run: {} {} action={:?} id={:?} at {} ms",
            r.method, r.path, r.action, r.polled_id, r.at_ms
        );
    }
    let failed = |r: &LoadReport| r.non_2xx > 0 || r.socket_errors > 0;
    if failed(&not_due) || failed(&spread) || upstream_during > 0 {
        bail!("the not-yet-due requests must all be 202 and reach no upstream");
    }
    edge.shutdown().await;
    hello.shutdown().await;
    Ok(())
}

/// `GET /v1/solve/{id}?wait=1`: drives the solve (its submit, if not yet made); expects 202.
async fn get(edge: &Server, id: &str) -> Result<()> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let request = hyper::Request::get(format!("{}/v1/solve/{id}?wait=1", edge.url()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(http_body_util::Full::new(Bytes::new()))?;
    let response = client.request(request).await?;
    if response.status() != 202 {
        bail!("expected 202 from GET /v1/solve/{id}, got {}", response.status());
    }
    Ok(())
}

/// Starts a reCAPTCHA solve with `wait=1`; returns its id.
async fn start_solve(edge: &Server) -> Result<String> {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let task = r#"{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"https://portal.example.com/export"}"#;
    let request = hyper::Request::post(format!("{}/v1/solve?wait=1", edge.url()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(http_body_util::Full::new(Bytes::from(task)))?;
    let response = client.request(request).await?;
    if response.status() != 202 {
        bail!("expected 202 from POST /v1/solve, got {}", response.status());
    }
    let body: serde_json::Value = serde_json::from_slice(&response.into_body().collect().await?.to_bytes())?;
    Ok(body["id"].as_str().context("an id")?.to_owned())
}

fn report(what: &str, r: &LoadReport) {
    println!("{what}: {r}");
}
