//! Requests per second and p99 of `GET /v1/solve/{id}` while the solve is not yet due (the engine
//! says "wait", so no upstream request is made; the edge answers from the solve record, which
//! keeps when the next request is due, and writes nothing), on the edge app served by `captchaai_serve`,
//! next to a hello-world Spin component on the same host, same load generator, same process.
//!
//! ```sh
//! cargo xtask component && cargo xtask edge
//! cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release
//! cargo run --release -p captchaai-benches --bin edge-bench -- --requests 10000 --concurrency 16
//! cargo run --release -p captchaai-benches --bin edge-bench -- --kv sqlite:target/bench-kv.db   # or redis://127.0.0.1:6379
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use captchaai_benches::{LoadReport, LoadSpec, run};
use captchaai_emulator::{Emulator, EmulatorConfig};
use captchaai_serve::{KvBackend, ServeConfig, Server};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Connections, one request in flight each.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured requests per target (the id must stay "not yet due": keep this to ~12 s of load).
    #[arg(long, default_value_t = 10_000)]
    requests: usize,
    /// Unmeasured requests first.
    #[arg(long, default_value_t = 500)]
    warmup: usize,
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

fn spec(url: String, args: &Args, auth: bool) -> LoadSpec {
    let mut spec = LoadSpec::get(url);
    spec.concurrency = args.concurrency;
    spec.requests = args.requests;
    spec.warmup = args.warmup;
    if auth {
        spec.headers.push(("authorization".into(), format!("Bearer {TOKEN}")));
    }
    spec
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
    for _ in 0..=args.concurrency {
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

    // Every connection on one id: the same record read by 16 connections at once.
    let not_due = run(&spec(format!("{}/v1/solve/{}?wait=0", edge.url(), ids[0]), &args, true)).await?;
    // One id per connection: every request reads its own solve's record.
    let per_connection = Args {
        concurrency: 1,
        requests: args.requests / args.concurrency,
        warmup: args.warmup / args.concurrency,
        kv: args.kv.clone(),
    };
    let started = std::time::Instant::now();
    let loads: Vec<_> = ids[1..]
        .iter()
        .map(|id| {
            let spec = spec(format!("{}/v1/solve/{id}?wait=0", edge.url()), &per_connection, true);
            tokio::spawn(async move { run(&spec).await })
        })
        .collect();
    let mut reports = Vec::new();
    for load in loads {
        reports.push(load.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let distinct_total: usize = reports.iter().map(|r| r.requests).sum();
    let distinct_p99 = reports.iter().map(|r| r.p99).max().unwrap_or_default();
    let distinct_non_2xx: usize = reports.iter().map(|r| r.non_2xx).sum();
    let upstream_during = emulator.requests().len() - upstream_before;
    let hello_report = run(&spec(format!("{}/", hello.url()), &args, false)).await?;
    let health = run(&spec(format!("{}/healthz", edge.url()), &args, false)).await?;

    report("edge GET /v1/solve/{id} (not yet due), all connections on one id", &not_due);
    println!(
        "edge GET /v1/solve/{{id}} (not yet due), one id per connection: {:.0} req/s, p99 {:.2} ms (worst connection), {distinct_non_2xx} non-2xx",
        distinct_total as f64 / elapsed,
        ms(distinct_p99)
    );
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
    if not_due.non_2xx > 0 || distinct_non_2xx > 0 || upstream_during > 0 {
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
    println!(
        "{what}: {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} requests, {} non-2xx)",
        r.req_per_s,
        ms(r.p50),
        ms(r.p99),
        ms(r.max),
        r.requests,
        r.non_2xx
    );
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}
