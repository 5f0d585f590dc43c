//! Clients of running edge instances (under real Spin or `captchaai-serve`) for the state and
//! scale tests: JSON calls with a client token, long polls across instances, test images, and the
//! check that several instances sharing one store never oversubscribe the plan.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use captchaai_emulator::Emulator;

/// A response: status and JSON body.
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

/// An HTTP client for one or more edge instances, sending one client token.
pub struct Clients {
    client: Client<HttpConnector, Full<Bytes>>,
    token: String,
}

impl Clients {
    pub fn new(token: &str) -> Clients {
        Clients { client: Client::builder(TokioExecutor::new()).build_http(), token: token.to_owned() }
    }

    /// One request to `base` + `path` (60 s bound); the body must be JSON.
    pub async fn call(&self, base: &str, method: &str, path: &str, body: Option<String>) -> Reply {
        self.call_with(base, method, path, &[], body).await.0
    }

    /// [`Clients::call`] with extra request headers; also returns the response's headers.
    pub async fn call_with(
        &self,
        base: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> (Reply, hyper::HeaderMap) {
        let (status, response_headers, bytes) = self.raw(base, method, path, headers, body).await;
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{method} {path}: not JSON: {bytes:?}"));
        (Reply { status, body }, response_headers)
    }

    /// One request (60 s bound): status, headers and body as they came.
    pub async fn raw(
        &self,
        base: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<String>,
    ) -> (u16, hyper::HeaderMap, Bytes) {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header("authorization", format!("Bearer {}", self.token));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default()))).unwrap();
        let response =
            tokio::time::timeout(Duration::from_secs(60), self.client.request(request)).await.unwrap().unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        (status, headers, response.into_body().collect().await.unwrap().to_bytes())
    }

    /// A counter from `GET /metrics` (0 if the series is missing).
    pub async fn metric(&self, base: &str, series: &str) -> f64 {
        let (status, _, text) = self.raw(base, "GET", "/metrics", &[], None).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&text));
        let text = String::from_utf8_lossy(&text);
        text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
    }

    /// GETs `id` (alternating over `bases`) with long polls until it is no longer pending; a 202
    /// that came at once because nothing is due within the long poll is followed by a sleep
    /// until the next poll is.
    pub async fn collect(&self, bases: &[String], id: &str) -> Reply {
        for attempt in 0..30 {
            let path = format!("/v1/solve/{id}?wait={LONG_POLL_S}");
            let reply = self.call(&bases[attempt % bases.len()], "GET", &path, None).await;
            if reply.status != 202 {
                return reply;
            }
            sleep_until_worth_polling(&reply.body).await;
        }
        panic!("solve {id} still pending after 30 long polls");
    }
}

/// The long poll the test clients ask for (`?wait=`, the edge's maximum).
pub const LONG_POLL_S: u64 = 25;

/// After a 202 to a long poll of [`LONG_POLL_S`]: sleeps what is left until the next upstream
/// poll (`retry_after_s`) beyond the next long poll's own wait, so a 202 that came at once
/// (nothing due within the long poll) is not followed by a burst of polls.
pub async fn sleep_until_worth_polling(pending: &Value) {
    let retry_after = pending["retry_after_s"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(retry_after.saturating_sub(LONG_POLL_S))).await;
}

/// A base64 PNG-signed image of about `bytes` bytes, distinct per `seed`.
pub fn image(bytes: usize, seed: u8) -> String {
    let mut raw = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x40\0\0\0\x40".to_vec();
    raw.extend((0..bytes).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// Three times `plan` image tasks at once, spread over the two instances at `bases` (which share
/// one store): the emulator's record shows busy threads never above the plan (and the plan used
/// in full), no submit refused, every task solved, submitted once and delivered its own answer,
/// and each answer delivered again, the same body, by the other instance.
pub async fn solve_three_times_the_plan(clients: Arc<Clients>, bases: [String; 2], emulator: &Emulator, plan: usize) {
    let mut handles = Vec::new();
    for i in 0..plan * 3 {
        let clients = clients.clone();
        let bases: Vec<String> = if i % 2 == 0 { bases.to_vec() } else { bases.iter().rev().cloned().collect() };
        handles.push(tokio::spawn(async move {
            let task = json!({"type": "image", "image": image(400, i as u8)});
            let first = clients.call(&bases[0], "POST", "/v1/solve?wait=25", Some(task.to_string())).await;
            let reply = match first.status {
                202 => clients.collect(&bases, first.body["id"].as_str().unwrap()).await,
                _ => first,
            };
            let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
            let again = clients.call(&bases[1], "GET", &format!("/v1/solve/{id}?wait=0"), None).await;
            (reply, again)
        }));
    }
    let mut task_ids = Vec::new();
    for handle in handles {
        let (reply, again) = handle.await.unwrap();
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!((again.status, &again.body), (200, &reply.body), "delivered again by the other instance");
        task_ids.push(reply.body["task_id"].as_str().unwrap().parse::<u64>().unwrap());
    }
    let submits: Vec<_> = emulator.requests().into_iter().filter(|r| r.path == "/in.php").collect();
    let refused: Vec<_> = submits.iter().filter(|r| r.reply_code.as_deref() != Some("OK")).collect();
    assert!(
        refused.is_empty(),
        "submits refused (busy threads = the plan oversubscribed): {:?}",
        refused.iter().map(|r| &r.reply_code).collect::<Vec<_>>()
    );
    assert_eq!(submits.len(), plan * 3, "each task submitted once");
    task_ids.sort();
    task_ids.dedup();
    assert_eq!(task_ids.len(), plan * 3, "each task delivered its own answer");
    let peak = peak_busy_threads(emulator, &task_ids);
    eprintln!("peak busy threads at the emulator: {peak} (plan {plan}), {} submits", submits.len());
    assert!(peak <= plan, "busy threads peaked at {peak} over a plan of {plan}");
    assert_eq!(peak, plan, "the plan was used in full");
}

/// The most threads the emulator had busy at once, from its record of every task in `task_ids`.
pub fn peak_busy_threads(emulator: &Emulator, task_ids: &[u64]) -> usize {
    let mut events = Vec::new();
    for id in task_ids {
        let info = emulator.task(*id).unwrap();
        events.push((info.submitted_at_ms, 1i64));
        events.push((info.ready_at_ms, -1i64));
    }
    events.sort();
    let (mut busy, mut peak) = (0i64, 0i64);
    for (_, delta) in events {
        busy += delta;
        peak = peak.max(busy);
    }
    peak as usize
}

/// `captchaai-serve --manifest spin.toml` (the composed edge app) as a child process with the
/// given store flags (`--state-dir DIR`, `--runtime-config-file FILE`, ...) and Spin variables,
/// killed on drop (or by [`ServeProcess::kill`], like a crash).
pub struct ServeProcess {
    child: tokio::process::Child,
    pub url: String,
}

impl ServeProcess {
    pub async fn start(store: &[&std::ffi::OsStr], key: &str, token: &str, api_base: &str) -> ServeProcess {
        use tokio::io::AsyncBufReadExt;
        let root = super::spin::root();
        let edge = root.join("target/edge/captchaai_edge.wasm");
        assert!(edge.exists(), "{} is missing: run cargo xtask component && cargo xtask edge", edge.display());
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_serve-under-test"))
            .arg("--manifest")
            .arg(root.join("spin.toml"))
            .args(["--listen", "127.0.0.1:0", "--quiet-guest"])
            .args(store)
            .arg("--cache-dir")
            .arg(std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache"))
            .env("SPIN_VARIABLE_CAPTCHAAI_KEY", key)
            .env("SPIN_VARIABLE_CLIENT_TOKENS", token)
            .env("SPIN_VARIABLE_API_BASE", api_base)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn captchaai-serve");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        // A first start compiles the edge app (debug build of the host: slow).
        let line = tokio::time::timeout(Duration::from_secs(300), lines.next_line())
            .await
            .expect("serve did not start within 300 s")
            .unwrap()
            .expect("serve exited before listening");
        let url =
            line.strip_prefix("serving ").unwrap_or_else(|| panic!("unexpected stdout {line:?}")).trim().to_owned();
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServeProcess { child, url }
    }

    /// SIGKILL, no graceful shutdown; waits until the process is gone.
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
