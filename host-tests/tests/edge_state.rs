//! The edge app's state under real Spin 4.1 (`spin up --from spin.toml`): no paid solve lost
//! to a dropped client, a store that stays bounded, and the thread budget shared by two
//! instances on one Redis. The real-Spin and Redis tests are ignored by default and run with
//! `--include-ignored` (support/mod.rs). The store-fault and claim tests run under both real
//! Spin and the bundled host (captchaai-serve) on one Redis.

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

/// The wall clock in ms since the epoch, as the edge's records hold times.
fn epoch_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// When the edge may remove solve `id` (its record's `exp`, epoch ms).
fn record_expiry(redis: &RedisServer, id: &str) -> u64 {
    let record: serde_json::Value = serde_json::from_str(&redis.cli(&["GET", &format!("solve/{id}")])).unwrap();
    record["exp"].as_u64().unwrap_or_else(|| panic!("solve {id}: no exp in {record}"))
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
    let mut ids = Vec::new();
    let started = Instant::now();
    for i in 0..TASKS {
        let img = image(200_000, i as u8);
        image_bytes += img.len() as u64;
        let reply = clients
            .call(&edge.url(), "POST", "/v1/solve?wait=0", Some(json!({"type": "image", "image": img}).to_string()))
            .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        ids.push(reply.body["id"].as_str().unwrap().to_owned());
    }
    let post_ms = started.elapsed().as_millis();
    let (keys, bytes) = redis.usage();
    eprintln!(
        "{TASKS} image tasks in flight: {keys} keys, {bytes} bytes (images: {image_bytes} bytes); {post_ms} ms for the POSTs"
    );
    assert!(bytes >= image_bytes, "every task is stored");
    assert!(bytes < image_bytes + image_bytes / 10, "each task is stored once: {bytes} bytes for {image_bytes}");

    // Requests keep arriving (a 404 sweeps), one every 200 ms, until every solve is gone: each
    // stays until its record's expiry (its deadline + timeout), and once all expired, the
    // requests remove them within twice as many requests as there were solves.
    let expiry: Vec<(String, u64)> = ids.iter().map(|id| (id.clone(), record_expiry(&redis, id))).collect();
    let last_expiry = expiry.iter().map(|(_, exp)| *exp).max().unwrap();
    let (mut requests, mut after_expiry) = (0, 0);
    loop {
        let keys = redis.keys();
        let looked = epoch_ms();
        let stored = |id: &str| keys.iter().any(|k| k.starts_with(&format!("solve/{id}")));
        for (id, exp) in &expiry {
            assert!(stored(id) || *exp <= looked, "solve {id} removed before its expiry ({} ms early)", exp - looked);
        }
        if !keys.iter().any(|k| k.starts_with("solve/")) {
            break;
        }
        let left = keys.iter().filter(|k| k.starts_with("solve/") && !k.ends_with("/base")).count();
        assert!(after_expiry < TASKS * 2, "{left} expired solves left after {after_expiry} requests");
        assert!(looked < last_expiry + support::wait::HANG_GUARD.as_millis() as u64, "the solves never expired");
        after_expiry += usize::from(looked > last_expiry);
        let reply = clients.call(&edge.url(), "GET", &format!("/v1/solve/{requests:032x}?wait=0"), None).await;
        assert_eq!(reply.status, 404);
        requests += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (keys, bytes) = redis.usage();
    eprintln!("gone after {requests} requests ({after_expiry} after the last expiry): {keys} keys, {bytes} bytes");
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

/// A Turnstile task: its submit is where the kill below lands.
fn turnstile() -> String {
    json!({"type": "turnstile", "sitekey": "0x4AAAAAAABkMYinukE8nzY", "pageurl": PAGE}).to_string()
}

/// POSTs `task` with an `Idempotency-Key` to `base`, long-polling by POSTing again until it
/// is no longer pending.
async fn post_until_done(clients: &Clients, base: &str, key: &str, task: &str) -> support::edge_client::Reply {
    for _ in 0..20 {
        let (reply, _) = clients
            .call_with(base, "POST", "/v1/solve?wait=25", &[("idempotency-key", key)], Some(task.to_owned()))
            .await;
        if reply.status != 202 {
            return reply;
        }
        support::edge_client::sleep_until_worth_polling(&reply.body).await;
    }
    panic!("{key} still pending after 20 long polls");
}

/// Real Spin SIGKILLed while an image submit's reply is on its way (the emulator delays it): the next
/// instance finds the submit in doubt, sends it again and counts it
/// (`captchaai_submits_in_doubt_total` = 1), and keeps a thread slot for the possible orphan
/// until the solve's deadline, so with two more solves competing for a 2-thread plan the
/// emulator never has more tasks busy than the plan (no submit refused for busy threads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn a_spin_killed_mid_submit_resubmits_within_the_plan_and_counts_it() {
    let spin = support::spin::binary();
    let redis = RedisServer::start("in-doubt");
    const PLAN: usize = 2;
    let emulator =
        Emulator::start(EmulatorConfig::default().with_seed(12).with_account(KEY, PLAN as u32).with_solve_time(
            CaptchaKind::Image,
            2_000,
            3_000,
        ))
        .await
        .unwrap();
    // The cut POST's lease (its wait, 2 s, plus 2 s, the upstream timeout and 1 s) ends well
    // before the deadline, so the next instance resubmits in time.
    let extra = [("solve_deadline_ms", "40000"), ("upstream_timeout_ms", "8000")];
    let runtime = redis.runtime_config();
    let clients = Clients::new(TOKEN);
    let first = spin_up(&spin, &emulator, &extra, Some(&runtime)).await;
    // The plan is read (threadsinfo, cached for a minute) before the first submit: a first
    // solve reads it, so the delayed reply below is the submit's.
    let warm = json!({"type": "image", "image": image(300, 1)}).to_string();
    assert_eq!(post_until_done(&clients, &first.url(), "warm-up", &warm).await.status, 200);
    let submits = || emulator.requests().into_iter().filter(|r| r.path == "/in.php").collect::<Vec<_>>();
    let before = submits().len();
    emulator.force_next(1, captchaai_emulator::Fault::Slow(6_000));
    let url = first.url();
    let task = json!({"type": "image", "image": image(300, 2)}).to_string();
    let cut = tokio::spawn({
        let (clients, task) = (Clients::new(TOKEN), task.clone());
        async move { clients.raw(&url, "POST", "/v1/solve?wait=2", &[("idempotency-key", "in-doubt")], Some(task)).await }
    });
    // The POST cannot answer before its submit's reply, which the emulator holds for 6 s: it
    // ending first means the submit was never sent.
    support::wait::until("the submit to reach the emulator", async || submits().len() > before || cut.is_finished())
        .await;
    assert!(!cut.is_finished(), "the POST answered before its submit reached the emulator");
    drop(first); // SIGKILL to Spin's process group, the submit's reply still delayed
    cut.abort();

    let second = spin_up(&spin, &emulator, &extra, Some(&runtime)).await;
    let base = second.url();
    let others = ["other-1", "other-2"].map(|key| {
        let (clients, base) = (Clients::new(TOKEN), base.clone());
        let task = json!({"type": "image", "image": image(300, key.len() as u8 + key.as_bytes()[6])}).to_string();
        tokio::spawn(async move { post_until_done(&clients, &base, key, &task).await })
    });
    let in_doubt = post_until_done(&clients, &base, "in-doubt", &task).await;
    assert_eq!(in_doubt.status, 200, "{}", in_doubt.body);
    for other in others {
        let reply = other.await.unwrap();
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(clients.metric(&base, "captchaai_submits_in_doubt_total").await, 1.0);

    let submits = submits();
    let refused: Vec<_> = submits.iter().filter(|r| r.reply_code.as_deref() != Some("OK")).collect();
    assert!(refused.is_empty(), "submits refused: {:?}", refused.iter().map(|r| &r.reply_code).collect::<Vec<_>>());
    assert_eq!(submits.len(), before + 4, "the submit in doubt was sent again, the others once");
    let task_ids: Vec<u64> = submits.iter().filter_map(|r| r.task_id).collect();
    let peak = support::edge_client::peak_busy_threads(&emulator, &task_ids);
    eprintln!("submits in doubt: 1; peak busy threads at the emulator: {peak} (plan {PLAN})");
    assert!(peak <= PLAN, "busy threads peaked at {peak} over a plan of {PLAN}");
}

/// Keys other than counters (`increment` keys stay: metrics, claims, the expiry ring's slot
/// heads and tails, at most two per slot), sorted, with the expiry ring's entries counted
/// rather than named (an entry moves as its solve is queued again).
fn non_counter_keys(redis: &RedisServer) -> (Vec<String>, usize) {
    let keys: Vec<String> = redis
        .keys()
        .into_iter()
        .filter(|k| {
            !(k.starts_with("metrics/")
                || k.ends_with("/head")
                || k.ends_with("/tail")
                || k.ends_with("/init")
                || k.ends_with("/claim"))
        })
        .collect();
    let is_entry = |k: &String| k.starts_with("expiry/") && k != "expiry/cursor";
    let entries = keys.iter().filter(|k| is_entry(k)).count();
    let mut named: Vec<String> = keys.into_iter().filter(|k| !is_entry(k)).collect();
    named.sort();
    (named, entries)
}

/// Abandoned solves are removed within one expiry bucket of their expiry (their deadline plus
/// one request timeout plus `abandon_after_ms`), whatever else is queued: a finished solve kept
/// for minutes was queued before them. Requests keep arriving (each sweeps), and the store
/// comes back to the keys and bytes it had before the burst (thread slots, a fixed set of keys
/// per plan, all free again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn abandoned_solves_go_at_their_expiry_whatever_is_queued_before_them() {
    let spin = support::spin::binary();
    let redis = RedisServer::start("expiry");
    let emulator = Emulator::start(
        EmulatorConfig::default()
            .with_seed(13)
            .with_account(KEY, 100)
            .with_solve_time(CaptchaKind::Image, 60_000, 70_000)
            .with_solve_time(CaptchaKind::Turnstile, 500, 1_000),
    )
    .await
    .unwrap();
    let extra = [("solve_deadline_ms", "15000"), ("abandon_after_ms", "5000"), ("upstream_timeout_ms", "2000")];
    let edge = spin_up(&spin, &emulator, &extra, Some(&redis.runtime_config())).await;
    let clients = Clients::new(TOKEN);
    // A finished solve, kept for minutes, queued ahead of the burst.
    let first = clients.call(&edge.url(), "POST", "/v1/solve?wait=25", Some(turnstile())).await;
    let kept = match first.status {
        202 => clients.collect(&[edge.url()], first.body["id"].as_str().unwrap()).await,
        _ => first,
    };
    assert_eq!(kept.status, 200, "{}", kept.body);
    let baseline = non_counter_keys(&redis);
    let (_, baseline_bytes) = redis.usage();

    const BURST: usize = 5;
    let mut ids = Vec::new();
    for i in 0..BURST {
        let task = json!({"type": "image", "image": image(250_000, 40 + i as u8)}).to_string();
        let reply = clients.call(&edge.url(), "POST", "/v1/solve?wait=0", Some(task)).await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        ids.push(reply.body["id"].as_str().unwrap().to_owned());
    }
    let expiries: Vec<u64> = ids.iter().map(|id| record_expiry(&redis, id)).collect();
    let expiry = *expiries.iter().max().unwrap();
    let (_, burst_bytes) = redis.usage();
    eprintln!(
        "{BURST} abandoned image solves: {} bytes stored; they expire in {} ms",
        burst_bytes - baseline_bytes,
        expiry - epoch_ms()
    );

    // Requests keep arriving (a 404 sweeps), one every 200 ms, until the burst is gone. None
    // goes before its record's expiry; all are gone within 10 requests sent once one expiry
    // bucket (1 s) has passed after the last expiry: a request sweeps every bucket due and 2
    // entries of them, so the burst's 5 entries need 3 requests, whatever else is queued ahead
    // (counted in requests, not in time, so a slow machine cannot fail it).
    const BUCKET_MS: u64 = 1_000;
    let (mut requests, mut due_requests) = (0, 0);
    let gone_at = loop {
        let keys = redis.keys();
        let looked = epoch_ms();
        let stored = |id: &str| keys.iter().any(|k| k.starts_with(&format!("solve/{id}")));
        for (id, exp) in ids.iter().zip(&expiries) {
            assert!(stored(id) || *exp <= looked, "solve {id} removed before its expiry ({} ms early)", exp - looked);
        }
        let left = ids.iter().filter(|id| stored(id)).count();
        if left == 0 {
            break looked;
        }
        assert!(
            due_requests < 10,
            "{left} abandoned solves left after {due_requests} requests a bucket past their expiry"
        );
        assert!(looked < expiry + support::wait::HANG_GUARD.as_millis() as u64, "the solves never expired");
        let sent_at = epoch_ms();
        let reply = clients.call(&edge.url(), "GET", &format!("/v1/solve/{requests:032x}?wait=0"), None).await;
        assert_eq!(reply.status, 404);
        requests += 1;
        due_requests += usize::from(sent_at >= expiry + BUCKET_MS);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (keys, bytes) = redis.usage();
    eprintln!(
        "abandoned solves gone {} ms after their expiry ({requests} requests, {due_requests} a bucket past it); store: {keys} keys ({} not counters, {} before the burst), {bytes} bytes ({baseline_bytes} before)",
        gone_at as i64 - expiry as i64,
        non_counter_keys(&redis).0.len(),
        baseline.0.len()
    );
    // Thread slots are the plan's fixed set of keys (created once, freed in place): the burst
    // may have created some; each must be free now. Everything else is as before the burst.
    let without_slots = |(keys, entries): (Vec<String>, usize)| {
        (keys.into_iter().filter(|k| !k.starts_with("threads/slot/")).collect::<Vec<_>>(), entries)
    };
    let after = non_counter_keys(&redis);
    for slot in after.0.iter().filter(|k| k.starts_with("threads/slot/")) {
        let value: serde_json::Value = serde_json::from_str(&redis.cli(&["GET", slot])).unwrap();
        assert!(value["holder"] == "" || value["exp"].as_u64().unwrap() <= epoch_ms(), "{slot} still held: {value}");
    }
    assert_eq!(without_slots(after), without_slots(baseline), "the store is back to what it held before the burst");
    assert!(bytes < baseline_bytes + 16 * 1024, "{bytes} bytes left ({baseline_bytes} before the burst)");
    let again = clients
        .call(&edge.url(), "GET", &format!("/v1/solve/{}?wait=0", kept.body["id"].as_str().unwrap()), None)
        .await;
    assert_eq!((again.status, &again.body), (200, &kept.body), "the finished solve queued ahead is still kept");
}

/// Which runtime a store-fault test runs on (both on one Redis).
enum Edge {
    Spin(SpinUp),
    Serve { serve: ServeProcess, _dir: StateDir },
}

impl Edge {
    fn url(&self) -> String {
        match self {
            Edge::Spin(spin) => spin.url(),
            Edge::Serve { serve, .. } => serve.url.clone(),
        }
    }
}

async fn edge_on_redis(spin: bool, emulator: &Emulator, redis: &RedisServer) -> Edge {
    if spin {
        let binary = support::spin::binary();
        return Edge::Spin(spin_up(&binary, emulator, &[], Some(&redis.runtime_config())).await);
    }
    edge_wasm();
    let dir = std::env::temp_dir().join(format!("captchaai-edge-faults-{}-{}", std::process::id(), redis.port));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("runtime-config.toml");
    std::fs::write(&file, redis.runtime_config()).unwrap();
    let flags = ["--runtime-config-file".as_ref(), file.as_os_str()];
    Edge::Serve { serve: ServeProcess::start(&flags, KEY, TOKEN, &emulator.base_url()).await, _dir: StateDir(dir) }
}

/// What the edge answers while its store is away, to requests that need it (`/v1/threads`
/// does not: it asks CaptchaAI), all sent at once: each answer's status (0: no answer within
/// `limit`), whether it is a JSON error with `Retry-After`, and how long it took. The POST
/// carries `Idempotency-Key: key`, so its claim may be taken (the store answers late) with no
/// solve behind it.
async fn while_away(
    clients: &Clients,
    base: &str,
    ids: &[String],
    key: &str,
    limit: Duration,
) -> Vec<(String, u16, bool, u128)> {
    let requests = [
        ("GET", format!("/v1/solve/{}?wait=2", ids[0]), None),
        ("POST", "/v1/solve?wait=2".to_owned(), Some(turnstile())),
        ("DELETE", format!("/v1/solve/{}", "0".repeat(32)), None),
        ("GET", "/metrics".to_owned(), None),
    ];
    let answers = requests.into_iter().map(|(method, path, body)| async move {
        let started = Instant::now();
        let headers: &[(&str, &str)] = if method == "POST" { &[("idempotency-key", key)] } else { &[] };
        let answer = tokio::time::timeout(limit, clients.raw(base, method, &path, headers, body)).await;
        let (status, typed) = match answer {
            Ok((status, headers, bytes)) => {
                let json = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
                let typed = json.as_ref().is_some_and(|b| b["class"] == "transient" && b["code"].is_string())
                    && headers.contains_key("retry-after");
                (status, typed)
            }
            Err(_) => (0, false),
        };
        (format!("{method} {path}"), status, typed, started.elapsed().as_millis())
    });
    futures_util::future::join_all(answers).await
}

/// The store restarted (`SHUTDOWN SAVE`, started again 3 s later) and, separately, paused
/// (SIGSTOP) until the requests sent meanwhile are answered, while solves are in flight: every
/// such request gets a JSON 503 with `Retry-After`, nothing is lost or submitted twice, and
/// service resumes without restarting the edge. The keyed POSTs sent meanwhile, retried with
/// their keys afterwards, each get their solve, submitted once, whatever of their claim the
/// store kept.
async fn store_faults(spin: bool) {
    let mut redis = RedisServer::start(if spin { "faults-spin" } else { "faults-serve" });
    let emulator = Emulator::start(EmulatorConfig::default().with_seed(14).with_account(KEY, 20).with_solve_time(
        CaptchaKind::Turnstile,
        8_000,
        12_000,
    ))
    .await
    .unwrap();
    let mut edge = edge_on_redis(spin, &emulator, &redis).await;
    let clients = Clients::new(TOKEN);
    let start = |n: usize, base: String| {
        let clients = &clients;
        async move {
            let mut ids = Vec::new();
            for _ in 0..n {
                let reply = clients.call(&base, "POST", "/v1/solve?wait=0", Some(turnstile())).await;
                assert_eq!(reply.status, 202, "{}", reply.body);
                ids.push(reply.body["id"].as_str().unwrap().to_owned());
            }
            ids
        }
    };
    let runtime = if spin { "real Spin" } else { "captchaai-serve" };
    // Real Spin 4.1's Redis store has no command timeout and does not reconnect: while Redis
    // is away its requests wait (status 0: no answer within 10 s), and after Redis is back the
    // instance keeps waiting until it is restarted (docs/operating.md). The bundled host's store
    // calls time out (2 s): it answers 503 and recovers by itself; its 60 s limit only guards
    // against a hang (how long the answers took is printed, not asserted: that is the machine's
    // speed).
    let limit = Duration::from_secs(if spin { 10 } else { 60 });
    let answered = |status: u16, typed: bool| (status == 503 && typed) || (spin && status == 0);
    let mut ids = start(3, edge.url()).await;

    redis.stop_keeping_data();
    let answers = while_away(&clients, &edge.url(), &ids, "away-stopped", limit).await;
    eprintln!("{runtime}, Redis stopped: {answers:?}");
    redis.start_again();
    for (request, status, typed, ms) in &answers {
        assert!(answered(*status, *typed), "{request} while Redis is stopped: {status} (typed {typed}) in {ms} ms");
    }
    if spin {
        drop(edge);
        edge = edge_on_redis(spin, &emulator, &redis).await;
    }

    ids.extend(start(2, edge.url()).await);
    redis.pause();
    // Redis stays paused until every request sent meanwhile is answered (or, under real Spin,
    // given up on after `limit`).
    let answers = while_away(&clients, &edge.url(), &ids, "away-paused", limit).await;
    redis.resume();
    eprintln!("{runtime}, Redis paused: {answers:?}");
    for (request, status, typed, ms) in &answers {
        assert!(answered(*status, *typed), "{request} while Redis is paused: {status} (typed {typed}) in {ms} ms");
    }
    if spin {
        drop(edge);
        edge = edge_on_redis(spin, &emulator, &redis).await;
    }

    // Every solve finishes, each submitted once, the keyed ones too.
    for id in &ids {
        let reply = clients.collect(&[edge.url()], id).await;
        assert_eq!(reply.status, 200, "{id}: {}", reply.body);
    }
    let mut keyed = Vec::new();
    for key in ["away-stopped", "away-paused"] {
        let started = Instant::now();
        let reply = post_until_done(&clients, &edge.url(), key, &turnstile()).await;
        eprintln!("{runtime}: {key} retried: {} in {} ms", reply.status, started.elapsed().as_millis());
        assert_eq!(reply.status, 200, "{key} retried after the store came back: {}", reply.body);
        keyed.push(reply.body["id"].as_str().unwrap().to_owned());
        let again = post_until_done(&clients, &edge.url(), key, &turnstile()).await;
        assert_eq!((again.status, &again.body), (200, &reply.body), "{key} again: the same solve");
    }
    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, ids.len() + keyed.len(), "each solve submitted once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: --include-ignored"]
async fn redis_restarted_or_paused_under_the_serve_host_gets_503s_and_loses_nothing() {
    store_faults(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn redis_restarted_or_paused_under_real_spin_gets_503s_and_loses_nothing() {
    store_faults(true).await;
}

/// A keyed POST's claim held by a request that never created its solve (set straight in Redis,
/// as a creator killed between its claim and its record, or one whose store failed under it,
/// leaves it): a POST with that key waits for the claimer, then takes the creation over as the
/// next attempt (not before the claimer's 2 s plus 1 s of clock skew are up, as Redis's own
/// record of the commands times it), and the key makes one solve, submitted once, which a retry
/// gets again; deleting it removes both attempts' claims.
async fn a_claim_never_created(spin: bool) {
    let redis = RedisServer::start(if spin { "claim-spin" } else { "claim-serve" });
    let emulator = Emulator::start(EmulatorConfig::default().with_seed(15).with_account(KEY, 5)).await.unwrap();
    let edge = edge_on_redis(spin, &emulator, &redis).await;
    let clients = Clients::new(TOKEN);
    let post = |wait: u32| {
        let (clients, base) = (&clients, edge.url());
        async move {
            let path = format!("/v1/solve?wait={wait}");
            clients.call_with(&base, "POST", &path, &[("idempotency-key", "stuck-key")], Some(turnstile())).await.0
        }
    };
    // The key's first attempt id, freed again (DELETE removes the solve and its claim), then
    // claimed by nobody's request.
    let first = post(0).await;
    assert_eq!(first.status, 202, "{}", first.body);
    let first_id = first.body["id"].as_str().unwrap().to_owned();
    assert_eq!(clients.call(&edge.url(), "DELETE", &format!("/v1/solve/{first_id}"), None).await.status, 200);
    let claim = format!("solve/{first_id}/claim");
    assert!(!redis.keys().contains(&claim), "the claim went with the solve");
    redis.cli(&["INCR", &claim]);

    let monitor = redis.monitor().await;
    let taken_over = post(0).await;
    assert_eq!(taken_over.status, 202, "{}", taken_over.body);
    let id = taken_over.body["id"].as_str().unwrap().to_owned();
    assert_ne!(id, first_id, "the next attempt's id");
    // On Redis's clock (MONITOR): the POST claimed the next attempt no sooner than the claimer's
    // time (2 s) and the clock skew allowed (1 s) after it found the stuck claim taken.
    let saw = monitor.first(&["INCRBY", &claim]).expect("the POST tried the stuck claim");
    let next_claim = format!("solve/{id}/claim");
    let claimed = monitor.first(&["INCRBY", &next_claim]).expect("the POST claimed the next attempt");
    drop(monitor);
    let waited = claimed - saw;
    eprintln!(
        "{}: the POST took the creation over {waited:.0} ms after it saw the claim",
        if spin { "real Spin" } else { "captchaai-serve" }
    );
    assert!(
        waited >= 3_000.0,
        "the creation was taken over {waited:.0} ms after the claim was seen, before its time was up"
    );
    let again = post(0).await;
    assert_eq!((again.status, again.body["id"].as_str()), (202, Some(id.as_str())), "{}", again.body);
    let done = clients.collect(&[edge.url()], &id).await;
    assert_eq!(done.status, 200, "{}", done.body);
    let retried = post(0).await;
    assert_eq!((retried.status, &retried.body), (200, &done.body), "the stored response to a retry");
    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, 2, "the freed first solve and the taken-over one, once each");

    assert_eq!(clients.call(&edge.url(), "DELETE", &format!("/v1/solve/{id}"), None).await.status, 200);
    let claims: Vec<String> = redis.keys().into_iter().filter(|k| k.ends_with("/claim")).collect();
    assert!(claims.is_empty(), "claims left after the solve was deleted: {claims:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: --include-ignored"]
async fn a_claim_never_created_is_taken_over_under_the_serve_host() {
    a_claim_never_created(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn a_claim_never_created_is_taken_over_under_real_spin() {
    a_claim_never_created(true).await;
}
