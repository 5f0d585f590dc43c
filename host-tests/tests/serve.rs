//! `captchaai_serve` over real loopback HTTP, with the `edge-hello` spin-sdk 7 component.
//!
//! The component must be built first:
//! `cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release`
//! (or point `EDGE_HELLO_WASM` at a build of it).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use captchaai_serve::{Allocation, KvBackend, ServeConfig, Server};

mod support;

/// Every request and startup in these tests must finish within this.
const TIMEOUT: Duration = Duration::from_secs(30);

fn hello_wasm() -> PathBuf {
    let path = std::env::var_os("EDGE_HELLO_WASM").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("edge-hello/target/wasm32-wasip2/release/edge_hello.wasm")
    });
    assert!(
        path.exists(),
        "the hello component {} is missing; build it with\n  \
         cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release\n\
         (from the repository root), or set EDGE_HELLO_WASM",
        path.display()
    );
    path
}

/// A config for the hello component on a free loopback port, no process environment, guest
/// stdio discarded, compiled components cached under the target dir.
fn config() -> ServeConfig {
    let mut cfg = ServeConfig::new(hello_wasm());
    cfg.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    cfg.env = BTreeMap::new();
    cfg.cache_dir = Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache"));
    cfg.inherit_stdio = false;
    cfg
}

async fn start(cfg: ServeConfig) -> Server {
    tokio::time::timeout(TIMEOUT, Server::start(cfg)).await.expect("start timed out").expect("server starts")
}

struct Reply {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

#[derive(Clone)]
struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl Http {
    fn new(server: &Server) -> Http {
        Http { client: Client::builder(TokioExecutor::new()).build_http(), base: server.url() }
    }

    async fn send(&self, method: Method, path: &str, body: Bytes) -> Reply {
        let req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .body(Full::new(body))
            .expect("request");
        let fut = async {
            let resp = self.client.request(req).await.expect("request sent");
            let status = resp.status();
            let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            Reply { status, content_type, body }
        };
        tokio::time::timeout(TIMEOUT, fut).await.expect("request timed out")
    }

    async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, Bytes::new()).await
    }
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A loopback HTTP server answering every request with `pong <path>`; returns its base URL.
async fn pong_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let body = format!("pong {}", req.uri().path());
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from(body))))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    (format!("http://{addr}"), task)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[tokio::test]
async fn hello_world() {
    let server = start(config()).await;
    let http = Http::new(&server);
    let reply = http.get("/").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.content_type.as_deref(), Some("application/json"));
    assert_eq!(reply.json(), serde_json::json!({"hello": "world"}));
    // Unknown routes are the guest's business.
    assert_eq!(http.get("/nope").await.status, StatusCode::NOT_FOUND);
    server.shutdown().await;
}

#[tokio::test]
async fn variables_from_flags_and_environment() {
    let mut cfg = config();
    cfg.variables.insert("greeting".into(), "from-flag".into());
    cfg.env.insert("SPIN_VARIABLE_GREETING".into(), "env-loses".into());
    cfg.env.insert("SPIN_VARIABLE_API_BASE".into(), "http://127.0.0.1:9".into());
    cfg.env.insert("NOT_A_SPIN_VARIABLE".into(), "ignored".into());
    let debug = format!("{cfg:?}");
    assert!(!debug.contains("from-flag") && !debug.contains("env-loses"), "{debug}");
    let server = start(cfg).await;
    assert!(!format!("{server:?}").contains("from-flag"));
    assert_eq!(server.variable_names(), ["api_base", "greeting"]);
    let http = Http::new(&server);
    assert_eq!(http.get("/var?name=greeting").await.json()["value"], "from-flag");
    assert_eq!(http.get("/var?name=api_base").await.json()["value"], "http://127.0.0.1:9");
    assert_eq!(http.get("/var-strict?name=greeting").await.json()["value"], "from-flag");
    server.shutdown().await;
}

#[tokio::test]
async fn undefined_and_invalid_variables() {
    let mut cfg = config();
    cfg.variables.insert("known".into(), "value".into());
    let server = start(cfg).await;
    let http = Http::new(&server);
    let reply = http.get("/var?name=unknown").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.json()["error"], "undefined");
    let reply = http.get("/var?name=NOT_VALID").await;
    assert_eq!(reply.json()["error"], "invalid-name");
    let reply = http.get("/var?name=not_valid_").await;
    assert_eq!(reply.json()["error"], "invalid-name");
    // The error propagating out of the handler is a 500, and the server carries on.
    let reply = http.get("/var-strict?name=unknown").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(http.get("/").await.status, StatusCode::OK);
    server.shutdown().await;
}

async fn kv_round(http: &Http) {
    assert_eq!(http.get("/kv-keys").await.json()["keys"], serde_json::json!([]));
    assert_eq!(http.get("/kv/alpha").await.json()["value"], Value::Null);
    assert_eq!(http.get("/kv-exists/alpha").await.json()["exists"], false);
    assert_eq!(http.send(Method::PUT, "/kv/alpha", Bytes::from_static(b"one")).await.json()["ok"], true);
    assert_eq!(http.send(Method::PUT, "/kv/beta", Bytes::from_static(b"two")).await.json()["ok"], true);
    assert_eq!(http.send(Method::PUT, "/kv/beta", Bytes::from_static(b"2")).await.json()["ok"], true);
    assert_eq!(http.get("/kv/alpha").await.json()["value"], "one");
    assert_eq!(http.get("/kv/beta").await.json()["value"], "2");
    assert_eq!(http.get("/kv-exists/alpha").await.json()["exists"], true);
    assert_eq!(http.get("/kv-keys").await.json()["keys"], serde_json::json!(["alpha", "beta"]));
    assert_eq!(http.send(Method::DELETE, "/kv/alpha", Bytes::new()).await.json()["ok"], true);
    assert_eq!(http.send(Method::DELETE, "/kv/never-set", Bytes::new()).await.json()["ok"], true);
    assert_eq!(http.get("/kv-exists/alpha").await.json()["exists"], false);
    assert_eq!(http.get("/kv-keys").await.json()["keys"], serde_json::json!(["beta"]));
}

#[tokio::test]
async fn key_value_in_memory() {
    let server = start(config()).await;
    let http = Http::new(&server);
    kv_round(&http).await;
    assert_eq!(server.kv_snapshot().await.unwrap(), BTreeMap::from([("beta".to_owned(), b"2".to_vec())]));
    // Only the `default` store exists.
    let reply = http.get("/kv-open?label=other").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(reply.json()["error"], "Error::NoSuchStore");
    assert_eq!(http.get("/kv-open?label=default").await.json()["ok"], true);
    // Concurrent writers all land.
    let writes = (0..16).map(|i| {
        let http = http.clone();
        async move { http.send(Method::PUT, &format!("/kv/k{i}"), Bytes::from(i.to_string())).await.status }
    });
    for status in futures_util::future::join_all(writes).await {
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(server.kv_snapshot().await.unwrap().len(), 17);
    server.shutdown().await;
}

/// spin:key-value over a store that outlives the server: everything written is there after a
/// restart of the serve host (`restart_store` gives the backend of the next start).
async fn key_value_survives_restarts(cfg: ServeConfig) {
    let server = start(cfg.clone()).await;
    let http = Http::new(&server);
    kv_round(&http).await;
    let binary: Vec<u8> = (0..=255).collect();
    assert_eq!(http.send(Method::PUT, "/kv/bin", Bytes::from(binary.clone())).await.status, StatusCode::OK);
    server.shutdown().await;

    let server = start(cfg.clone()).await;
    let http = Http::new(&server);
    assert_eq!(http.get("/kv-keys").await.json()["keys"], serde_json::json!(["beta", "bin"]));
    assert_eq!(http.get("/kv/beta").await.json()["value"], "2");
    assert_eq!(server.kv_snapshot().await.unwrap()["bin"], binary);
    // The probe counter survives restarts too.
    assert_eq!(http.get("/probe").await.json()["counter"], 1);
    assert_eq!(http.get("/probe").await.json()["counter"], 2);
    server.shutdown().await;
    let server = start(cfg).await;
    assert_eq!(Http::new(&server).get("/probe").await.json()["counter"], 3);
    server.shutdown().await;
}

#[tokio::test]
async fn key_value_sqlite_survives_restarts() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-kv-sqlite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = config();
    cfg.kv = KvBackend::Sqlite(dir.join("sqlite_key_value.db"));
    key_value_survives_restarts(cfg).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
#[ignore = "needs redis-server: --include-ignored"]
async fn key_value_redis_survives_restarts() {
    let redis = support::redis::RedisServer::start("serve");
    let mut cfg = config();
    cfg.kv = KvBackend::Redis(redis.url());
    key_value_survives_restarts(cfg).await;
}

#[tokio::test]
async fn outbound_requests_are_limited_to_allowed_hosts() {
    let (allowed_base, _allowed) = pong_server().await;
    let (other_base, _other) = pong_server().await;
    let mut cfg = config();
    cfg.allowed_outbound = vec![allowed_base.clone()];
    let server = start(cfg).await;
    let http = Http::new(&server);

    let reply = http.get(&format!("/fetch?url={}", enc(&format!("{allowed_base}/ping?q=1")))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.json(), serde_json::json!({"status": 200, "body": "pong /ping"}));

    // Same host, other port: denied.
    let reply = http.get(&format!("/fetch?url={}", enc(&format!("{other_base}/ping")))).await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY);
    assert_eq!(reply.json()["error"], "ErrorCode::HttpRequestDenied");
    // Other scheme or host: denied before any connection is attempted.
    for url in ["https://example.invalid/", "http://localhost:1/", &allowed_base.replace("http://", "https://")] {
        let reply = http.get(&format!("/fetch?url={}", enc(url))).await;
        assert_eq!(reply.json()["error"], "ErrorCode::HttpRequestDenied", "{url}");
    }

    // Everything at once: variable, KV, outbound, sleep.
    let mut cfg = config();
    cfg.allowed_outbound = vec!["http://127.0.0.1:*".into()];
    cfg.variables.insert("captchaai_key".into(), "0123456789abcdef0123456789abcdef".into());
    let server2 = start(cfg).await;
    let reply = Http::new(&server2)
        .get(&format!("/probe?var=captchaai_key&ms=50&url={}", enc(&format!("{other_base}/x"))))
        .await;
    assert_eq!(
        reply.json(),
        serde_json::json!({"var_len": 32, "counter": 1, "status": 200, "slept_ms": reply.json()["slept_ms"]})
    );
    assert!(reply.json()["slept_ms"].as_u64().unwrap() >= 50);
    server.shutdown().await;
    server2.shutdown().await;
}

#[tokio::test]
async fn sleeping_requests_run_concurrently() {
    let server = start(config()).await;
    let http = Http::new(&server);
    http.get("/").await; // warm up
    let replies = futures_util::future::join_all((0..4).map(|_| {
        let http = http.clone();
        async move { http.get("/sleep?ms=200").await }
    }))
    .await;
    let mut spans = Vec::new();
    for reply in replies {
        assert_eq!(reply.status, StatusCode::OK);
        let field = |name: &str| reply.json()[name].as_u64().unwrap();
        assert!(field("slept_ms") >= 200);
        spans.push((field("from_ms"), field("to_ms")));
    }
    // The guest's own clock: all four were asleep at once (one after another, the last would
    // start after the first ended), whatever the machine's load.
    let last_start = spans.iter().map(|s| s.0).max().unwrap();
    let first_end = spans.iter().map(|s| s.1).min().unwrap();
    assert!(last_start < first_end, "the sleeps did not overlap: {spans:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_full_instance_pool_answers_503_and_on_demand_has_no_cap() {
    let mut cfg = config();
    cfg.allocation = Allocation::Pooling { max_instances: 2, max_memory_bytes: 64 << 20 };
    let server = start(cfg).await;
    let http = Http::new(&server);
    // Two sleepers take both slots: each marks the store from its instance, and sleeps until
    // the test lets it go.
    let sleepers: Vec<_> = ["slot-a", "slot-b"]
        .into_iter()
        .map(|mark| {
            let http = http.clone();
            tokio::spawn(async move { http.get(&format!("/sleep?ms=10000&mark={mark}&until=release")).await })
        })
        .collect();
    support::wait::until_stored(server.kv(), &["slot-a", "slot-b"]).await;
    let third = http.get("/").await;
    assert_eq!(third.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(third.json()["code"], "busy");
    server.kv().set("release", b"1".to_vec()).await.unwrap();
    for sleeper in sleepers {
        let reply = sleeper.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert!(reply.json()["slept_ms"].as_u64().unwrap() < 10_000, "let go, not timed out");
    }
    // Slots come back once requests finish.
    assert_eq!(http.get("/").await.status, StatusCode::OK);
    server.shutdown().await;

    let mut cfg = config();
    cfg.allocation = Allocation::OnDemand;
    let server = start(cfg).await;
    let http = Http::new(&server);
    let replies = futures_util::future::join_all((0..8).map(|_| {
        let http = http.clone();
        async move { http.get("/sleep?ms=50").await.status }
    }))
    .await;
    assert!(replies.iter().all(|s| *s == StatusCode::OK));
    server.shutdown().await;
}

#[tokio::test]
async fn large_request_and_response_bodies_stream() {
    let server = start(config()).await;
    let http = Http::new(&server);
    let body: Vec<u8> = (0..1_572_864u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let reply = http.send(Method::POST, "/echo", Bytes::from(body.clone())).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["len"], body.len());
    assert_eq!(reply.json()["fnv1a"], format!("{:016x}", fnv1a(&body)));
    let reply = http.get("/big?n=5000000").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body.len(), 5_000_000);
    assert!(reply.body.iter().all(|&b| b == b'a'));
    server.shutdown().await;
}

#[tokio::test]
async fn traps_and_bad_requests_do_not_take_the_server_down() {
    let server = start(config()).await;
    let http = Http::new(&server);
    let reply = http.get("/trap").await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    // A guest trap is a JSON error from the host.
    assert_eq!(reply.content_type.as_deref(), Some("application/json"));
    assert_eq!(reply.json()["code"], "internal_error");
    assert_eq!(reply.json()["class"], "host");
    assert_eq!(http.get("/").await.status, StatusCode::OK);

    // Garbage on the wire: hyper answers 400 (or closes), the server keeps serving.
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(b"NOT HTTP AT ALL\r\n\r\n").await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut buf)).await.expect("connection closed");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 400"), "{text}");
    // A client that disconnects mid-response does not hurt either.
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(b"GET /big?n=10000000 HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut first = [0u8; 64];
    let _ = stream.read(&mut first).await.unwrap();
    drop(stream);
    assert_eq!(http.get("/").await.json()["hello"], "world");
    server.shutdown().await;
}

#[tokio::test]
async fn manifest_scopes_variables_stores_and_hosts() {
    let (pong_base, _pong) = pong_server().await;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-manifest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("spin.toml");
    std::fs::write(
        &manifest,
        format!(
            r#"spin_manifest_version = 2
[application]
name = "hello"
[variables]
captchaai_key = {{ required = true, secret = true }}
api_base = {{ default = "{pong_base}" }}
unused = {{ default = "nope" }}
[[trigger.http]]
route = "/..."
component = "hello"
[component.hello]
source = "{source}"
allowed_outbound_hosts = ["{{{{ api_base }}}}"]
key_value_stores = ["default"]
[component.hello.variables]
key = "{{{{ captchaai_key }}}}"
base = "{{{{ api_base }}}}/v1"
"#,
            source = hello_wasm().display()
        ),
    )
    .unwrap();

    // The required variable is missing: startup fails and names it.
    let mut cfg = config();
    cfg.component = None;
    cfg.manifest = Some(manifest.clone());
    let err = format!("{:#}", Server::start(cfg.clone()).await.unwrap_err());
    assert!(err.contains("captchaai_key"), "{err}");

    cfg.env.insert("SPIN_VARIABLE_CAPTCHAAI_KEY".into(), "secret-key-value".into());
    let server = start(cfg).await;
    assert_eq!(server.variable_names(), ["base", "key"]);
    let http = Http::new(&server);
    assert_eq!(http.get("/var?name=key").await.json()["value"], "secret-key-value");
    assert_eq!(http.get("/var?name=base").await.json()["value"], format!("{pong_base}/v1"));
    assert_eq!(http.get("/var?name=captchaai_key").await.json()["error"], "undefined");
    assert_eq!(http.get("/kv-open?label=other").await.json()["error"], "Error::AccessDenied");
    let reply = http.get(&format!("/fetch?url={}", enc(&format!("{pong_base}/a")))).await;
    assert_eq!(reply.json()["body"], "pong /a");
    assert_eq!(
        http.get("/fetch?url=http%3A%2F%2F127.0.0.1%3A1%2F").await.json()["error"],
        "ErrorCode::HttpRequestDenied"
    );
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn bad_configurations_fail_to_start() {
    let mut cfg = config();
    cfg.component = Some(PathBuf::from("/nonexistent/x.wasm"));
    assert!(Server::start(cfg).await.is_err());
    let mut cfg = config();
    cfg.allowed_outbound = vec!["example.com".into()];
    assert!(Server::start(cfg).await.is_err());
    // A core module or garbage is not a component.
    let junk = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("not-a-component.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").unwrap();
    let mut cfg = config();
    cfg.component = Some(junk);
    cfg.cache_dir = None;
    assert!(Server::start(cfg).await.is_err());
}

/// The `serve` subcommand: reads SPIN_VARIABLE_* from its real environment, prints
/// `serving http://ADDR`, never prints variable values, and stops on SIGTERM.
#[tokio::test]
async fn cli_serves_and_reads_the_environment() {
    use tokio::io::AsyncBufReadExt;
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache");
    let state = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-cli-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_serve-under-test"))
        .args(["--listen", "127.0.0.1:0", "--quiet-guest", "--variable", "flag_var=flag-secret-1"])
        .arg("--state-dir")
        .arg(&state)
        .arg("--component")
        .arg(hello_wasm())
        .arg("--cache-dir")
        .arg(&cache)
        .env("SPIN_VARIABLE_ENV_VAR", "env-secret-2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn host-tests serve");
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(TIMEOUT, lines.next_line()).await.expect("serving line").unwrap().unwrap();
    let base = line.strip_prefix("serving ").unwrap_or_else(|| panic!("unexpected stdout {line:?}")).to_owned();
    let http = Http { client: Client::builder(TokioExecutor::new()).build_http(), base };
    assert_eq!(http.get("/var?name=env_var").await.json()["value"], "env-secret-2");
    assert_eq!(http.get("/var?name=flag_var").await.json()["value"], "flag-secret-1");
    assert_eq!(http.get("/var-strict?name=missing").await.status, StatusCode::INTERNAL_SERVER_ERROR);
    // The default store is SQLite in --state-dir (Spin's file name).
    assert_eq!(http.get("/probe").await.json()["counter"], 1);
    assert!(state.join("sqlite_key_value.db").exists());

    let pid = child.id().expect("pid");
    // SIGTERM to the child this test spawned (by its pid).
    let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output()).await.expect("exit").unwrap();
    assert!(output.status.success(), "{:?}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("env_var") && stderr.contains("flag_var"), "{stderr}");
    assert!(!stderr.contains("secret-1") && !stderr.contains("secret-2"), "{stderr}");
}

/// Starts `captchaai-serve` for the hello component with `args`; returns the child and its URL.
async fn spawn_cli(args: &[&str], state: &std::path::Path) -> (tokio::process::Child, Http) {
    use tokio::io::AsyncBufReadExt;
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_serve-under-test"))
        .args(["--listen", "127.0.0.1:0", "--quiet-guest"])
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .arg("--component")
        .arg(hello_wasm())
        .arg("--cache-dir")
        .arg(&cache)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn captchaai-serve");
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(TIMEOUT, lines.next_line()).await.expect("serving line").unwrap().unwrap();
    let base = line.strip_prefix("serving ").unwrap_or_else(|| panic!("unexpected stdout {line:?}")).to_owned();
    (child, Http { client: Client::builder(TokioExecutor::new()).build_http(), base })
}

/// The serve process stopped by SIGTERM mid-request and started again on the same state dir:
/// the in-flight request past the grace period gets a JSON 503, the process exits cleanly, and
/// the SQLite store has everything written before.
#[tokio::test]
async fn cli_sigterm_is_graceful_and_sqlite_state_survives_a_new_process() {
    let state = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-cli-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let (child, http) = spawn_cli(&["--shutdown-grace-secs", "1"], &state).await;
    assert_eq!(http.send(Method::PUT, "/kv/kept", Bytes::from_static(b"across processes")).await.json()["ok"], true);
    assert_eq!(http.get("/probe").await.json()["counter"], 1);
    let long = {
        let http = http.clone();
        tokio::spawn(async move { http.get("/sleep?ms=10000&mark=long").await })
    };
    // SIGTERM once the long request runs (it marked the store).
    support::wait::until("the long request to run", async || http.get("/kv/long").await.json()["value"] == "1").await;
    let pid = child.id().expect("pid");
    // SIGTERM to the child this test spawned (by its pid).
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let reply = long.await.unwrap();
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.content_type.as_deref(), Some("application/json"));
    assert_eq!(reply.json()["code"], "shutting_down");
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output()).await.expect("exit").unwrap();
    assert!(output.status.success(), "{:?}", output.status);

    let (child, http) = spawn_cli(&[], &state).await;
    assert_eq!(http.get("/kv/kept").await.json()["value"], "across processes");
    assert_eq!(http.get("/probe").await.json()["counter"], 2);
    drop(child);
    let _ = std::fs::remove_dir_all(&state);
}
