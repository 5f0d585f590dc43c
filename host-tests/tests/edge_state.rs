//! The edge app's state under real Spin 4.1 (`spin up --from spin.toml`): no paid solve lost
//! to a dropped client, a store that stays bounded, and the thread budget shared by two
//! instances on one Redis. The real-Spin and Redis tests are ignored by default and run with
//! `--include-ignored` (support/mod.rs).
//!
//! The serve host (captchaai_serve) joins these tests once it implements the wasi:keyvalue
//! interfaces the edge imports (edge/KV-CONTRACT.md).

mod support;

use std::path::PathBuf;

use std::time::{Duration, Instant};

use serde_json::json;

use captchaai_emulator::{CaptchaKind, Emulator, EmulatorConfig};
use support::edge_client::{Clients, ServeProcess, image, solve_three_times_the_plan};
use support::redis::RedisServer;
use support::spin::SpinUp;

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "state-test-token-51c0ffee";
const PAGE: &str = "https://portal.example.com/export";

fn edge_wasm() -> PathBuf {
    let path = support::spin::root().join("target/edge/captchaai_edge.wasm");
    assert!(path.exists(), "{} is missing: build it with `cargo xtask component && cargo xtask edge`", path.display());
    path
}

async fn spin_up(spin: &std::path::Path, emulator: &Emulator, extra: &[(&str, &str)], runtime: Option<&str>) -> SpinUp {
    edge_wasm();
    let base = emulator.base_url();
    let mut variables = vec![("captchaai_key", KEY), ("client_tokens", TOKEN), ("api_base", base.as_str())];
    variables.extend_from_slice(extra);
    SpinUp::start_with(spin, &variables, runtime).await
}

/// A client that drops its long poll loses nothing: the next GET gets the answer, again and
/// again (same body) until DELETE removes it; the task was submitted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ ($SPIN_BIN or ../shared/tools/spin/spin): --include-ignored"]
async fn a_client_dropping_mid_wait_loses_nothing() {
    let spin = support::spin::binary();
    let emulator =
        Emulator::start(EmulatorConfig::default().with_seed(5).with_account(KEY, 10).with_all_solve_times(500, 2_000))
            .await
            .unwrap();
    let edge = spin_up(&spin, &emulator, &[], None).await;
    let clients = Clients::new(TOKEN);
    let task = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE});
    let started = clients.call(&edge.url(), "POST", "/v1/solve?wait=0", Some(task.to_string())).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();

    // Two long polls dropped (after 2 s, then 8 s more: before the first poll is due at 13 s).
    for drop_after in [2, 8] {
        let dropped = tokio::time::timeout(
            Duration::from_secs(drop_after),
            clients.call(&edge.url(), "GET", &format!("/v1/solve/{id}?wait=25"), None),
        )
        .await;
        if let Ok(reply) = dropped {
            panic!("the long poll answered within {drop_after} s: {} {}", reply.status, reply.body);
        }
    }
    let solved = clients.collect(&[edge.url()], &id).await;
    assert_eq!(solved.status, 200, "{}", solved.body);
    assert!(solved.body["answer"].as_str().is_some_and(|a| !a.is_empty()));
    let again = clients.call(&edge.url(), "GET", &format!("/v1/solve/{id}?wait=0"), None).await;
    assert_eq!((again.status, &again.body), (200, &solved.body), "the finished response is repeated");

    let deleted = clients.call(&edge.url(), "DELETE", &format!("/v1/solve/{id}"), None).await;
    assert_eq!((deleted.status, deleted.body["status"].as_str()), (200, Some("deleted")));
    let gone = clients.call(&edge.url(), "GET", &format!("/v1/solve/{id}?wait=0"), None).await;
    assert_eq!((gone.status, gone.body["code"].as_str()), (404, Some("NOT_FOUND")));

    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, 1, "the task was submitted once");
}

/// Many image tasks that clients abandon: the task is stored once per solve, and once the
/// solves expire (deadline + request timeout + `abandon_after_ms`) the per-request sweep
/// removes them, images included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn many_image_tasks_keep_the_store_bounded() {
    let spin = support::spin::binary();
    let redis = RedisServer::start("edge-state");
    let emulator = Emulator::start(EmulatorConfig::default().with_seed(6).with_account(KEY, 100).with_solve_time(
        CaptchaKind::Image,
        30_000,
        40_000,
    ))
    .await
    .unwrap();
    let extra = [("solve_deadline_ms", "10000"), ("abandon_after_ms", "0"), ("upstream_timeout_ms", "2000")];
    let edge = spin_up(&spin, &emulator, &extra, Some(&redis.runtime_config())).await;
    let clients = Clients::new(TOKEN);
    const TASKS: usize = 30;
    let mut image_bytes = 0;
    let started = Instant::now();
    for i in 0..TASKS {
        let img = image(200_000, i as u8);
        image_bytes += img.len() as u64;
        let reply = clients
            .call(&edge.url(), "POST", "/v1/solve?wait=0", Some(json!({"type": "image", "image": img}).to_string()))
            .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
    }
    let post_ms = started.elapsed().as_millis();
    let (keys, bytes) = redis.usage();
    eprintln!(
        "{TASKS} image tasks in flight: {keys} keys, {bytes} bytes (images: {image_bytes} bytes); {post_ms} ms for the POSTs"
    );
    assert!(bytes >= image_bytes, "every task is stored");
    assert!(bytes < image_bytes + image_bytes / 10, "each task is stored once: {bytes} bytes for {image_bytes}");

    // Past every solve's deadline + timeout: requests sweep what expired.
    tokio::time::sleep(Duration::from_secs(18)).await;
    let sweep_started = Instant::now();
    let mut sweeps = 0;
    while redis.keys().iter().any(|k| k.starts_with("solve/")) && sweeps < TASKS * 2 {
        let reply = clients.call(&edge.url(), "GET", &format!("/v1/solve/{:032x}?wait=0", sweeps), None).await;
        assert_eq!(reply.status, 404);
        sweeps += 1;
    }
    let (keys, bytes) = redis.usage();
    eprintln!("after {sweeps} requests ({} ms): {keys} keys, {bytes} bytes", sweep_started.elapsed().as_millis());
    let left: Vec<String> = redis.keys().into_iter().filter(|k| k.starts_with("solve/")).collect();
    assert!(left.is_empty(), "expired solves left in the store: {left:?}");
    assert!(bytes < 16 * 1024, "{bytes} bytes left after the sweep");
}

/// Two `spin up` instances on one Redis, three times the plan's threads of tasks at once: the
/// plan is never oversubscribed (no submit refused for busy threads, no more tasks in flight
/// at the emulator than the plan), every task is solved and delivered, none submitted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn two_spin_instances_on_one_redis_never_oversubscribe_the_plan() {
    let spin = support::spin::binary();
    let redis = RedisServer::start("edge-state");
    const PLAN: usize = 2;
    let emulator =
        Emulator::start(EmulatorConfig::default().with_seed(7).with_account(KEY, PLAN as u32).with_solve_time(
            CaptchaKind::Image,
            1_000,
            3_000,
        ))
        .await
        .unwrap();
    let runtime = redis.runtime_config();
    let a = spin_up(&spin, &emulator, &[], Some(&runtime)).await;
    let b = spin_up(&spin, &emulator, &[], Some(&runtime)).await;
    solve_three_times_the_plan(std::sync::Arc::new(Clients::new(TOKEN)), [a.url(), b.url()], &emulator, PLAN).await;
}

/// The serve host killed mid-solve (SIGKILL, no graceful shutdown) and started again on the same
/// SQLite state: the solve continues from its stored state, with no second submit, and the next
/// GET gets the answer. (The emulator runs in this test and keeps its tasks; a real restart of
/// `scripts/run.sh` also restarts the emulator, which forgets them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_of_the_serve_host_mid_solve_loses_nothing() {
    let TurnstileOnSqlite { emulator, state_dir, clients, task } = TurnstileOnSqlite::start(9, "restart").await;
    let on_state = ["--state-dir".as_ref(), state_dir.0.as_os_str()];
    let first = ServeProcess::start(&on_state, KEY, TOKEN, &emulator.base_url()).await;
    let url = first.url.clone();
    let started = clients.call(&url, "POST", "/v1/solve?wait=0", Some(task)).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let submits = || emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits(), 1, "the POST submitted the task");
    first.kill().await;

    let second = ServeProcess::start(&on_state, KEY, TOKEN, &emulator.base_url()).await;
    let reply = long_poll(&clients, &second.url, &id).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body["answer"].as_str().is_some_and(|a| !a.is_empty()), "{}", reply.body);
    assert_eq!(submits(), 1, "the restarted host continued the same task, with no second submit");
}

/// An emulator whose Turnstile solves take 6-8 s, a fresh state directory for the serve host's
/// SQLite store (removed on drop), clients, and a Turnstile task.
struct TurnstileOnSqlite {
    emulator: Emulator,
    state_dir: StateDir,
    clients: Clients,
    task: String,
}

/// A temporary directory, removed when dropped.
struct StateDir(PathBuf);

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TurnstileOnSqlite {
    async fn start(seed: u64, name: &str) -> TurnstileOnSqlite {
        edge_wasm();
        let emulator = Emulator::start(EmulatorConfig::default().with_seed(seed).with_account(KEY, 5).with_solve_time(
            CaptchaKind::Turnstile,
            6_000,
            8_000,
        ))
        .await
        .unwrap();
        let dir = std::env::temp_dir().join(format!("captchaai-edge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let task = json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}).to_string();
        TurnstileOnSqlite { emulator, state_dir: StateDir(dir), clients: Clients::new(TOKEN), task }
    }
}

/// `GET /v1/solve/{id}?wait=25` until the answer is no longer 202 (at most five times).
async fn long_poll(clients: &Clients, url: &str, id: &str) -> support::edge_client::Reply {
    let mut reply = clients.call(url, "GET", &format!("/v1/solve/{id}?wait=25"), None).await;
    for _ in 0..4 {
        if reply.status != 202 {
            break;
        }
        reply = clients.call(url, "GET", &format!("/v1/solve/{id}?wait=25"), None).await;
    }
    reply
}

/// Every row of the serve host's SQLite store (Spin's table layout), in key order.
fn sqlite_rows(path: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare("SELECT key, value FROM spin_key_value ORDER BY key").unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap().map(Result::unwrap).collect()
}

/// Clients polling a solve whose next upstream request is not yet due get 202 with the time
/// left, and the store is not written at all (no lease, checkpoint, counter or sweep): the
/// record answers alone. The solve then finishes with one submit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_before_the_next_request_is_due_writes_nothing() {
    let TurnstileOnSqlite { emulator, state_dir, clients, task } = TurnstileOnSqlite::start(10, "not-due").await;
    let serve =
        ServeProcess::start(&["--state-dir".as_ref(), state_dir.0.as_os_str()], KEY, TOKEN, &emulator.base_url()).await;

    let started = clients.call(&serve.url, "POST", "/v1/solve?wait=0", Some(task)).await;
    assert_eq!(started.status, 202, "{}", started.body);
    let id = started.body["id"].as_str().unwrap().to_owned();
    let first_retry = started.body["retry_after_s"].as_u64().unwrap();
    assert!(first_retry > 2, "the engine's first poll is a few seconds away: {}", started.body);
    let db = state_dir.0.join("sqlite_key_value.db");
    let before = sqlite_rows(&db);
    let upstream_before = emulator.requests().len();
    assert!(before.iter().any(|(k, _)| *k == format!("solve/{id}")), "the solve is stored");

    for _ in 0..20 {
        let polled = clients.call(&serve.url, "GET", &format!("/v1/solve/{id}?wait=0"), None).await;
        assert_eq!(polled.status, 202, "{}", polled.body);
        assert!(
            polled.body["retry_after_s"].as_u64().is_some_and(|s| (1..=first_retry).contains(&s)),
            "{}",
            polled.body
        );
    }
    let after = sqlite_rows(&db);
    let changed: Vec<&String> = after.iter().filter(|row| !before.contains(row)).map(|(key, _)| key).collect();
    assert!(
        after.len() == before.len() && changed.is_empty(),
        "polls before the next request is due wrote {changed:?}"
    );
    assert_eq!(emulator.requests().len(), upstream_before, "the polls sent nothing upstream");

    let reply = long_poll(&clients, &serve.url, &id).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, 1, "submitted once");
}
