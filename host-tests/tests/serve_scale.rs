//! The edge app on two `captchaai serve` processes sharing one Redis (a redis-server this test
//! starts; skipped with a message only if it is not installed), against the real emulator:
//! three times the plan's threads of tasks at once, spread over both processes. The emulator's
//! record shows busy threads never above the plan, every task solved, each submitted once and
//! delivered (again from the other process, the same body). Needs the composed edge app
//! (`cargo xtask component && cargo xtask edge`).

mod serve_support;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use host_tests::emulator::{CaptchaKind, Emulator, EmulatorConfig};
use serve_support::RedisServer;

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "scale-test-token-7e57c0de";
const PLAN: usize = 2;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A `captchaai serve --manifest spin.toml` child process, killed on drop.
struct ServeProcess {
    child: tokio::process::Child,
    url: String,
}

impl ServeProcess {
    async fn start(runtime_config: &std::path::Path, api_base: &str) -> ServeProcess {
        let edge = root().join("target/edge/captchaai_edge.wasm");
        assert!(edge.exists(), "{} is missing: run cargo xtask component && cargo xtask edge", edge.display());
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_captchaai"))
            .arg("serve")
            .arg("--manifest")
            .arg(root().join("spin.toml"))
            .args(["--listen", "127.0.0.1:0", "--quiet-guest"])
            .arg("--runtime-config-file")
            .arg(runtime_config)
            .arg("--cache-dir")
            .arg(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache"))
            .env("SPIN_VARIABLE_CAPTCHAAI_KEY", KEY)
            .env("SPIN_VARIABLE_CLIENT_TOKENS", TOKEN)
            .env("SPIN_VARIABLE_API_BASE", api_base)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn captchaai serve");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        // A first start compiles the edge app (debug build of the host: slow).
        let line = tokio::time::timeout(Duration::from_secs(300), lines.next_line())
            .await
            .expect("serve did not start within 300 s")
            .unwrap()
            .expect("serve exited before listening");
        let url = line.strip_prefix("serving ").unwrap_or_else(|| panic!("unexpected stdout {line:?}")).to_owned();
        ServeProcess { child, url }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

struct Reply {
    status: u16,
    body: Value,
}

struct Clients {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Clients {
    async fn call(&self, base: &str, method: &str, path: &str, body: Option<String>) -> Reply {
        let request = hyper::Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .unwrap();
        let response =
            tokio::time::timeout(Duration::from_secs(60), self.client.request(request)).await.unwrap().unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{method} {path}: not JSON: {bytes:?}"));
        Reply { status, body }
    }

    /// Long-polls `id`, alternating over `bases`, until it is no longer pending (bounded).
    async fn collect(&self, bases: &[String], id: &str) -> Reply {
        for attempt in 0..30 {
            let reply = self.call(&bases[attempt % bases.len()], "GET", &format!("/v1/solve/{id}?wait=25"), None).await;
            if reply.status != 202 {
                return reply;
            }
        }
        panic!("solve {id} still pending after 30 long polls");
    }
}

fn image(bytes: usize, seed: u8) -> String {
    let mut raw = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x40\0\0\0\x40".to_vec();
    raw.extend((0..bytes).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    base64::engine::general_purpose::STANDARD.encode(raw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serve_processes_on_one_redis_never_oversubscribe_the_plan() {
    let Some(redis) = RedisServer::start("scale") else { return };
    let emulator =
        Emulator::start(EmulatorConfig::default().with_seed(11).with_account(KEY, PLAN as u32).with_solve_time(
            CaptchaKind::Image,
            1_000,
            3_000,
        ))
        .await
        .unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime_config = dir.join("runtime-config.toml");
    std::fs::write(
        &runtime_config,
        format!("[key_value_store.default]\ntype = \"redis\"\nurl = \"{}\"\n", redis.url()),
    )
    .unwrap();
    let a = ServeProcess::start(&runtime_config, &emulator.base_url()).await;
    let b = ServeProcess::start(&runtime_config, &emulator.base_url()).await;
    let bases = [a.url.clone(), b.url.clone()];
    let clients = Arc::new(Clients { client: Client::builder(TokioExecutor::new()).build_http() });

    let mut handles = Vec::new();
    for i in 0..PLAN * 3 {
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
        assert_eq!((again.status, &again.body), (200, &reply.body), "delivered again by the other process");
        task_ids.push(reply.body["task_id"].as_str().unwrap().parse::<u64>().unwrap());
    }
    let submits: Vec<_> = emulator.requests().into_iter().filter(|r| r.path == "/in.php").collect();
    let refused: Vec<_> = submits.iter().filter(|r| r.reply_code.as_deref() != Some("OK")).collect();
    assert!(
        refused.is_empty(),
        "submits refused (the plan was oversubscribed): {:?}",
        refused.iter().map(|r| &r.reply_code).collect::<Vec<_>>()
    );
    assert_eq!(submits.len(), PLAN * 3, "each task submitted once");
    task_ids.sort();
    task_ids.dedup();
    assert_eq!(task_ids.len(), PLAN * 3, "each task delivered its own answer");
    // Busy threads at the emulator over time, from its record of every task: never above the plan.
    let mut events = Vec::new();
    for id in &task_ids {
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
    eprintln!("peak busy threads at the emulator: {peak} (plan {PLAN}), {} submits", submits.len());
    assert!(peak as usize <= PLAN, "busy threads peaked at {peak} over a plan of {PLAN}");
    assert_eq!(peak as usize, PLAN, "the plan was used in full");
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
