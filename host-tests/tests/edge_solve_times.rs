//! The edge's shared solve-times models (adaptive polling, `edge/src/times.rs`) under real
//! Spin 4.1 on a real Redis: two `spin up` instances on one store learn ONE model per captcha
//! type, whichever instance solved, with no update lost when solves end at once on both; a
//! stored model the engine refuses is replaced, and the request still gets its answer. Ignored
//! by default (real Spin and redis-server): run with `--include-ignored` (support/mod.rs).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use captchaai_emulator::{CaptchaKind, Emulator, EmulatorConfig};
use support::edge_client::{Clients, Reply, image};
use support::redis::RedisServer;
use support::spin::SpinUp;

const KEY: &str = "0123456789abcdef0123456789abcdef";
const TOKEN: &str = "solve-times-test-token-7e57";

/// Image tasks: the engine's first wait for them is 1 s, and the emulator below answers within
/// 0.6 s, so each solve ends at its first poll, about a second after its POST.
const TYPE: &str = "image";

async fn spin_up(spin: &std::path::Path, emulator: &Emulator, runtime: &str) -> SpinUp {
    let edge = support::spin::root().join("target/edge/captchaai_edge.wasm");
    assert!(edge.exists(), "{} is missing: build it with `cargo xtask component && cargo xtask edge`", edge.display());
    let base = emulator.base_url();
    let variables = [("captchaai_key", KEY), ("client_tokens", TOKEN), ("api_base", base.as_str())];
    SpinUp::start_with(spin, &variables, Some(runtime)).await
}

/// One image task (distinct per `seed`) POSTed to `base` and long-polled there until it ends.
async fn solve(clients: &Clients, base: &str, seed: u16) -> Reply {
    let task = json!({"type": TYPE, "image": image(300 + usize::from(seed), seed as u8)});
    let first = clients.call(base, "POST", "/v1/solve?wait=25", Some(task.to_string())).await;
    if first.status != 202 {
        return first;
    }
    clients.collect(&[base.to_owned()], first.body["id"].as_str().unwrap()).await
}

/// `/metrics` of `base` as text.
async fn metrics(clients: &Clients, base: &str) -> String {
    let (status, _, text) = clients.raw(base, "GET", "/metrics", &[], None).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&text));
    String::from_utf8(text.to_vec()).unwrap()
}

/// The value of the series `series` (name and labels, exactly) in a `/metrics` text.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The model's observations of [`TYPE`] as `base` reports them (0 while it has none).
async fn observations(clients: &Clients, base: &str) -> f64 {
    value(&metrics(clients, base).await, &format!("captchaai_edge_solve_times_observations{{type=\"{TYPE}\"}}"))
        .unwrap_or(0.0)
}

/// `n` solves at once, alternately through the two instances; every one must be solved.
async fn solve_at_once(clients: &Arc<Clients>, bases: [&str; 2], n: u16, first_seed: u16) {
    let started = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let (clients, base) = (clients.clone(), bases[usize::from(i % 2)].to_owned());
            tokio::spawn(async move { solve(&clients, &base, first_seed + i).await })
        })
        .collect();
    for handle in handles {
        let reply = tokio::time::timeout(Duration::from_secs(120), handle).await.expect("a solve hung").unwrap();
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    eprintln!("{n} solves at once through both instances: {} ms", started.elapsed().as_millis());
}

/// Two instances on one Redis share one model of the type: solves through A, then through B,
/// are all in it (seen from either instance); solves ending at once on both instances are each
/// observed exactly once (the compare-and-swap loop loses no update, drops none); past 20
/// observations the model gives a first wait, shown with its quantiles; a stored model the
/// engine refuses is replaced by a fresh one, and its solve still answers 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real Spin 4.1+ and redis-server: --include-ignored"]
async fn two_spin_instances_on_one_redis_share_one_solve_times_model() {
    let spin = support::spin::binary();
    let redis = RedisServer::start("solve-times");
    let emulator = Emulator::start(EmulatorConfig::default().with_seed(22).with_account(KEY, 40).with_solve_time(
        CaptchaKind::Image,
        100,
        600,
    ))
    .await
    .unwrap();
    let runtime = redis.runtime_config();
    let a = spin_up(&spin, &emulator, &runtime).await;
    let b = spin_up(&spin, &emulator, &runtime).await;
    let (a, b) = (a.url(), b.url());
    let clients = Arc::new(Clients::new(TOKEN));
    assert_eq!(observations(&clients, &a).await, 0.0, "no model before any solve");

    // Through A, then through B, one at a time.
    for seed in 0..3 {
        let reply = solve(&clients, &a, seed).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(observations(&clients, &b).await, 3.0, "B sees what A learned");
    for seed in 3..6 {
        let reply = solve(&clients, &b, seed).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    for base in [&a, &b] {
        let text = metrics(&clients, base).await;
        let solved = value(&text, "captchaai_edge_solves_total{outcome=\"solved\",class=\"\",origin=\"\"}");
        assert_eq!(solved, Some(6.0), "{text}");
        let series = format!("captchaai_edge_solve_times_observations{{type=\"{TYPE}\"}}");
        assert_eq!(value(&text, &series), Some(6.0), "one model, every solve through both instances:\n{text}");
    }
    assert!(redis.keys().contains(&format!("solve-times/{TYPE}")), "the model is kept at solve-times/{TYPE}");

    // Solves ending at once on both instances: every one observed, none dropped.
    const AT_ONCE: u16 = 16;
    solve_at_once(&clients, [&a, &b], AT_ONCE, 100).await;
    let text = metrics(&clients, &a).await;
    let total = 6.0 + f64::from(AT_ONCE);
    let series = format!("captchaai_edge_solve_times_observations{{type=\"{TYPE}\"}}");
    assert_eq!(value(&text, &series), Some(total), "no update lost:\n{text}");
    for reason in ["contention", "store"] {
        let dropped = format!("captchaai_edge_solve_times_dropped_total{{reason=\"{reason}\"}}");
        assert_eq!(value(&text, &dropped), Some(0.0), "{text}");
    }
    // 22 observations: over the engine's 20, the model gives a first wait; and its quantiles.
    let first_wait = value(&text, &format!("captchaai_edge_solve_times_first_wait_seconds{{type=\"{TYPE}\"}}"));
    assert!(first_wait.is_some_and(|s| s >= 1.0), "a learned first wait: {text}");
    let quantiles: Vec<f64> = ["0.5", "0.9", "0.99"]
        .iter()
        .map(|q| {
            let series = format!("captchaai_edge_solve_times_quantile_seconds{{type=\"{TYPE}\",quantile=\"{q}\"}}");
            value(&text, &series).unwrap_or_else(|| panic!("no {series}:\n{text}"))
        })
        .collect();
    assert!(quantiles.windows(2).all(|w| w[0] <= w[1]) && quantiles[2] < 10.0, "quantiles {quantiles:?}");
    let conflicts = value(&text, "captchaai_edge_solve_times_conflicts_total").unwrap();
    eprintln!(
        "{total} observations ({conflicts} swaps lost a race and were tried again); first wait {first_wait:?} s; p50, p90, p99: {quantiles:?} s"
    );
    assert_eq!(value(&metrics(&clients, &b).await, &series), Some(total), "B reports the same model");

    // A stored model the engine refuses: the next solve still answers, and starts the model afresh.
    redis.cli(&["SET", &format!("solve-times/{TYPE}"), "{\"model\":\"not a model\",\"rev\":\"x\"}"]);
    let reply = solve(&clients, &b, 200).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(observations(&clients, &a).await, 1.0, "the refused model was replaced by a fresh one");
}
