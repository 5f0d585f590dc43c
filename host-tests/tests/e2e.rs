//! End to end over loopback with real timers: the engine .wasm in wasmtime, driven by the
//! reference driver, against the emulator. Time runs 100x faster on both sides.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use captchaai::{Clock, Config, EngineHost, FailureClass, Runner, RunnerOptions, SolveReport};
use captchaai_emulator::{Emulator, EmulatorConfig, Fault, RecordedRequest};

mod support;

const SCALE: f64 = 100.0;
const KEY: &str = "0123456789abcdef0123456789abcdef";
const GOOGLEKEY: &str = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-";
const PAGE: &str = "https://portal.example.com/export";
/// Loopback and scheduling jitter allowed when checking poll gaps, in virtual ms (10 ms real).
const JITTER_MS: u64 = 1_000;

async fn emulator(config: EmulatorConfig) -> Emulator {
    Emulator::start(config.with_time_scale(SCALE).with_seed(7)).await.expect("emulator")
}

fn runner() -> Runner {
    let host = EngineHost::embedded(None).expect("the embedded engine component");
    Runner::new(host, RunnerOptions::new(Clock::scaled(SCALE), 64)).unwrap()
}

fn config(emulator: &Emulator) -> Config {
    Config { base_url: Some(emulator.base_url()), ..Config::default() }
}

fn png(side: u32) -> String {
    // A tiny but valid PNG header followed by filler, over 100 bytes.
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.extend_from_slice(&side.to_be_bytes());
    bytes.extend_from_slice(&side.to_be_bytes());
    bytes.resize(160, 7);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn tasks() -> Vec<(&'static str, String)> {
    let image = png(60);
    let cells: Vec<String> = (0..9).map(|_| format!("\"{}\"", png(100))).collect();
    let proxy = r#""proxy":"user:pass@203.0.113.7:3128","proxytype":"HTTP""#;
    vec![
        (
            "recaptcha_v2",
            format!(r#"{{"type":"recaptcha_v2","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","invisible":true}}"#),
        ),
        (
            "recaptcha_v2_enterprise",
            format!(r#"{{"type":"recaptcha_v2_enterprise","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}"}}"#),
        ),
        (
            "recaptcha_v3",
            format!(
                r#"{{"type":"recaptcha_v3","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"verify","min_score":0.3}}"#
            ),
        ),
        (
            "recaptcha_v3_enterprise",
            format!(
                r#"{{"type":"recaptcha_v3_enterprise","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"login"}}"#
            ),
        ),
        (
            "turnstile",
            format!(
                r#"{{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"{PAGE}","action":"login"}}"#
            ),
        ),
        ("cloudflare_challenge", format!(r#"{{"type":"cloudflare_challenge","pageurl":"{PAGE}",{proxy}}}"#)),
        (
            "geetest_v3",
            format!(
                r#"{{"type":"geetest_v3","gt":"81388ea1fc187e0c335c0a8907ff2625","challenge":"12345678abc90123d45678ef90123a456b","pageurl":"{PAGE}"}}"#
            ),
        ),
        (
            "geetest_v4",
            format!(r#"{{"type":"geetest_v4","captcha_id":"e392e1d7fd421dc63325744d5a2b9c73","pageurl":"{PAGE}"}}"#),
        ),
        (
            "captchafox",
            format!(r#"{{"type":"captchafox","sitekey":"sk_11111111111111111111","pageurl":"{PAGE}",{proxy}}}"#),
        ),
        (
            "friendly_captcha",
            format!(r#"{{"type":"friendly_captcha","sitekey":"FCMGEMUD2KTDSQ5H","pageurl":"{PAGE}","version":"v2"}}"#),
        ),
        (
            "lemin",
            format!(
                r#"{{"type":"lemin","captcha_id":"CROPPED_3dfdd5c_d1872b526b794d83","div_id":"lemin-cropped-captcha","pageurl":"{PAGE}"}}"#
            ),
        ),
        ("image", format!(r#"{{"type":"image","image":"{image}","numeric":1}}"#)),
        ("image_multipart", format!(r#"{{"type":"image","image":"{image}","upload":"multipart"}}"#)),
        // Unconfirmed: solve.php (the synchronous image endpoint) is not confirmed against the live
        // service (captchaai-api.md); a pass shows the engine matches the emulator's reading of it.
        ("unconfirmed_image_sync", format!(r#"{{"type":"image","image":"{image}","sync":true}}"#)),
        ("grid", format!(r#"{{"type":"grid","image":"{image}","instructions":"buses"}}"#)),
        ("bls", format!(r#"{{"type":"bls","instructions":"664","images":[{}]}}"#, cells.join(","))),
    ]
}

fn solved(report: &SolveReport) -> &captchaai::Solution {
    match &report.outcome {
        Ok(solution) => solution,
        Err(f) => panic!("failed: {} ({:?}): {}", f.code, f.class, f.message),
    }
}

/// Every request carried the key only in the body, and no task was polled faster than every 5 s.
fn check_log(requests: &[RecordedRequest]) {
    assert!(requests.iter().any(|r| r.polled_id.is_some()), "the log holds polls to check");
    let mut last: HashMap<String, u64> = HashMap::new();
    for r in requests {
        assert!(!r.key_in_url && !r.key_in_headers, "the key left the body: {} {}", r.method, r.path);
        assert_eq!(r.method, "POST", "{}", r.path);
        if let Some(id) = &r.polled_id {
            if let Some(previous) = last.get(id) {
                assert!(
                    r.at_ms + JITTER_MS >= previous + 5_000,
                    "task {id} polled {} ms after the last poll",
                    r.at_ms - previous
                );
            }
            last.insert(id.clone(), r.at_ms);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_captcha_type_is_solved_against_the_emulator() {
    let emulator = emulator(EmulatorConfig::default().with_account(KEY, 50)).await;
    let runner = Arc::new(runner());
    let config = config(&emulator);
    let mut handles = Vec::new();
    for (name, task) in tasks() {
        let (runner, config) = (runner.clone(), config.clone());
        handles.push(tokio::spawn(async move { (name, runner.solve(&task, KEY, &config).await.unwrap()) }));
    }
    for handle in handles {
        let (name, report) = handle.await.unwrap();
        let solution = solved(&report);
        assert!(!solution.task_id.clone().unwrap_or_default().is_empty() || name == "unconfirmed_image_sync", "{name}");
        let has_ua = solution.user_agent.is_some();
        let wants_ua = matches!(
            name,
            "recaptcha_v2_enterprise" | "recaptcha_v3_enterprise" | "cloudflare_challenge" | "captchafox"
        );
        assert_eq!(has_ua, wants_ua, "{name}: user agent");
        let structured = matches!(solution.answer, captchaai::Answer::Json(_));
        assert_eq!(
            structured,
            matches!(name, "geetest_v3" | "geetest_v4" | "lemin" | "grid" | "bls"),
            "{name}: answer shape"
        );
    }
    check_log(&emulator.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_class_ends_as_the_tables_say() {
    let emulator = emulator(EmulatorConfig::default().with_account(KEY, 20).with_all_solve_times(6_000, 8_000)).await;
    let runner = runner();
    let config = config(&emulator);
    let task = &tasks()[4].1; // turnstile

    // Transient faults at submit and while polling are retried and the solve succeeds.
    for fault in [
        Fault::Code("ERROR_SERVER_ERROR".into()),
        Fault::Html502,
        Fault::Drop,
        Fault::PlainText("ERROR_INTERNAL_SERVER_ERROR".into()),
        Fault::Slow(90_000), // 3x the 30 s request timeout: margin for a loaded machine
        Fault::Status(503, "Service Unavailable".into()),
    ] {
        emulator.force_next(1, fault.clone());
        let report = runner.solve(task, KEY, &config).await.unwrap();
        solved(&report);
        assert!(report.requests >= 3, "{fault:?}: the faulted request was retried ({} requests)", report.requests);
    }
    // Permanent codes end at once with the raw code.
    emulator.force_next(1, Fault::Code("ERROR_BAD_TOKEN_OR_PAGEURL".into()));
    let report = runner.solve(task, KEY, &config).await.unwrap();
    let failure = report.outcome.unwrap_err();
    assert_eq!(
        (failure.code.as_str(), failure.class, report.requests),
        ("ERROR_BAD_TOKEN_OR_PAGEURL", FailureClass::Permanent, 1)
    );
    // An unknown key is permanent; the emulator bans after repeated bad keys: permanent, 300 s.
    let unknown = "ffffffffffffffffffffffffffffffff";
    for _ in 0..5 {
        let failure = runner.solve(task, unknown, &config).await.unwrap().outcome.unwrap_err();
        assert_eq!(failure.code, "ERROR_KEY_DOES_NOT_EXIST");
    }
    let banned = runner.solve(task, KEY, &config).await.unwrap().outcome.unwrap_err();
    assert_eq!(
        (banned.code.as_str(), banned.class, banned.retry_after_ms),
        ("IP_BANNED", FailureClass::Permanent, Some(300_000))
    );
    check_log(&emulator.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_balance_waits_for_busy_threads_and_stops_on_a_dead_plan() {
    let no_plan = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let emulator = emulator(EmulatorConfig::default().with_account(KEY, 2).with_account_without_plan(no_plan, 5)).await;
    let runner = Arc::new(runner());
    let config = config(&emulator);
    let task = tasks()[4].1.clone();

    let failure = runner.solve(&task, no_plan, &config).await.unwrap().outcome.unwrap_err();
    assert_eq!((failure.code.as_str(), failure.class), ("ERROR_ZERO_BALANCE", FailureClass::Permanent));

    emulator.occupy_threads(KEY, 2).unwrap();
    let since = emulator.requests().last().map_or(0, |r| r.seq + 1);
    let solving = tokio::spawn({
        let (runner, config) = (runner.clone(), config.clone());
        async move { runner.solve(&task, KEY, &config).await.unwrap() }
    });
    // Other clients hold every thread until this solve has been refused for busy threads and
    // has diagnosed it with threadsinfo (the emulator's log shows both), then let go.
    let diagnosed = async || {
        let requests = emulator.requests_since(since);
        let refused = requests.iter().any(|r| r.reply_code.as_deref() == Some("ERROR_ZERO_BALANCE"));
        let threadsinfo = requests.iter().any(|r| r.action.as_deref() == Some("threadsinfo"));
        (refused && threadsinfo) || solving.is_finished()
    };
    support::wait::until("the solve to diagnose the busy threads", diagnosed).await;
    assert!(!solving.is_finished(), "the solve waits while the threads are busy");
    emulator.release_threads(KEY, 2).unwrap();
    let report = solving.await.unwrap();
    solved(&report);
    check_log(&emulator.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsolvable_captchas_get_one_fresh_task_then_the_unsolvable_outcome() {
    let sitekey = "0x4AAAAAAAUnsolvableSitekey";
    let emulator = emulator(EmulatorConfig::default().with_account(KEY, 5).with_unsolvable_sitekey(sitekey)).await;
    let runner = runner();
    let task = format!(r#"{{"type":"turnstile","sitekey":"{sitekey}","pageurl":"{PAGE}"}}"#);
    let report = runner.solve(&task, KEY, &config(&emulator)).await.unwrap();
    let failure = report.outcome.unwrap_err();
    assert_eq!((failure.code.as_str(), failure.class), ("ERROR_CAPTCHA_UNSOLVABLE", FailureClass::Unsolvable));
    let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
    assert_eq!(submits, 2, "one original task and one fresh resubmission");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapped_instance_is_replaced_and_every_solve_continues() {
    let emulator =
        emulator(EmulatorConfig::default().with_account(KEY, 100).with_all_solve_times(10_000, 20_000)).await;
    let runner = Arc::new(runner());
    let config = config(&emulator);
    let task = tasks()[0].1.clone();
    let mut handles = Vec::new();
    for _ in 0..20 {
        let (runner, config, task) = (runner.clone(), config.clone(), task.clone());
        handles.push(tokio::spawn(async move { runner.solve(&task, KEY, &config).await }));
    }
    // Once every solve is under way (its task submitted: the emulator's log), make the instance
    // run out of memory: its next allocation that needs more memory traps.
    let submitted = async || {
        let submits = emulator.requests().iter().filter(|r| r.path == "/in.php").count();
        submits == handles.len() || handles.iter().any(|h| h.is_finished())
    };
    support::wait::until("every solve to submit its task", submitted).await;
    assert!(handles.iter().all(|h| !h.is_finished()), "the solves are still under way (10-20 s each)");
    runner.freeze_memory();
    let big = format!(
        r#"{{"type":"image","image":"{}"}}"#,
        base64::engine::general_purpose::STANDARD.encode({
            let mut bytes = b"GIF89a\x10\x00\x10\x00".to_vec();
            bytes.resize(900_000, 1);
            bytes
        })
    );
    let image = runner.solve(&big, KEY, &config).await.unwrap();
    solved(&image);
    for handle in handles {
        solved(&handle.await.unwrap().unwrap());
    }
    assert!(runner.stats().recoveries >= 1, "the instance was replaced");
    check_log(&emulator.requests());
}
