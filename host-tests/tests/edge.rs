//! The Spin edge app over real HTTP: the composed component (`cargo xtask edge`:
//! target/edge/captchaai_edge.wasm, the edge app plus the engine component) in front of the
//! emulator, every response checked against edge/openapi.json.
//!
//! Every scenario runs under the project's own host (`captchaai_serve`); a representative
//! subset (a solve with long-poll continuation, fault mapping with threads, no plan, auth and
//! input limits, log hygiene) also runs under real Spin (`spin up --from spin.toml`, module
//! `real_spin`), ignored by default and run with `--include-ignored` (support/mod.rs).
//!
//! The component runs on real time (WASI clocks), so solves take the engine's real waits; the
//! scenarios run concurrently to keep the whole file around a minute.

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use captchaai_emulator::{Emulator, EmulatorConfig, Fault};
use captchaai_serve::{KvBackend, ServeConfig, Server};
use support::edge_client::{LONG_POLL_S, sleep_until_worth_polling};
use support::openapi::OpenApi;
use support::spin::SpinUp;

const KEY: &str = "0123456789abcdef0123456789abcdef";
const NO_PLAN_KEY: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const TOKEN: &str = "test-client-token-7f3a9c1e5b2d";
const GOOGLEKEY: &str = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-";
const PAGE: &str = "https://portal.example.com/export";

/// The composed edge app, the file spin.toml serves.
fn edge_wasm() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/edge/captchaai_edge.wasm");
    assert!(path.exists(), "{} is missing: build it with `cargo xtask component && cargo xtask edge`", path.display());
    path
}

/// Which Spin runtime serves the edge app.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runtime {
    /// `captchaai_serve`, in process.
    Serve,
    /// Real Spin: `spin up --from spin.toml`.
    Spin,
}

enum Host {
    Serve(Server),
    Spin(SpinUp),
}

/// The emulator (real time; short solve times) and the edge app in front of it.
struct Stack {
    emulator: Emulator,
    host: Host,
    client: Client<HttpConnector, Full<Bytes>>,
    openapi: OpenApi,
}

/// A response: status, headers, JSON body.
struct Reply {
    status: u16,
    headers: hyper::HeaderMap,
    body: Value,
}

impl Stack {
    async fn start(key: &str) -> Stack {
        Stack::start_on(Runtime::Serve, key).await
    }

    /// The stack on `runtime` (real Spin: panics where it is not installed).
    async fn start_on(runtime: Runtime, key: &str) -> Stack {
        let spin = match runtime {
            Runtime::Serve => None,
            Runtime::Spin => Some(support::spin::binary()),
        };
        edge_wasm();
        let emulator = Emulator::start(
            EmulatorConfig::default()
                .with_seed(11)
                .with_account(KEY, 50)
                .with_account_without_plan(NO_PLAN_KEY, 5)
                .with_all_solve_times(500, 3_000)
                .with_unsolvable_sitekey("0x4AAAAAAAUnsolvableSitekey"),
        )
        .await
        .unwrap();
        let tokens = format!("another-token-1234567,{TOKEN}");
        let host = match spin {
            None => {
                // spin.toml's `source` is the composed app; the serve host reads it from there.
                let mut config = ServeConfig::new(edge_wasm());
                config.listen = "127.0.0.1:0".parse().unwrap();
                config.manifest = Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spin.toml"));
                config.env.clear();
                config.variables.insert("captchaai_key".into(), key.into());
                config.variables.insert("client_tokens".into(), tokens);
                config.variables.insert("api_base".into(), emulator.base_url());
                config.kv = KvBackend::Memory;
                config.inherit_stdio = false;
                Host::Serve(Server::start(config).await.unwrap())
            }
            Some(spin) => {
                let base = emulator.base_url();
                let variables =
                    [("captchaai_key", key), ("client_tokens", tokens.as_str()), ("api_base", base.as_str())];
                Host::Spin(SpinUp::start(&spin, &variables).await)
            }
        };
        let client = Client::builder(TokioExecutor::new()).build_http();
        Stack { emulator, host, client, openapi: OpenApi::load() }
    }

    fn url(&self) -> String {
        match &self.host {
            Host::Serve(server) => server.url(),
            Host::Spin(spin) => spin.url(),
        }
    }

    async fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<Vec<u8>>) -> Reply {
        self.call_with(method, path, token, &[], body).await
    }

    /// [`Stack::call`] with extra request headers.
    async fn call_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut request = hyper::Request::builder().method(method).uri(format!("{}{path}", self.url()));
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default()))).unwrap();
        let response =
            tokio::time::timeout(Duration::from_secs(60), self.client.request(request)).await.unwrap().unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body: Value =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{method} {path}: not JSON: {bytes:?}"));
        let template = path.split('?').next().unwrap_or(path);
        self.openapi.check(method, template, status, &body);
        Reply { status, headers, body }
    }

    async fn post(&self, task: &Value, wait: u64) -> Reply {
        self.call("POST", &format!("/v1/solve?wait={wait}"), Some(TOKEN), Some(task.to_string().into_bytes())).await
    }

    async fn get(&self, id: &str, wait: u64) -> Reply {
        self.call("GET", &format!("/v1/solve/{id}?wait={wait}"), Some(TOKEN), None).await
    }

    /// Posts, then long-polls until the solve ends, as a client should: a 202 that came at once
    /// because nothing is due within the long poll is followed by a sleep until the next poll is.
    async fn solve(&self, task: &Value) -> Reply {
        let mut reply = self.post(task, LONG_POLL_S).await;
        for _ in 0..20 {
            if reply.status != 202 {
                return reply;
            }
            let id = reply.body["id"].as_str().unwrap().to_owned();
            sleep_until_worth_polling(&reply.body).await;
            reply = self.get(&id, LONG_POLL_S).await;
        }
        panic!("no answer after 20 long polls");
    }

    /// Requests the solves sent upstream (the thread budget's `threadsinfo` reads of the plan
    /// are not counted).
    fn upstream_requests(&self) -> usize {
        self.emulator.requests().iter().filter(|r| r.action.as_deref() != Some("threadsinfo")).count()
    }
}

fn image() -> String {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x40\0\0\0\x40".to_vec();
    bytes.resize(200, 9);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn tasks() -> Vec<Value> {
    let img = image();
    let proxy = ("user:pass@203.0.113.7:3128", "HTTP");
    vec![
        json!({"type": "recaptcha_v2", "sitekey": GOOGLEKEY, "pageurl": PAGE}),
        json!({"type": "recaptcha_v2_enterprise", "sitekey": GOOGLEKEY, "pageurl": PAGE}),
        json!({"type": "recaptcha_v3", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "verify", "min_score": 0.3}),
        json!({"type": "recaptcha_v3_enterprise", "sitekey": GOOGLEKEY, "pageurl": PAGE, "action": "login"}),
        json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}),
        json!({"type": "cloudflare_challenge", "pageurl": PAGE, "proxy": proxy.0, "proxytype": proxy.1}),
        json!({"type": "geetest_v3", "gt": "81388ea1fc187e0c335c0a8907ff2625", "challenge": "12345678abc90123d45678ef90123a456b", "pageurl": PAGE}),
        json!({"type": "geetest_v4", "captcha_id": "e392e1d7fd421dc63325744d5a2b9c73", "pageurl": PAGE}),
        json!({"type": "captchafox", "sitekey": "sk_11111111111111111111", "pageurl": PAGE, "proxy": proxy.0, "proxytype": proxy.1}),
        json!({"type": "friendly_captcha", "sitekey": "FCMGEMUD2KTDSQ5H", "pageurl": PAGE}),
        json!({"type": "lemin", "captcha_id": "CROPPED_3dfdd5c_d1872b526b794d83", "div_id": "lemin-cropped-captcha", "pageurl": PAGE}),
        json!({"type": "image", "image": img, "numeric": 1}),
        json!({"type": "image", "image": img, "upload": "multipart"}),
        json!({"type": "grid", "image": img, "instructions": "buses"}),
        json!({"type": "bls", "instructions": "664", "images": vec![img.clone(); 9]}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_captcha_type_is_solved_through_the_api() {
    let stack = Arc::new(Stack::start(KEY).await);
    let mut handles = Vec::new();
    for task in tasks() {
        let stack = stack.clone();
        handles.push(tokio::spawn(async move { (task.clone(), stack.solve(&task).await) }));
    }
    for handle in handles {
        let (task, reply) = handle.await.unwrap();
        assert_eq!(reply.status, 200, "{}: {}", task["type"], reply.body);
        assert_eq!(reply.body["status"], "solved");
        assert!(!reply.body["answer"].is_null());
        // A finished solve's response is repeated, the same body, until it expires or is deleted.
        let id = reply.body["id"].as_str().unwrap();
        let again = stack.get(id, 0).await;
        assert_eq!((again.status, &again.body), (200, &reply.body));
    }
    check_upstream(&stack.emulator);
}

/// `GET /metrics` (Prometheus text, behind the client tokens here): solves by outcome and class,
/// the unsolvable ratio, upstream requests by kind, threads busy vs plan; never a key, token or
/// answer. The auth scheme is case-insensitive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_solves_and_show_no_secrets() {
    let stack = Stack::start(KEY).await;
    let solved =
        stack.solve(&json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE})).await;
    assert_eq!(solved.status, 200, "{}", solved.body);
    let answer = solved.body["answer"].as_str().unwrap().to_owned();
    let unsolvable =
        stack.solve(&json!({"type": "turnstile", "sitekey": "0x4AAAAAAAUnsolvableSitekey", "pageurl": PAGE})).await;
    assert_eq!(unsolvable.body["class"], "unsolvable");

    let scrape = |scheme: &'static str| {
        let request = hyper::Request::builder()
            .uri(format!("{}/metrics", stack.url()))
            .header("authorization", format!("{scheme} {TOKEN}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let client = stack.client.clone();
        async move {
            let response = client.request(request).await.unwrap();
            let status = response.status().as_u16();
            let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
            (
                status,
                content_type,
                String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap(),
            )
        }
    };
    let (status, content_type, text) = scrape("bearer").await;
    assert_eq!(status, 200, "{text}");
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let value = |series: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(series)).unwrap_or_else(|| panic!("no {series} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value(r#"captchaai_edge_solves_total{outcome="solved",class="",origin=""}"#) >= 1.0);
    let unsolvable: f64 = text
        .lines()
        .filter(|l| l.starts_with(r#"captchaai_edge_solves_total{outcome="failed",class="unsolvable""#))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(unsolvable >= 1.0, "{text}");
    let ratio = value("captchaai_edge_unsolvable_ratio ");
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    assert!(value(r#"captchaai_edge_upstream_requests_total{kind="submit",result="reply"}"#) >= 2.0);
    assert!(value(r#"captchaai_edge_upstream_requests_total{kind="poll",result="reply"}"#) >= 2.0);
    assert!(value(r#"captchaai_edge_solve_seconds_count"#) >= 1.0);
    assert_eq!(value("captchaai_edge_threads_plan "), 50.0);
    value("captchaai_edge_threads_busy ");
    for secret in [KEY, TOKEN, answer.as_str()] {
        assert!(!text.contains(secret), "the metrics hold a secret");
    }
    // Without a token: refused (JSON, like every edge error).
    let refused = stack.call("GET", "/metrics", None, None).await;
    assert_eq!(refused.status, 401);
    // Mixed-case scheme elsewhere too.
    assert_eq!(scrape("BeArEr").await.0, 200);
}

/// The key only ever travels in POST bodies, and no task is polled faster than every 5 s.
fn check_upstream(emulator: &Emulator) {
    let mut last = std::collections::HashMap::new();
    for r in emulator.requests() {
        assert!(!r.key_in_url && !r.key_in_headers && r.method == "POST", "{} {}", r.method, r.path);
        if let Some(id) = &r.polled_id
            && let Some(previous) = last.insert(id.clone(), r.at_ms)
        {
            assert!(r.at_ms + 50 >= previous + 5_000, "task {id} polled {} ms after the last poll", r.at_ms - previous);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polling_continues_the_same_solve_without_polling_faster() {
    long_polling(Runtime::Serve).await;
}

async fn long_polling(runtime: Runtime) {
    let stack = Stack::start_on(runtime, KEY).await;
    let stack = Arc::new(stack);
    let task = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE});
    let started = stack.post(&task, 0).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let retry: u64 = started.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=13).contains(&retry), "Retry-After {retry} (Turnstile's first wait is 13 s)");
    assert_eq!(started.headers["location"], format!("/v1/solve/{id}").as_str());
    assert_eq!(stack.upstream_requests(), 1, "only the submit went out");

    // Impatient clients hammering the id: no upstream poll before the engine allows one.
    let before = stack.upstream_requests();
    for _ in 0..10 {
        let reply = stack.get(&id, 0).await;
        assert_eq!(reply.status, 202);
    }
    assert_eq!(stack.upstream_requests(), before, "no poll before the first wait is over");

    // Concurrent clients on the same id: one drives it (one poll at a time), each 200 is the
    // same response.
    let mut handles = Vec::new();
    for _ in 0..3 {
        let (stack, id) = (stack.clone(), id.clone());
        handles.push(tokio::spawn(async move { stack.get(&id, 25).await }));
    }
    let mut statuses = Vec::new();
    let mut answer: Option<String> = None;
    for handle in handles {
        let reply = handle.await.unwrap();
        if reply.status == 200 {
            assert_eq!(reply.body["id"], id.as_str());
            let this = reply.body["answer"].as_str().map(str::to_owned);
            assert!(answer.is_none() || answer == this, "two different answers for one solve");
            answer = this;
        }
        statuses.push(reply.status);
    }
    statuses.sort();
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(statuses.iter().all(|s| matches!(s, 200 | 202)), "{statuses:?}");
    check_upstream(&stack.emulator);
    // Under real Spin the component's log is in the state dir: no key, token or answer in it.
    if let Host::Spin(spin) = &stack.host {
        let log = spin.component_log();
        assert!(log.contains("/v1/solve"), "the edge logs its requests: {log}");
        let answer = answer.expect("an answer");
        for secret in [KEY, TOKEN, answer.as_str()] {
            assert!(!log.contains(secret), "the log holds a secret");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_faults_map_to_documented_statuses() {
    upstream_faults(Runtime::Serve).await;
}

async fn upstream_faults(runtime: Runtime) {
    let stack = Stack::start_on(runtime, KEY).await;
    let turnstile = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE});
    // The edge reads the plan (threadsinfo, cached for a minute) before its first submit: a first
    // solve reads it now, so the faults below meet submits.
    assert_eq!(stack.post(&turnstile, 0).await.status, 202);

    stack.emulator.force_next(1, Fault::Code("ERROR_BAD_TOKEN_OR_PAGEURL".into()));
    let refused = stack.post(&turnstile, 5).await;
    assert_eq!(
        (refused.status, refused.body["code"].as_str(), refused.body["class"].as_str()),
        (422, Some("ERROR_BAD_TOKEN_OR_PAGEURL"), Some("permanent"))
    );

    stack.emulator.force_next(1, Fault::Code("IP_BANNED".into()));
    let banned = stack.post(&turnstile, 5).await;
    assert_eq!((banned.status, banned.body["retry_after_s"].as_u64()), (422, Some(300)));
    assert_eq!(banned.headers["retry-after"], "300");

    // A transient reply is retried inside the engine and the solve still succeeds.
    stack.emulator.force_next(1, Fault::Html502);
    assert_eq!(stack.solve(&turnstile).await.status, 200);

    // Unsolvable: one fresh task, then 422 with class unsolvable, repeated on later calls.
    let unsolvable =
        stack.solve(&json!({"type": "turnstile", "sitekey": "0x4AAAAAAAUnsolvableSitekey", "pageurl": PAGE})).await;
    assert_eq!((unsolvable.status, unsolvable.body["class"].as_str()), (422, Some("unsolvable")));
    let id = unsolvable.body["id"].as_str().unwrap().to_owned();
    assert_eq!(stack.get(&id, 0).await.body["code"], "ERROR_CAPTCHA_UNSOLVABLE");

    // A transient failure of the account call: 503 with Retry-After.
    stack.emulator.force_next(1, Fault::Html502);
    let threads = stack.call("GET", "/v1/threads", Some(TOKEN), None).await;
    assert_eq!((threads.status, threads.body["class"].as_str()), (503, Some("transient")));
    assert!(threads.headers.contains_key("retry-after"));
    let threads = stack.call("GET", "/v1/threads", Some(TOKEN), None).await;
    assert_eq!((threads.status, threads.body["threads"].as_u64()), (200, Some(50)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_active_plan_is_permanent() {
    no_active_plan(Runtime::Serve).await;
}

async fn no_active_plan(runtime: Runtime) {
    let stack = Stack::start_on(runtime, NO_PLAN_KEY).await;
    let reply =
        stack.post(&json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}), 5).await;
    assert_eq!(
        (reply.status, reply.body["code"].as_str(), reply.body["class"].as_str()),
        (422, Some("ERROR_ZERO_BALANCE"), Some("permanent"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_rejected_at_the_edge_never_reach_the_upstream() {
    rejected_at_the_edge(Runtime::Serve).await;
}

async fn rejected_at_the_edge(runtime: Runtime) {
    let stack = Stack::start_on(runtime, KEY).await;
    let health = stack.call("GET", "/healthz", None, None).await;
    assert_eq!(health.status, 200);
    let valid =
        json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}).to_string().into_bytes();

    for token in [None, Some("wrong-token"), Some(""), Some("test-client-token-7f3a9c1e5b2")] {
        let reply = stack.call("POST", "/v1/solve", token, Some(valid.clone())).await;
        assert_eq!((reply.status, reply.body["code"].as_str()), (401, Some("UNAUTHORIZED")), "{token:?}");
        assert_eq!(reply.headers["www-authenticate"], "Bearer");
    }
    // (method, path, body, expected status, the field an error must name)
    type Case<'a> = (&'a str, String, Option<Vec<u8>>, u16, Option<&'a str>);
    let cases: Vec<Case> = vec![
        ("POST", "/v1/solve".into(), Some(b"{not json".to_vec()), 400, None),
        ("POST", "/v1/solve".into(), Some(b"".to_vec()), 400, None),
        (
            "POST",
            "/v1/solve".into(),
            Some(json!({"type": "turnstile", "pageurl": PAGE}).to_string().into_bytes()),
            400,
            Some("sitekey"),
        ),
        (
            "POST",
            "/v1/solve".into(),
            Some(json!({"type": "hcaptcha", "sitekey": "x", "pageurl": PAGE}).to_string().into_bytes()),
            400,
            Some("type"),
        ),
        (
            "POST",
            "/v1/solve".into(),
            Some(
                json!({"type": "turnstile", "sitekey": "0x4AAA", "pageurl": PAGE, "extra": {"key": "x"}})
                    .to_string()
                    .into_bytes(),
            ),
            400,
            Some("extra.key"),
        ),
        ("POST", "/v1/solve?wait=99".into(), Some(valid.clone()), 400, Some("wait")),
        ("POST", "/v1/solve?wait=+5".into(), Some(valid.clone()), 400, Some("wait")),
        ("GET", "/v1/solve".into(), None, 405, None),
        ("PUT", "/v1/solve/0123456789abcdef0123456789abcdef".into(), None, 405, None),
        ("DELETE", "/v1/solve/0123456789abcdef0123456789abcdef".into(), None, 404, None),
        ("GET", "/v1/solve/0123456789abcdef0123456789abcdef".into(), None, 404, None),
        ("GET", "/v1/solve/..%2F..%2Fetc%2Fpasswd".into(), None, 404, None),
        ("GET", "/v1/solve/0123456789ABCDEF0123456789ABCDEF".into(), None, 404, None),
        ("GET", "/v1/solve/0123456789abcdef0123456789abcdef0".into(), None, 404, None),
        ("GET", "/v1/nothing".into(), None, 404, None),
    ];
    for (method, path, body, status, field) in cases {
        let reply = stack.call(method, &path, Some(TOKEN), body).await;
        assert_eq!(reply.status, status, "{method} {path}: {}", reply.body);
        if status == 405 {
            assert!(reply.headers.contains_key("allow"), "{method} {path}: a 405 names the allowed methods");
        }
        if let Some(field) = field {
            assert_eq!(reply.body["field"].as_str(), Some(field), "{method} {path}");
        }
    }
    // A body that is not UTF-8 is refused at the edge (the engine takes task JSON as text).
    let reply = stack.call("POST", "/v1/solve", Some(TOKEN), Some(b"{\"type\":\"\xff\"}".to_vec())).await;
    assert_eq!((reply.status, reply.body["code"].as_str()), (400, Some("INVALID_BODY")));
    // An oversized body is refused by its Content-Length, before it is read (the runtime may then
    // close the connection while the client still writes, so the status is read concurrently).
    assert_eq!(oversized_post(&stack.url(), 3 * 1024 * 1024, false).await, 413);
    // A chunked body has no length to check up front: it is cut off at the limit.
    assert_eq!(oversized_post(&stack.url(), 3 * 1024 * 1024, true).await, 413);
    assert_eq!(stack.upstream_requests(), 0, "nothing rejected at the edge was sent upstream");
}

/// Answers sent before the request's body has arrived are still sent whole. Each of 3,000
/// requests writes its head, then its task body in a second write, as many HTTP clients do, and
/// is answered at once without the body being read: a `PUT` (405), a `POST` with a wrong token
/// (401), a `GET` of an unknown solve (404). Real Spin 4.1.0-pre0 ends 1 such answer in 100 to
/// 7,000 after its data, without the chunked body's last chunk (docs/operating.md), so this runs
/// on the bundled host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_sent_before_the_body_arrives_are_whole() {
    let stack = Stack::start(KEY).await;
    let task = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}).to_string();
    let unknown = "/v1/solve/0123456789abcdef0123456789abcdef";
    let cases =
        [("PUT", "/v1/solve", TOKEN, 405), ("POST", "/v1/solve", "wrong-token", 401), ("GET", unknown, TOKEN, 404)];
    for round in 0..1_000 {
        for (method, path, token, status) in cases {
            let answer = body_in_second_write(&stack.url(), method, path, token, &task).await;
            assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{method} {path}, round {round}: {answer}");
            assert!(is_whole(&answer), "{method} {path}, round {round}: the answer was cut short: {answer:?}");
        }
    }
    assert_eq!(stack.upstream_requests(), 0);
}

/// Sends `method path` with `body` over a new connection, the head and the body in two writes;
/// returns what the server sent until the answer was whole, it closed, or 10 s passed.
async fn body_in_second_write(url: &str, method: &str, path: &str, token: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_whole(&String::from_utf8_lossy(&answer)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buffer)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buffer[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether `answer` is a whole HTTP/1.1 response: its body as long as `Content-Length` says, or
/// a chunked body through its last (empty) chunk.
fn is_whole(answer: &str) -> bool {
    let Some((head, body)) = answer.split_once("\r\n\r\n") else { return false };
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim().to_ascii_lowercase())
        })
    };
    match (header("content-length"), header("transfer-encoding")) {
        (Some(length), _) => length.parse() == Ok(body.len()),
        (None, Some(coding)) if coding == "chunked" => body.ends_with("0\r\n\r\n"),
        _ => false,
    }
}

/// POSTs `size` bytes to /v1/solve over a raw connection, with `Transfer-Encoding: chunked` or a
/// `Content-Length`, reading the response while still writing; returns the response status.
async fn oversized_post(url: &str, size: usize, chunked: bool) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://");
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let framing = if chunked { "Transfer-Encoding: chunked".to_owned() } else { format!("Content-Length: {size}") };
    let head =
        format!("POST /v1/solve HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\n{framing}\r\n\r\n");
    let writer = tokio::spawn(async move {
        write.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 64 * 1024];
        for _ in 0..size / chunk.len() {
            if chunked {
                write.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).await?;
            }
            write.write_all(&chunk).await?;
            if chunked {
                write.write_all(b"\r\n").await?;
            }
        }
        if chunked {
            write.write_all(b"0\r\n\r\n").await?;
        }
        Ok::<(), std::io::Error>(())
    });
    let mut response = vec![0; 64];
    let n = tokio::time::timeout(Duration::from_secs(30), read.read(&mut response)).await.unwrap().unwrap();
    writer.abort();
    let status_line = String::from_utf8_lossy(&response[..n]);
    status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {status_line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_log_never_shows_the_key_tokens_or_answers() {
    let emulator =
        Emulator::start(EmulatorConfig::default().with_account(KEY, 5).with_all_solve_times(500, 1_000)).await.unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_serve-under-test"))
        .args(["--component"])
        .arg(edge_wasm())
        .args(["--listen", "127.0.0.1:0", "--manifest"])
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spin.toml"))
        .env("SPIN_VARIABLE_CAPTCHAAI_KEY", KEY)
        .env("SPIN_VARIABLE_CLIENT_TOKENS", TOKEN)
        .env("SPIN_VARIABLE_API_BASE", emulator.base_url())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = loop {
        let line =
            tokio::time::timeout_at(deadline.into(), stdout.next_line()).await.unwrap().unwrap().expect("a line");
        if let Some(url) = line.strip_prefix("serving ") {
            break url.trim().to_owned();
        }
    };
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let task = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE});
    let mut answer = String::new();
    let mut path = "/v1/solve?wait=25".to_owned();
    let mut method = "POST";
    for _ in 0..10 {
        let request = hyper::Request::builder()
            .method(method)
            .uri(format!("{url}{path}"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(Full::new(Bytes::from(if method == "POST" { task.to_string() } else { String::new() })))
            .unwrap();
        let response = client.request(request).await.unwrap();
        let status = response.status().as_u16();
        let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
        if status == 200 {
            answer = body["answer"].as_str().unwrap().to_owned();
            break;
        }
        assert_eq!(status, 202, "{body}");
        (method, path) = ("GET", format!("/v1/solve/{}?wait=25", body["id"].as_str().unwrap()));
    }
    assert!(!answer.is_empty());
    child.start_kill().unwrap();
    let output = child.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stderr) + String::from_utf8_lossy(&output.stdout);
    assert!(log.contains("/v1/solve"), "the edge logs its requests: {log}");
    for secret in [KEY, TOKEN, answer.as_str()] {
        assert!(!log.contains(secret), "the log holds a secret");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_retried_with_its_idempotency_key_gets_the_same_solve() {
    idempotent_posts(Runtime::Serve).await;
}

/// `Idempotency-Key`: a client cut off mid-POST retries with the key and gets its solve, which
/// was submitted once; after it ended, the same POST repeats its stored response (the quoted
/// form of the key too). Another body with the key is a 422 naming the header, a bad key a 400,
/// and nothing is sent for either. Two POSTs with a fresh key at once start one solve; another
/// token with the same key starts its own. Every answer about a solve names it in `Solve-Id`,
/// its 200 and 202 also in `Location`.
async fn idempotent_posts(runtime: Runtime) {
    let stack = Arc::new(Stack::start_on(runtime, KEY).await);
    let turnstile = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE});
    let task = turnstile.to_string().into_bytes();
    let submits = |stack: &Stack| stack.emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    let post = |key: &'static str, body: Vec<u8>, wait: u64| {
        let stack = stack.clone();
        async move {
            let path = format!("/v1/solve?wait={wait}");
            stack.call_with("POST", &path, Some(TOKEN), &[("idempotency-key", key)], Some(body)).await
        }
    };
    let names_its_solve = |reply: &Reply| {
        let id = reply.body["id"].as_str().expect("an id").to_owned();
        assert_eq!(reply.headers["solve-id"], id.as_str(), "{}", reply.body);
        if matches!(reply.status, 200 | 202) {
            assert_eq!(reply.headers["location"], format!("/v1/solve/{id}").as_str());
        }
        id
    };

    // Cut off while the POST waits for the answer (Turnstile's first poll is 13 s away).
    let cut = tokio::time::timeout(Duration::from_secs(2), post("order-4711", task.clone(), 25)).await;
    assert!(cut.is_err(), "the POST answered within 2 s");
    let mut reply = post("order-4711", task.clone(), 25).await;
    for _ in 0..10 {
        if reply.status != 202 {
            break;
        }
        names_its_solve(&reply);
        sleep_until_worth_polling(&reply.body).await;
        reply = post("order-4711", task.clone(), 25).await;
    }
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = names_its_solve(&reply);
    assert_eq!(submits(&stack), 1, "the retried POST did not submit again");
    let again = post("\"order-4711\"", task.clone(), 0).await;
    assert_eq!((again.status, &again.body), (200, &reply.body), "the stored response, for the quoted key too");
    let fetched = stack.get(&id, 0).await;
    assert_eq!((fetched.status, &fetched.body), (200, &reply.body));
    names_its_solve(&fetched);

    // The key with another body; malformed keys. Nothing is sent for any of them.
    let before = stack.upstream_requests();
    let other =
        json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": "https://other.example.com/"});
    let reused = post("order-4711", other.to_string().into_bytes(), 0).await;
    assert_eq!(
        (reused.status, reused.body["code"].as_str(), reused.body["field"].as_str()),
        (422, Some("IDEMPOTENCY_KEY_REUSED"), Some("Idempotency-Key")),
        "{}",
        reused.body
    );
    let long = "k".repeat(256);
    for bad in ["", "two words", "a\"b", "back\\slash", "\"unterminated", long.as_str(), "\"\""] {
        let reply =
            stack.call_with("POST", "/v1/solve", Some(TOKEN), &[("idempotency-key", bad)], Some(task.clone())).await;
        assert_eq!(
            (reply.status, reply.body["code"].as_str(), reply.body["field"].as_str()),
            (400, Some("INVALID_IDEMPOTENCY_KEY"), Some("Idempotency-Key")),
            "{bad:?}: {}",
            reply.body
        );
    }
    assert_eq!(stack.upstream_requests(), before, "nothing refused was sent");

    // Two at once with a fresh key: one solve (the second waits for the first to create it),
    // one submit.
    let (a, b) = tokio::join!(post("batch-9", task.clone(), 2), post("batch-9", task.clone(), 2));
    let ids: Vec<String> = [&a, &b]
        .iter()
        .map(|r| {
            assert_eq!(r.status, 202, "{}", r.body);
            names_its_solve(r)
        })
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{} / {}", a.body, b.body);
    assert_eq!(submits(&stack), 2, "two POSTs with one key submitted once");
    // Another client token, the same key: a solve of its own.
    let theirs = stack
        .call_with(
            "POST",
            "/v1/solve?wait=0",
            Some("another-token-1234567"),
            &[("idempotency-key", "batch-9")],
            Some(task.clone()),
        )
        .await;
    assert_eq!(theirs.status, 202, "{}", theirs.body);
    assert_ne!(names_its_solve(&theirs), ids[0], "keys are per client token");
}

/// The representative subset under real Spin 4.1 (`spin up --from spin.toml`): a solve with
/// long-poll continuation and log hygiene, fault mapping and threads, no plan, auth and input
/// limits. Ignored by default (they need a Spin CLI); `--include-ignored` runs them.
mod real_spin {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
    async fn long_polling_continues_the_same_solve_without_polling_faster() {
        long_polling(Runtime::Spin).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
    async fn upstream_faults_map_to_documented_statuses() {
        upstream_faults(Runtime::Spin).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
    async fn a_post_retried_with_its_idempotency_key_gets_the_same_solve() {
        idempotent_posts(Runtime::Spin).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
    async fn no_active_plan_is_permanent() {
        no_active_plan(Runtime::Spin).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
    async fn requests_rejected_at_the_edge_never_reach_the_upstream() {
        rejected_at_the_edge(Runtime::Spin).await;
    }
}
