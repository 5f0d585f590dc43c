//! What an operator meets running the edge app, under the bundled host and real Spin 4.1: a
//! readiness probe that touches the store, a misconfigured variable named (never its value) by
//! `/healthz` and every route, a request body cut off answered as the client's fault, 405 for a
//! wrong method whatever the id, and no solve id handed out unless its record is stored. The
//! real-Spin and Redis tests are ignored by default and run with `--include-ignored`
//! (support/mod.rs).

mod support;

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use captchaai_emulator::{CaptchaKind, Emulator, EmulatorConfig};
use captchaai_serve::{KvBackend, ServeConfig, Server};
use support::edge_client::Clients;
use support::openapi::OpenApi;
use support::redis::RedisServer;
use support::spin::SpinUp;

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "operations-test-token-5eed";
const PAGE: &str = "https://portal.example.com/export";

fn turnstile() -> String {
    json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}).to_string()
}

/// The edge app under one runtime, with its variables.
enum Edge {
    Serve(Server),
    Spin(SpinUp),
}

impl Edge {
    /// The edge in front of `emulator` with `extra` variables (overriding the defaults), on an
    /// in-memory store (serve), SQLite (Spin) or `kv` (serve: a Redis URL).
    async fn start(spin: bool, emulator: &Emulator, extra: &[(&str, &str)], kv: KvBackend) -> Edge {
        let root = support::spin::root();
        assert!(root.join("target/edge/captchaai_edge.wasm").exists(), "build the edge: cargo xtask edge");
        let base = emulator.base_url();
        let mut variables = vec![("captchaai_key", KEY), ("client_tokens", TOKEN), ("api_base", base.as_str())];
        for (name, value) in extra {
            variables.retain(|(n, _)| n != name);
            variables.push((name, value));
        }
        if spin {
            return Edge::Spin(SpinUp::start(&support::spin::binary(), &variables).await);
        }
        let mut config = ServeConfig::new(root.join("target/edge/captchaai_edge.wasm"));
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.manifest = Some(root.join("spin.toml"));
        config.env.clear();
        for (name, value) in variables {
            config.variables.insert(name.into(), value.into());
        }
        config.kv = kv;
        config.inherit_stdio = false;
        config.cache_dir = Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache"));
        Edge::Serve(Server::start(config).await.unwrap())
    }

    fn url(&self) -> String {
        match self {
            Edge::Serve(server) => server.url(),
            Edge::Spin(spin) => spin.url(),
        }
    }
}

/// One request, checked against edge/openapi.json: status and JSON body.
async fn call(edge: &Edge, method: &str, path: &str, body: Option<String>) -> (u16, Value) {
    let (status, headers, bytes) = Clients::new(TOKEN).raw(&edge.url(), method, path, &[], body).await;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{method} {path}: not JSON: {bytes:?}"));
    if status == 405 {
        assert!(headers.contains_key("allow"), "{method} {path}: a 405 names the allowed methods");
    }
    OpenApi::load().check(method, path.split('?').next().unwrap_or(path), status, &body);
    (status, body)
}

/// Sends `head` and the start of a body, then closes the sending side (as `nc -N` does when its
/// input ends), and returns what came back within 30 s.
async fn cut_off(url: &str, head: &str, partial_body: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(partial_body.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Readiness, wrong methods on ids that cannot exist, and a body cut off mid-way: a 400
/// `INCOMPLETE_BODY`, never a 5xx; nothing reaches CaptchaAI.
async fn probes(spin: bool) {
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 5)).await.unwrap();
    let edge = Edge::start(spin, &emulator, &[], KvBackend::Memory).await;
    assert_eq!(call(&edge, "GET", "/readyz", None).await, (200, json!({"status": "ready"})));
    assert_eq!(call(&edge, "GET", "/healthz", None).await, (200, json!({"status": "ok"})));
    assert_eq!(call(&edge, "POST", "/readyz", None).await.0, 405);
    for (method, path) in [("PUT", "/v1/solve/not-an-id"), ("POST", "/v1/solve/XYZ"), ("PATCH", "/v1/solve/0")] {
        let (status, body) = call(&edge, method, path, Some(turnstile())).await;
        assert_eq!((status, body["code"].as_str()), (405, Some("METHOD_NOT_ALLOWED")), "{method} {path}");
    }
    let (status, _) = call(&edge, "DELETE", "/v1/solve/not-an-id", None).await;
    assert_eq!(status, 404);

    let address = edge.url().trim_start_matches("http://").to_owned();
    let head = format!(
        "POST /v1/solve?wait=0 HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    );
    let answer = cut_off(&edge.url(), &head, r#"{"type":"tu"#).await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "a body cut off is the client's fault: {answer:?}");
    assert!(answer.contains("INCOMPLETE_BODY"), "{answer:?}");
    assert!(emulator.requests().is_empty(), "nothing reached CaptchaAI");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_cut_off_bodies_under_the_serve_host() {
    probes(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
async fn probes_and_cut_off_bodies_under_real_spin() {
    probes(true).await;
}

/// A variable the edge cannot use is a 500 `MISCONFIGURED` naming it (never a secret's value)
/// from `/healthz` and every route, before anything is sent upstream; the engine's own ranges
/// apply to the timing variables.
async fn misconfigured(spin: bool) {
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 5)).await.unwrap();
    let cases = [
        ("upstream_timeout_ms", "5s"),
        ("upstream_timeout_ms", "500"),
        ("abandon_after_ms", "1e6"),
        ("abandon_after_ms", "90000000"),
        ("solve_deadline_ms", "5000"),
    ];
    for (variable, value) in cases {
        let edge = Edge::start(spin, &emulator, &[(variable, value)], KvBackend::Memory).await;
        for (method, path, body) in
            [("GET", "/healthz", None), ("GET", "/readyz", None), ("POST", "/v1/solve?wait=0", Some(turnstile()))]
        {
            let (status, body) = call(&edge, method, path, body).await;
            assert_eq!((status, body["code"].as_str()), (500, Some("MISCONFIGURED")), "{variable}={value}: {path}");
            let message = body["message"].as_str().unwrap();
            assert!(message.contains(variable), "{variable}={value}: {message}");
            assert!(!message.contains(KEY) && !message.contains(TOKEN), "no secret in {message}");
        }
    }
    assert!(emulator.requests().is_empty(), "nothing reached CaptchaAI");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_variable_is_named_under_the_serve_host() {
    misconfigured(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
async fn a_misconfigured_variable_is_named_under_real_spin() {
    misconfigured(true).await;
}

/// A keyed POST waiting for a thread slot whose record vanishes from the store meanwhile (as
/// when the store loses a write it acknowledged) answers 503 `STORE_UNAVAILABLE` without an id,
/// never 202 with an id that answers 404; the retry with the same key creates the solve, and
/// nothing was submitted for the lost one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: --include-ignored"]
async fn an_id_is_answered_only_once_its_record_is_stored() {
    let redis = RedisServer::start("operations-record");
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 1).with_solve_time(
        CaptchaKind::Turnstile,
        30_000,
        30_000,
    ))
    .await
    .unwrap();
    let edge = Edge::start(false, &emulator, &[], KvBackend::Redis(redis.url())).await;
    // The plan's one thread, held by a solve that takes 30 s.
    let (status, holder) = call(&edge, "POST", "/v1/solve?wait=0", Some(turnstile())).await;
    assert_eq!(status, 202, "{holder}");
    let holder = holder["id"].as_str().unwrap().to_owned();
    let records = || -> Vec<String> {
        redis
            .keys()
            .into_iter()
            .filter(|k| k.starts_with("solve/") && k.matches('/').count() == 1 && !k.ends_with(&holder))
            .collect()
    };

    let clients = Clients::new(TOKEN);
    let post = |wait: u64| {
        let (clients, url) = (&clients, edge.url());
        async move {
            let path = format!("/v1/solve?wait={wait}");
            let (status, _, bytes) =
                clients.raw(&url, "POST", &path, &[("idempotency-key", "vanishing")], Some(turnstile())).await;
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    // The waiting POST's record, once stored, removed behind its back.
    let remove = async {
        for _ in 0..200 {
            if let Some(record) = records().pop() {
                redis.cli(&["DEL", &record]);
                return Some(record);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    };
    let ((status, body), removed) = tokio::join!(post(6), remove);
    let removed = removed.expect("the waiting POST stored no record within 2 s");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"].as_str(), Some("STORE_UNAVAILABLE"), "{body}");
    assert!(body.get("id").is_none(), "no id for a solve that is not stored: {body}");

    let (status, body) = post(0).await;
    assert_eq!(status, 202, "the retry creates the solve: {body}");
    let id = body["id"].as_str().unwrap();
    assert_ne!(format!("solve/{id}"), removed, "the next attempt's id");
    let (status, again) = call(&edge, "GET", &format!("/v1/solve/{id}?wait=0"), None).await;
    assert_eq!((status, again["id"].as_str()), (202, Some(id)), "{again}");
    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, 1, "only the holder was submitted: the lost solve never was");
}

/// A solve waiting at the edge for one of the plan's threads ends at its deadline, counted from
/// when the edge accepted it, with the engine's deadline failure: a queue that never frees
/// never keeps it pending, and it never reached CaptchaAI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_solve_ends_at_its_deadline() {
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 1).with_solve_time(
        CaptchaKind::Turnstile,
        60_000,
        60_000,
    ))
    .await
    .unwrap();
    let edge = Edge::start(false, &emulator, &[("solve_deadline_ms", "20000")], KvBackend::Memory).await;
    let (status, holder) = call(&edge, "POST", "/v1/solve?wait=0", Some(turnstile())).await;
    assert_eq!(status, 202, "{holder}");
    let (status, queued) = call(&edge, "POST", "/v1/solve?wait=0", Some(turnstile())).await;
    assert_eq!(status, 202, "{queued}");
    let id = queued["id"].as_str().unwrap();
    // Long polls until it ends (20 s deadline; each poll waits up to 5 s for a slot).
    let mut ended = None;
    for _ in 0..8 {
        let (status, body) = call(&edge, "GET", &format!("/v1/solve/{id}?wait=5"), None).await;
        if status != 202 {
            ended = Some((status, body));
            break;
        }
    }
    let (status, body) = ended.expect("the queued solve was still pending 40 s after a 20 s deadline");
    assert_eq!(body["code"].as_str(), Some("DEADLINE_EXCEEDED"), "{status} {body}");
    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, 1, "only the holder reached CaptchaAI");
}

/// A solve nobody asked about until after its deadline (a client that went away, a store that
/// stalled every request past it) makes one last poll when it is next resumed, and keeps the
/// answer CaptchaAI had: the token is still within its lifetime (Turnstile: 300 s from the
/// submit), so the paid solve is not thrown away. Nothing is submitted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solve_resumed_past_its_deadline_keeps_the_answer() {
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 5).with_solve_time(
        CaptchaKind::Turnstile,
        1_000,
        1_000,
    ))
    .await
    .unwrap();
    let edge = Edge::start(false, &emulator, &[("solve_deadline_ms", "20000")], KvBackend::Memory).await;
    let (status, accepted) = call(&edge, "POST", "/v1/solve?wait=0", Some(turnstile())).await;
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["id"].as_str().unwrap().to_owned();
    let submits = || emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    support::wait::until("the submit", async || submits() == 1).await;
    // Nobody asks until the 20 s deadline has passed: this wait is the scenario, not a guess.
    tokio::time::sleep(Duration::from_millis(21_000)).await;
    let polls_before = emulator.requests().iter().filter(|r| r.path == "/res.php").count();
    let (status, body) = call(&edge, "GET", &format!("/v1/solve/{id}?wait=0"), None).await;
    assert_eq!(status, 200, "the last poll after the deadline saved the answer: {body}");
    assert!(body["answer"].is_string(), "{body}");
    let polls_after = emulator.requests().iter().filter(|r| r.path == "/res.php").count();
    assert_eq!(polls_after - polls_before, 1, "one last poll");
    assert_eq!(submits(), 1, "nothing submitted again");
}

/// A solve that ends at its deadline while its CaptchaAI task is still being solved keeps its
/// thread slot until the slot expires (the engine's `ends_by`, one upstream timeout after the
/// deadline, and a margin): that task still holds a thread of the plan, so on a one-thread plan
/// the next solve waits at the edge instead of making CaptchaAI run two at once. Then the slot
/// frees itself and the next solve is submitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solve_ended_at_its_deadline_holds_its_thread_while_its_task_may_run() {
    let emulator = Emulator::start(EmulatorConfig::default().with_account(KEY, 1).with_solve_time(
        CaptchaKind::Image,
        120_000,
        120_000,
    ))
    .await
    .unwrap();
    let vars = [("solve_deadline_ms", "10000"), ("upstream_timeout_ms", "8000")];
    let edge = Edge::start(false, &emulator, &vars, KvBackend::Memory).await;
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x40\0\0\0\x40".to_vec();
    png.resize(200, 9);
    let image = json!({"type": "image", "image": base64::engine::general_purpose::STANDARD.encode(png)}).to_string();
    let submits = || emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    let until_ended = async |id: &str| loop {
        let (status, body) = call(&edge, "GET", &format!("/v1/solve/{id}?wait=5"), None).await;
        if status != 202 {
            return body;
        }
    };

    let (status, first) = call(&edge, "POST", "/v1/solve?wait=0", Some(image.clone())).await;
    assert_eq!(status, 202, "{first}");
    let ended = until_ended(first["id"].as_str().unwrap()).await;
    assert_eq!(ended["code"].as_str(), Some("DEADLINE_EXCEEDED"), "{ended}");
    assert_eq!(submits(), 1);
    // The first task is still being solved at CaptchaAI (two minutes): the one thread is busy
    // until the slot expires, 8 s and a margin after the first deadline. A solve accepted now
    // waits at the edge until its own deadline (10 s) without being submitted.
    let (status, second) = call(&edge, "POST", "/v1/solve?wait=0", Some(image.clone())).await;
    assert_eq!(status, 202, "{second}");
    let second = until_ended(second["id"].as_str().unwrap()).await;
    assert_eq!(second["code"].as_str(), Some("DEADLINE_EXCEEDED"), "{second}");
    assert_eq!(submits(), 1, "the second solve waited for the thread the first task holds");
    // By then the slot has expired: the next solve is submitted.
    let (status, third) = call(&edge, "POST", "/v1/solve?wait=0", Some(image)).await;
    assert_eq!(status, 202, "{third}");
    let id = third["id"].as_str().unwrap();
    support::wait::until("the third solve's submit, once the slot expired", async || {
        let (status, body) = call(&edge, "GET", &format!("/v1/solve/{id}?wait=1"), None).await;
        assert!(status == 202 || submits() == 2, "the third solve ended unsubmitted: {body}");
        submits() == 2
    })
    .await;
}
