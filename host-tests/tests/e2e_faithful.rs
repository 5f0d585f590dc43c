//! End to end against the emulator's more faithful (and unconfirmed) modes: the engine .wasm in
//! wasmtime, driven by the reference driver, over loopback with time-scaled timers on both
//! sides. Needs `cargo xtask component`.
//!
//! Tests named `unconfirmed_` run the emulator in a mode no live observation confirms (silent
//! queueing on busy threads, the answers to an account without a plan, unknown methods other
//! than hcaptcha): a green run shows the engine copes with that answer, not that the live
//! service gives it.

use std::sync::Arc;

use captchaai::{Clock, Config, EngineHost, FailureClass, Runner, RunnerOptions, SolveReport};
use captchaai_emulator::{BusyThreads, Emulator, EmulatorConfig, NoPlan, RecordedRequest};

const KEY: &str = "0123456789abcdef0123456789abcdef";
const PAGE: &str = "https://portal.example.com/export";
const TURNSTILE: &str =
    r#"{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"https://portal.example.com/export"}"#;
/// The engine's Turnstile deadline (the registry's default), virtual ms.
const DEADLINE_MS: u64 = 120_000;
/// The engine's default request timeout, virtual ms.
const REQUEST_TIMEOUT_MS: u64 = 30_000;

async fn emulator(config: EmulatorConfig, scale: f64) -> Emulator {
    Emulator::start(config.with_time_scale(scale).with_seed(11)).await.expect("emulator")
}

fn runner(scale: f64) -> Arc<Runner> {
    let host = EngineHost::embedded(None).expect("the embedded engine component");
    Arc::new(Runner::new(host, RunnerOptions::new(Clock::scaled(scale), 64)).unwrap())
}

fn config(emulator: &Emulator) -> Config {
    Config { base_url: Some(emulator.base_url()), ..Config::default() }
}

fn submits(requests: &[RecordedRequest]) -> usize {
    requests.iter().filter(|r| r.path == "/in.php").count()
}

/// Runs `n` Turnstile solves at once (each through `gate` when given); returns each report
/// with its virtual duration.
async fn solve_many(runner: &Arc<Runner>, config: &Config, n: usize, gated: Option<u64>) -> Vec<(SolveReport, u64)> {
    let gate = gated.map(|threads| Arc::new(runner.gate(threads, 0).unwrap().unwrap()));
    let mut handles = Vec::new();
    for _ in 0..n {
        let (runner, config, gate) = (runner.clone(), config.clone(), gate.clone());
        handles.push(tokio::spawn(async move {
            let ticket = match &gate {
                Some(gate) => Some(gate.enter().await.unwrap()),
                None => None,
            };
            let clock = runner.clock();
            let started = clock.now_ms();
            let report = runner.solve(TURNSTILE, KEY, &config).await.unwrap();
            let took = clock.now_ms() - started;
            if let (Some(gate), Some(ticket)) = (&gate, ticket) {
                gate.leave(ticket).unwrap();
            }
            (report, took)
        }));
    }
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

/// Every solve ended by the engine's bound (deadline + one request timeout).
fn check_bound(reports: &[(SolveReport, u64)]) {
    for (report, took) in reports {
        assert!(*took <= DEADLINE_MS + REQUEST_TIMEOUT_MS, "a solve took {took} ms: {:?}", report.outcome);
    }
}

/// UNCONFIRMED mode (the official SDK's reading: busy threads queue silently). Eight solves on
/// a 2-thread plan, 35 s each: the emulator runs them two by two (ready at 35, 70, 105, 140 s).
/// The engine cannot see the queue, so it submits each task once and polls; the six ready
/// before the 120 s deadline are solved, the last two end as DEADLINE_EXCEEDED (transient) by
/// the bound, and their tasks keep the plan's threads busy after the engine gave up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_silent_queue_without_a_gate_solves_what_fits_and_times_out_the_rest() {
    let scale = 50.0;
    let emulator = emulator(
        EmulatorConfig::default()
            .with_busy_threads(BusyThreads::SilentQueue)
            .with_account(KEY, 2)
            .with_all_solve_times(35_000, 35_000),
        scale,
    )
    .await;
    let runner = runner(scale);
    let reports = solve_many(&runner, &config(&emulator), 8, None).await;
    check_bound(&reports);
    let solved = reports.iter().filter(|(r, _)| r.outcome.is_ok()).count();
    let mut failures: Vec<(String, FailureClass)> =
        reports.iter().filter_map(|(r, _)| r.outcome.as_ref().err().map(|f| (f.code.clone(), f.class))).collect();
    failures.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(solved, 6, "failures: {failures:?}");
    assert_eq!(failures, vec![("DEADLINE_EXCEEDED".to_string(), FailureClass::Transient); 2]);
    // The queued solves took longer: their answers came a round or two later.
    let slowest = reports.iter().filter(|(r, _)| r.outcome.is_ok()).map(|(_, took)| *took).max().unwrap();
    assert!(slowest >= 105_000, "the last solved task waited two rounds ({slowest} ms)");
    let requests = emulator.requests();
    assert_eq!(submits(&requests), 8, "one submit per solve: nothing told the engine to resubmit");
    let stats = emulator.stats();
    assert_eq!((stats.tasks_created, stats.tasks_queued), (8, 6));
    // The abandoned tasks still hold both threads: silent queueing makes oversubscription
    // cost the plan's capacity after the client has given up.
    assert_eq!(emulator.threads_info(KEY).unwrap().working_threads, 2);
    assert!(requests.iter().all(|r| !r.key_in_url && !r.key_in_headers));
}

/// UNCONFIRMED mode, with the engine's thread gate sized from threadsinfo (what the batch CLI
/// does): the emulator never has to queue and every solve finishes within its own deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_silent_queue_with_the_thread_gate_never_queues_and_solves_everything() {
    let scale = 50.0;
    let emulator = emulator(
        EmulatorConfig::default()
            .with_busy_threads(BusyThreads::SilentQueue)
            .with_account(KEY, 2)
            .with_all_solve_times(35_000, 35_000),
        scale,
    )
    .await;
    let runner = runner(scale);
    let config = config(&emulator);
    let info = runner.threads_info(KEY, &config).await.unwrap().unwrap();
    assert_eq!((info.threads, info.working_threads), (2, 0));
    let reports = solve_many(&runner, &config, 8, Some(info.threads)).await;
    check_bound(&reports);
    for (report, _) in &reports {
        if let Err(f) = &report.outcome {
            panic!("failed: {} ({:?}): {}", f.code, f.class, f.message);
        }
    }
    let stats = emulator.stats();
    assert_eq!((stats.tasks_created, stats.tasks_queued), (8, 0));
    assert_eq!(submits(&emulator.requests()), 8);
}

/// The default mode (busy threads answer ERROR_ZERO_BALANCE) under the same load without a
/// gate: the engine diagnoses with threadsinfo, waits and resubmits; every solve is solved or
/// ends transient by the bound, and a busy plan is never reported as a dead one (permanent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_balance_mode_without_a_gate_waits_for_threads_and_never_calls_a_busy_plan_dead() {
    let scale = 50.0;
    let emulator =
        emulator(EmulatorConfig::default().with_account(KEY, 2).with_all_solve_times(35_000, 35_000), scale).await;
    let runner = runner(scale);
    let reports = solve_many(&runner, &config(&emulator), 8, None).await;
    check_bound(&reports);
    let mut solved = 0;
    for (report, _) in &reports {
        match &report.outcome {
            Ok(_) => solved += 1,
            Err(f) => {
                assert_eq!(f.class, FailureClass::Transient, "{}: {}", f.code, f.message);
                assert!(["ERROR_ZERO_BALANCE", "DEADLINE_EXCEEDED"].contains(&f.code.as_str()), "{}", f.code);
            }
        }
    }
    // Two threads, 35 s tasks, 120 s deadlines: at least three rounds of two fit.
    assert!(solved >= 4, "{solved} solved");
    let requests = emulator.requests();
    let threadsinfo = requests.iter().filter(|r| r.action.as_deref() == Some("threadsinfo")).count();
    assert!(threadsinfo >= 6, "every refused submit was diagnosed ({threadsinfo} threadsinfo calls)");
    assert_eq!(emulator.stats().tasks_queued, 0);
}

/// UNCONFIRMED answers for an account without a plan, in both busy-thread modes: each ends at
/// once as a permanent failure with the code the service gave, and threadsinfo through the
/// engine's account functions says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_accounts_without_a_plan_fail_permanently_in_every_variant() {
    let scale = 100.0;
    const ZERO_BALANCE: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const GONE: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const EMPTY: &str = "cccccccccccccccccccccccccccccccc";
    for busy in [BusyThreads::ZeroBalance, BusyThreads::SilentQueue] {
        let emulator = emulator(
            EmulatorConfig::default()
                .with_busy_threads(busy)
                .with_account_without_plan_answering(ZERO_BALANCE, 5, NoPlan::ZeroBalance)
                .with_account_without_plan_answering(GONE, 5, NoPlan::KeyDoesNotExist)
                .with_account_without_plan_answering(EMPTY, 5, NoPlan::ZeroThreads),
            scale,
        )
        .await;
        let runner = runner(scale);
        let config = config(&emulator);
        for (key, code, requests) in [
            (ZERO_BALANCE, "ERROR_ZERO_BALANCE", 2),
            (GONE, "ERROR_KEY_DOES_NOT_EXIST", 1),
            (EMPTY, "ERROR_ZERO_BALANCE", 2),
        ] {
            let report = runner.solve(TURNSTILE, key, &config).await.unwrap();
            let failure = report.outcome.unwrap_err();
            assert_eq!(
                (failure.code.as_str(), failure.class, report.requests),
                (code, FailureClass::Permanent, requests),
                "{busy:?}: {}",
                failure.message
            );
        }
        let gone = runner.threads_info(GONE, &config).await.unwrap().unwrap_err();
        assert_eq!((gone.code.as_str(), gone.class), ("ERROR_KEY_DOES_NOT_EXIST", FailureClass::Permanent));
        let empty = runner.threads_info(EMPTY, &config).await.unwrap().unwrap();
        assert_eq!((empty.threads, empty.working_threads), (0, 0));
        // A gate for a 0-thread plan is refused rather than waiting forever.
        assert!(runner.gate(empty.threads, 0).unwrap().is_err());
        assert_eq!(emulator.stats().tasks_created, 0);
    }
}

/// hcaptcha is refused by the engine before anything is sent. A type the service does not
/// solve (modelled with `--unsupported-method`; the live hcaptcha answer is ERROR_SERVER_ERROR)
/// ends as a transient ERROR_SERVER_ERROR after bounded, backed-off submits: a clear failure
/// by the bound, not a hang. (That every unknown method answers so is UNCONFIRMED.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_unsupported_methods_end_as_a_bounded_server_error() {
    let scale = 100.0;
    let emulator =
        emulator(EmulatorConfig::default().with_account(KEY, 5).with_unsupported_method("friendly_captcha"), scale)
            .await;
    let runner = runner(scale);
    let config = config(&emulator);

    let hcaptcha =
        format!(r#"{{"type":"hcaptcha","sitekey":"a5f74b19-9e45-40e0-b45d-47ff91b7a6c2","pageurl":"{PAGE}"}}"#);
    let report = runner.solve(&hcaptcha, KEY, &config).await.unwrap();
    let failure = report.outcome.unwrap_err();
    assert_eq!((failure.code.as_str(), failure.class, report.requests), ("INVALID_TASK", FailureClass::Permanent, 0));
    assert!(emulator.requests().is_empty());

    let friendly =
        format!(r#"{{"type":"friendly_captcha","sitekey":"FCMGEMUD2KTDSQ5H","pageurl":"{PAGE}","version":"v2"}}"#);
    let clock = runner.clock();
    let started = clock.now_ms();
    let report = runner.solve(&friendly, KEY, &config).await.unwrap();
    let took = clock.now_ms() - started;
    let failure = report.outcome.unwrap_err();
    assert_eq!((failure.code.as_str(), failure.class), ("ERROR_SERVER_ERROR", FailureClass::Transient));
    assert!(took <= DEADLINE_MS + REQUEST_TIMEOUT_MS, "took {took} ms");
    let requests = emulator.requests();
    assert_eq!(submits(&requests), report.requests as usize);
    // Retries back off 10, 20, 40 s; the next (60 s) would pass the 120 s deadline.
    assert_eq!(report.requests, 4, "{}", failure.message);
    assert!(requests.iter().all(|r| r.reply_code.as_deref() == Some("ERROR_SERVER_ERROR")));
    assert_eq!(emulator.stats().tasks_created, 0);
}
