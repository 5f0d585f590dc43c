//! The edge app against its baselines, on each runtime and store, in one run: requests per second
//! and p99 of `GET /v1/solve/{id}` while the solve is not yet due (the engine says "wait", so no
//! upstream request is made; the edge reads the solve record, which keeps when the next request
//! is due, and writes nothing), next to a hello-world component answering `GET /` and the same
//! component doing one key-value read (`GET /wkv/{key}`: `wasi:keyvalue` open + get, as the edge
//! reads its record). Stores: SQLite (each server its own file) and Redis (a redis-server this
//! benchmark starts). On Redis it also counts the commands and the new connections per request
//! (`INFO`). Load from wrk, 1 and 16 keep-alive connections.
//!
//! Runtimes (`--runtime`, default `spin,serve`):
//! - `spin`: real Spin (`$SPIN_BIN`, else ../shared/tools/spin/spin; skipped with a note where
//!   there is none), as shipped. Spin 4.1.0-pre0 leaves Nagle's algorithm on for accepted
//!   sockets, so an answer hyper writes in two pieces waits for the client's delayed ACK
//!   (40 ms or more) on a kept-alive connection.
//! - `spin-nodelay`: the same Spin with `TCP_NODELAY` set on every accepted socket by an
//!   `LD_PRELOAD` shim this benchmark builds with `cc` (benches/load/nodelay.c): Spin without
//!   that stall, as a one-line fix in Spin would make it.
//! - `spin-nginx`: the same Spin behind nginx with deploy/nginx.conf (only its `listen`,
//!   `server` and log path changed), wrk talking to nginx. The shipped file keeps no upstream
//!   connections: nginx opens one to Spin per request (a new connection acknowledges at once, so
//!   nothing stalls).
//! - `spin-nginx-keepalive`: the same with `keepalive 32;` added to the upstream block: nginx
//!   reuses its connections to Spin, and the stall comes back.
//! - `serve`: the bundled host (`captchaai_serve`) in this process (this binary's build profile).
//! - `serve-bin=PATH`: a `captchaai-serve` binary as a child process, to compare builds of it.
//!
//! `--edge A.wasm,B.wasm` measures each composed edge (default: the manifest's own,
//! target/edge/captchaai_edge.wasm) side by side; `--rounds N` repeats everything N times, in
//! the same order, so phases of machine load show up as spread rather than as a difference.
//!
//! ```sh
//! cargo xtask component && cargo xtask edge
//! cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release
//! cargo run --release -p captchaai-benches --bin edge-bench               # spin and serve
//! cargo run --release -p captchaai-benches --bin edge-bench -- --runtime spin,spin-nodelay,spin-nginx
//! cargo run --release -p captchaai-benches --bin edge-bench -- --runtime spin --store redis
//! ```

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use captchaai_benches::{Load, LoadReport, run};
use captchaai_emulator::{Emulator, EmulatorConfig};
use captchaai_serve::{KvBackend, ServeConfig, Server};
use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::process::Command;

#[derive(Parser)]
struct Args {
    /// Connection counts to measure at.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    connections: Vec<usize>,
    /// Seconds of load per measurement (the edge's measurements must end before its solves'
    /// first poll is due, 26 s after their submit).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=10))]
    duration: u64,
    /// Runtimes to measure: spin, spin-nodelay, spin-nginx, spin-nginx-keepalive, serve,
    /// serve-bin=PATH (see above).
    #[arg(long, value_delimiter = ',', default_value = "spin,serve", value_parser = Runtime::parse)]
    runtime: Vec<Runtime>,
    /// Stores to measure (default: both); Redis is a redis-server this benchmark starts.
    #[arg(long, value_delimiter = ',', default_value = "sqlite,redis")]
    store: Vec<Store>,
    /// Composed edge components to measure side by side (default: the manifest's `source`).
    #[arg(long, value_delimiter = ',')]
    edge: Vec<PathBuf>,
    /// How many times to measure everything.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    rounds: u32,
}

/// Where the apps run (see the module docs).
#[derive(Clone, PartialEq, Eq)]
enum Runtime {
    Spin,
    SpinNodelay,
    SpinNginx,
    SpinNginxKeepalive,
    Serve,
    ServeBin(PathBuf),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Store {
    Sqlite,
    Redis,
}

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "bench-client-token-0123456789";
/// The key hello's KV probe reads: a value the size of a pending solve record.
const PROBE_KEY: &str = "bench/probe";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 1_000)).await?;
    let spin = spin_binary();
    let redis = if args.store.contains(&Store::Redis) { Some(Redis::start()?) } else { None };
    let scratch = std::env::temp_dir().join(format!("captchaai-edge-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let result = measure_all(&args, spin.as_deref(), &emulator, redis.as_ref(), &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Every round, runtime, store and edge, in that order; one table row per connection count.
async fn measure_all(
    args: &Args,
    spin: Option<&Path>,
    emulator: &Emulator,
    redis: Option<&Redis>,
    scratch: &Path,
) -> Result<()> {
    let shim = if args.runtime.contains(&Runtime::SpinNodelay) { Some(build_nodelay_shim(scratch)?) } else { None };
    let edges: Vec<Option<&Path>> =
        if args.edge.is_empty() { vec![None] } else { args.edge.iter().map(|p| Some(p.as_path())).collect() };
    println!(
        "| runtime | store | conns | edge not-due GET req/s (p99 ms) | hello req/s (p99) | hello + 1 KV read req/s (p99) | edge / hello+KV: req/s, p99 | Redis commands per request: edge, hello+KV | new Redis connections per request: edge, hello+KV |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut n = 0;
    for round in 1..=args.rounds {
        for runtime in &args.runtime {
            if runtime.is_spin() && spin.is_none() {
                eprintln!("edge-bench: no Spin CLI ($SPIN_BIN or ../shared/tools/spin/spin): real Spin skipped");
                continue;
            }
            for &store in &args.store {
                for &edge_component in &edges {
                    n += 1;
                    let dir = scratch.join(n.to_string());
                    std::fs::create_dir_all(&dir)?;
                    let redis = if store == Store::Redis { redis } else { None };
                    if let Some(redis) = redis {
                        redis.cli(&["FLUSHALL"])?;
                    }
                    let launch = Launch { runtime, spin, shim: shim.as_deref(), redis };
                    let edge = Host::start(&launch, App::Edge(emulator, edge_component), &dir.join("edge")).await?;
                    let hello = Host::start(&launch, App::Hello, &dir.join("hello")).await?;
                    let mut label = runtime.name();
                    if let Some(component) = edge_component {
                        label = format!("{label}, {}", component.display());
                    }
                    if args.rounds > 1 {
                        label = format!("{label} (round {round})");
                    }
                    let measured = measure(args, &label, store, &edge, &hello, emulator, redis).await;
                    edge.stop().await;
                    hello.stop().await;
                    measured?;
                }
            }
        }
    }
    Ok(())
}

/// Builds benches/load/nodelay.c into `dir` with `cc`; returns the shared object's path.
fn build_nodelay_shim(dir: &Path) -> Result<PathBuf> {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("nodelay.c");
    let shim = dir.join("libnodelay.so");
    let status = std::process::Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg("-ldl")
        .status()
        .context("running cc to build the TCP_NODELAY shim (apt-get install -y gcc)")?;
    if !status.success() {
        bail!("cc failed to build {}", source.display());
    }
    Ok(shim)
}

/// One runtime and store: for each connection count, the edge's not-due GET on fresh solves
/// (spread over as many ids as connections), hello, and hello with one KV read.
async fn measure(
    args: &Args,
    label: &str,
    store: Store,
    edge: &Host,
    hello: &Host,
    emulator: &Emulator,
    redis: Option<&Redis>,
) -> Result<()> {
    let http = Client::builder(TokioExecutor::new()).build_http();
    let record = "x".repeat(300);
    call(&http, "PUT", &format!("{}/kv/{PROBE_KEY}", hello.url), None, Some(record)).await?;
    for &connections in &args.connections {
        let load = |url: String, paths: Vec<String>, auth: bool| Load {
            url,
            paths,
            headers: if auth { vec![("authorization".into(), format!("Bearer {TOKEN}"))] } else { Vec::new() },
            connections,
            duration: Duration::from_secs(args.duration),
        };
        let warm = |mut l: Load| {
            l.duration = Duration::from_secs(1);
            l
        };
        // reCAPTCHA solves: submitted, then not due for 26 s (the engine's first wait).
        let mut ids = Vec::new();
        for _ in 0..connections {
            ids.push(start_solve(&http, &edge.url, emulator).await?);
        }
        let paths: Vec<String> = ids.iter().map(|id| format!("/v1/solve/{id}?wait=0")).collect();
        let upstream_before = emulator.requests().len();
        run(&warm(load(edge.url.clone(), paths.clone(), true))).await?;
        let before = redis.map(Redis::counters).transpose()?;
        let edge_report = run(&load(edge.url.clone(), paths, true)).await?;
        let edge_redis = redis.zip(before).map(|(r, b)| r.per_request(b, &edge_report)).transpose()?;
        let upstream = emulator.requests().len() - upstream_before;

        run(&warm(load(format!("{}/", hello.url), Vec::new(), false))).await?;
        let hello_report = run(&load(format!("{}/", hello.url), Vec::new(), false)).await?;
        let probe = format!("{}/wkv/{PROBE_KEY}", hello.url);
        run(&warm(load(probe.clone(), Vec::new(), false))).await?;
        let before = redis.map(Redis::counters).transpose()?;
        let kv_report = run(&load(probe, Vec::new(), false)).await?;
        let kv_redis = redis.zip(before).map(|(r, b)| r.per_request(b, &kv_report)).transpose()?;

        for (what, report) in [("edge", &edge_report), ("hello", &hello_report), ("hello + KV", &kv_report)] {
            if report.non_2xx > 0 || report.socket_errors > 0 {
                bail!("{what} on {label}/{}: {report}", store.name());
            }
        }
        if upstream > 0 {
            bail!("the not-yet-due GETs reached the upstream {upstream} times");
        }
        let ms = |r: &LoadReport| r.p99.as_secs_f64() * 1e3;
        let pair = |e: Option<(f64, f64)>, k: Option<(f64, f64)>, pick: fn((f64, f64)) -> f64| match (e, k) {
            (Some(e), Some(k)) => format!("{:.2}, {:.2}", pick(e), pick(k)),
            _ => "-".to_owned(),
        };
        println!(
            "| {label} | {} | {connections} | {:.0} ({:.2}) | {:.0} ({:.2}) | {:.0} ({:.2}) | {:.2}x, {:.2}x | {} | {} |",
            store.name(),
            edge_report.req_per_s,
            ms(&edge_report),
            hello_report.req_per_s,
            ms(&hello_report),
            kv_report.req_per_s,
            ms(&kv_report),
            edge_report.req_per_s / kv_report.req_per_s,
            ms(&edge_report) / ms(&kv_report),
            pair(edge_redis, kv_redis, |(commands, _)| commands),
            pair(edge_redis, kv_redis, |(_, connections)| connections),
        );
    }
    Ok(())
}

/// What a server serves.
enum App<'a> {
    /// The composed edge app (spin.toml, or it with another `source`), against this emulator.
    Edge(&'a Emulator, Option<&'a Path>),
    /// edge-hello (host-tests/edge-hello/spin.toml).
    Hello,
}

/// How to start a server: the runtime and what it needs.
struct Launch<'a> {
    runtime: &'a Runtime,
    spin: Option<&'a Path>,
    /// The TCP_NODELAY shim, for `spin-nodelay`.
    shim: Option<&'a Path>,
    redis: Option<&'a Redis>,
}

/// A server under test: `spin up` or `captchaai-serve` as a child process (behind nginx for
/// `spin-nginx`), or the bundled host in this process.
struct Host {
    url: String,
    process: Option<tokio::process::Child>,
    server: Option<Server>,
    nginx: Option<Nginx>,
}

impl Host {
    async fn start(launch: &Launch<'_>, app: App<'_>, state_dir: &Path) -> Result<Host> {
        std::fs::create_dir_all(state_dir)?;
        let redis = launch.redis;
        let (manifest, variables) = match app {
            App::Edge(emulator, component) => (
                match component {
                    Some(component) => manifest_with_source(&root().join("spin.toml"), component, state_dir)?,
                    None => root().join("spin.toml"),
                },
                vec![
                    ("captchaai_key", KEY.to_owned()),
                    ("client_tokens", TOKEN.to_owned()),
                    ("api_base", emulator.base_url()),
                ],
            ),
            App::Hello => (root().join("host-tests/edge-hello/spin.toml"), Vec::new()),
        };
        let address = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let child = |mut command: Command, what: &str| -> Result<tokio::process::Child> {
            command
                .args(["--listen", &address.to_string(), "--state-dir"])
                .arg(state_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true);
            if let Some(redis) = redis {
                let config = state_dir.join("runtime-config.toml");
                std::fs::write(&config, redis.runtime_config())?;
                command.arg("--runtime-config-file").arg(config);
            }
            for (name, value) in &variables {
                command.env(format!("SPIN_VARIABLE_{}", name.to_uppercase()), value);
            }
            command.spawn().with_context(|| format!("starting {what}"))
        };
        let mut nginx = None;
        let (process, server, url) = match launch.runtime {
            Runtime::Spin | Runtime::SpinNodelay | Runtime::SpinNginx | Runtime::SpinNginxKeepalive => {
                let mut command = Command::new(launch.spin.context("no Spin CLI")?);
                command.args(["up", "--quiet", "--from"]).arg(&manifest);
                if *launch.runtime == Runtime::SpinNodelay {
                    command.env("LD_PRELOAD", launch.shim.context("no TCP_NODELAY shim")?);
                }
                let process = child(command, "spin up")?;
                let mut url = format!("http://{address}");
                if matches!(launch.runtime, Runtime::SpinNginx | Runtime::SpinNginxKeepalive) {
                    let keepalive = *launch.runtime == Runtime::SpinNginxKeepalive;
                    let proxy = Nginx::start(&address.to_string(), keepalive, &state_dir.join("nginx"))?;
                    url = proxy.url.clone();
                    nginx = Some(proxy);
                }
                (Some(process), None, url)
            }
            Runtime::ServeBin(binary) => {
                let mut command = Command::new(binary);
                command.arg("--manifest").arg(&manifest).arg("--quiet-guest");
                (Some(child(command, "captchaai-serve")?), None, format!("http://{address}"))
            }
            Runtime::Serve => {
                let mut config = ServeConfig::new(PathBuf::new());
                config.component = None;
                config.manifest = Some(manifest);
                config.listen = address;
                config.inherit_stdio = false;
                config.env.clear();
                config.kv = match redis {
                    Some(redis) => KvBackend::Redis(redis.url()),
                    None => KvBackend::Sqlite(state_dir.join("sqlite_key_value.db")),
                };
                config.variables = variables.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                let server =
                    Server::start(config).await.context("starting the bundled host (are the components built?)")?;
                let url = server.url();
                (None, Some(server), url)
            }
        };
        let host = Host { url, process, server, nginx };
        host.wait_until_serving().await?;
        Ok(host)
    }

    async fn wait_until_serving(&self) -> Result<()> {
        let http: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if call(&http, "GET", &format!("{}/healthz", self.url), None, None).await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("{} did not answer within 60 s", self.url)
    }

    async fn stop(self) {
        drop(self.nginx);
        if let Some(mut process) = self.process {
            let _ = process.kill().await;
        }
        if let Some(server) = self.server {
            server.shutdown().await;
        }
    }
}

/// A copy of `manifest` in `dir` whose component `source` is `component` (absolute).
fn manifest_with_source(manifest: &Path, component: &Path, dir: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(manifest)?;
    let component = std::fs::canonicalize(component).with_context(|| format!("{}", component.display()))?;
    let mut replaced = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with("source = ") {
                replaced += 1;
                format!("source = {:?}", component.display().to_string())
            } else {
                line.to_owned()
            }
        })
        .collect();
    if replaced != 1 {
        bail!("{} has {replaced} `source = ` lines, not one", manifest.display());
    }
    let path = dir.join("spin.toml");
    std::fs::write(&path, lines.join("\n") + "\n")?;
    Ok(path)
}

/// nginx in front of `backend` with deploy/nginx.conf: only its `listen`, upstream `server`
/// and access log path are changed (and, with `keepalive`, `keepalive 32;` added to its upstream
/// removed). Stopped on drop.
struct Nginx {
    url: String,
    child: std::process::Child,
}

impl Nginx {
    fn start(backend: &str, keepalive: bool, dir: &Path) -> Result<Nginx> {
        std::fs::create_dir_all(dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let shipped = std::fs::read_to_string(root().join("deploy/nginx.conf"))?;
        let mut conf = shipped.clone();
        let edits = [
            ("listen 8080;".to_owned(), format!("listen 127.0.0.1:{port};")),
            ("/var/log/nginx/captchaai-edge.access.log".to_owned(), dir.join("access.log").display().to_string()),
            (
                "    server 127.0.0.1:3000;\n".to_owned(),
                format!("    server {backend};\n{}", if keepalive { "    keepalive 32;\n" } else { "" }),
            ),
        ];
        for (from, to) in edits {
            if !conf.contains(&from) {
                bail!("deploy/nginx.conf no longer contains {from:?}: update edge-bench");
            }
            conf = conf.replace(&from, &to);
        }
        std::fs::write(dir.join("edge.conf"), conf)?;
        let d = dir.display();
        std::fs::write(
            dir.join("nginx.conf"),
            format!(
                "worker_processes 1;\nevents {{ worker_connections 1024; }}\nhttp {{\n    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n    include {d}/edge.conf;\n}}\n"
            ),
        )?;
        let child = std::process::Command::new("nginx")
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-g")
            .arg(format!("daemon off; pid {d}/nginx.pid;"))
            .stdout(Stdio::null())
            .spawn()
            .context("starting nginx (apt-get install -y nginx)")?;
        Ok(Nginx { url: format!("http://127.0.0.1:{port}"), child })
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request; its body. Any status is accepted except 5xx and connection errors (`/healthz` on
/// edge-hello is a 404: the server is up).
async fn call(
    http: &Client<HttpConnector, Full<Bytes>>,
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<String>,
) -> Result<(u16, Bytes)> {
    let mut request = hyper::Request::builder().method(method).uri(url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let response = tokio::time::timeout(Duration::from_secs(30), http.request(request)).await??;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    if status >= 500 {
        bail!("{method} {url}: {status}");
    }
    Ok((status, body))
}

/// Starts a reCAPTCHA solve and drives it until the emulator has its submit; returns its id.
async fn start_solve(http: &Client<HttpConnector, Full<Bytes>>, edge: &str, emulator: &Emulator) -> Result<String> {
    let task = r#"{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"https://portal.example.com/export"}"#;
    let submits = || emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    let before = submits();
    let (status, body) = call(http, "POST", &format!("{edge}/v1/solve?wait=1"), Some(TOKEN), Some(task.into())).await?;
    if status != 202 {
        bail!("expected 202 from POST /v1/solve, got {status}");
    }
    let body: serde_json::Value = serde_json::from_slice(&body)?;
    let id = body["id"].as_str().context("an id")?.to_owned();
    // A POST may answer 202 before submitting (the edge submits only when the upstream call fits
    // its lease): drive it until the emulator has the submit.
    for _ in 0..3 {
        if submits() > before {
            return Ok(id);
        }
        call(http, "GET", &format!("{edge}/v1/solve/{id}?wait=1"), Some(TOKEN), None).await?;
    }
    bail!("solve {id} was not submitted")
}

/// The Spin CLI: `$SPIN_BIN`, else ../shared/tools/spin/spin from the repository root.
fn spin_binary() -> Option<PathBuf> {
    let path =
        std::env::var_os("SPIN_BIN").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/tools/spin/spin"));
    path.is_file().then_some(path)
}

/// A redis-server child on a free loopback port, no persistence, killed on drop.
struct Redis {
    child: std::process::Child,
    port: u16,
}

impl Redis {
    fn start() -> Result<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .context("starting redis-server (apt-get install -y redis-server)")?;
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis.cli(&["PING"]).map(|r| r != "PONG").unwrap_or(true) {
            if Instant::now() > deadline {
                bail!("redis-server did not answer PING within 10 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(redis)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn runtime_config(&self) -> String {
        format!("[key_value_store.default]\ntype = \"redis\"\nurl = \"{}\"\n", self.url())
    }

    fn cli(&self, args: &[&str]) -> Result<String> {
        let out = std::process::Command::new("redis-cli").args(["-p", &self.port.to_string()]).args(args).output()?;
        if !out.status.success() {
            bail!("redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// (commands processed, connections received) so far.
    fn counters(&self) -> Result<(u64, u64)> {
        let info = self.cli(&["INFO", "stats"])?;
        let field = |name: &str| -> Result<u64> {
            let line = info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).context(name.to_owned())?;
            Ok(line.trim().parse()?)
        };
        Ok((field("total_commands_processed")?, field("total_connections_received")?))
    }

    /// Commands and new connections per request since `before` (less this call's own INFO).
    fn per_request(&self, before: (u64, u64), report: &LoadReport) -> Result<(f64, f64)> {
        let after = self.counters()?;
        let n = report.requests.max(1) as f64;
        Ok(((after.0 - before.0).saturating_sub(1) as f64 / n, (after.1 - before.1).saturating_sub(1) as f64 / n))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Runtime {
    fn parse(text: &str) -> Result<Runtime, String> {
        Ok(match text {
            "spin" => Runtime::Spin,
            "spin-nodelay" => Runtime::SpinNodelay,
            "spin-nginx" => Runtime::SpinNginx,
            "spin-nginx-keepalive" => Runtime::SpinNginxKeepalive,
            "serve" => Runtime::Serve,
            _ => match text.strip_prefix("serve-bin=") {
                Some(path) if !path.is_empty() => Runtime::ServeBin(PathBuf::from(path)),
                _ => {
                    return Err(
                        "one of spin, spin-nodelay, spin-nginx, spin-nginx-keepalive, serve, serve-bin=PATH".into()
                    );
                }
            },
        })
    }

    fn is_spin(&self) -> bool {
        matches!(self, Runtime::Spin | Runtime::SpinNodelay | Runtime::SpinNginx | Runtime::SpinNginxKeepalive)
    }

    fn name(&self) -> String {
        match self {
            Runtime::Spin => "Spin 4.1".into(),
            Runtime::SpinNodelay => "Spin 4.1 + TCP_NODELAY shim".into(),
            Runtime::SpinNginx => "nginx (deploy/nginx.conf) + Spin 4.1".into(),
            Runtime::SpinNginxKeepalive => "nginx (deploy/nginx.conf with upstream keepalive) + Spin 4.1".into(),
            Runtime::Serve => "bundled host".into(),
            Runtime::ServeBin(path) => format!("captchaai-serve {}", path.display()),
        }
    }
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Store::Sqlite => "SQLite",
            Store::Redis => "Redis",
        }
    }
}
