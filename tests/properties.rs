//! Property tests: random tasks, configs and upstream behaviour (including arbitrary bytes),
//! driven by a faithful host model that may stall (sleep past a request's due time, past the
//! deadline). Invariants: every request is sent before the deadline, except at most one poll (the
//! last poll) sent after it by a stalled host, before the submit plus the type's token lifetime
//! and before any result came back at or after the deadline; every request is answered or timed
//! out by `ends_by`; a host that never stalls sees the end by the deadline plus one request
//! timeout, a stalled one by `ends_by` or when it wakes; sticky terminals, identical decisions
//! after snapshot/restore at any step, the key only in request bodies, polls at least 5 s apart,
//! and no panics on any input; with and without a learned solve-times model.

mod common;

use captchaai_engine::{
    ApiKey, Config, Output, RequestKind, Solve, SolveTimes, Task, TransportError, codes, task_types,
};
use common::{KEY, PAGE, min_poll_gap, solution};
use proptest::prelude::*;

/// What the upstream does with one request.
#[derive(Clone, Debug)]
enum Upstream {
    Reply { latency: u64, status: u16, body: Vec<u8> },
    Transport { latency: u64, error: TransportError },
    Silence,
}

fn tasks() -> Vec<String> {
    let gif = {
        let mut bytes = b"GIF89a\x10\x00\x10\x00".to_vec();
        bytes.resize(150, 7);
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes)
    };
    let cells = format!("[{}]", vec![format!("\"{gif}\""); 9].join(","));
    vec![
        format!(r#"{{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"{PAGE}"}}"#),
        format!(
            r#"{{"type":"recaptcha_v3_enterprise","sitekey":"k","pageurl":"{PAGE}","action":"a","min_score":0.5}}"#
        ),
        format!(r#"{{"type":"turnstile","sitekey":"0x4AAA","pageurl":"{PAGE}","action":"login"}}"#),
        format!(
            r#"{{"type":"cloudflare_challenge","pageurl":"{PAGE}","proxy":"u:p@1.2.3.4:8080","proxytype":"HTTP"}}"#
        ),
        format!(r#"{{"type":"geetest_v3","gt":"g","challenge":"c","pageurl":"{PAGE}"}}"#),
        format!(r#"{{"type":"lemin","captcha_id":"c","div_id":"d","pageurl":"{PAGE}"}}"#),
        format!(r#"{{"type":"image","image":"{gif}","upload":"multipart"}}"#),
        format!(r#"{{"type":"image","image":"{gif}","sync":true}}"#),
        format!(r#"{{"type":"grid","image":"{gif}","instructions":"cars"}}"#),
        format!(r#"{{"type":"bls","instructions":"664","images":{cells}}}"#),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    let text = |s: &str| Just(s.as_bytes().to_vec());
    let code = prop::sample::select(codes().map(|r| r.code()).collect::<Vec<_>>())
        .prop_map(|c| format!(r#"{{"status":0,"request":"{c}"}}"#).into_bytes());
    prop_oneof![
        6 => text(r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#),
        3 => (1u64..10_000_000).prop_map(|id| format!(r#"{{"status":1,"request":{id}}}"#).into_bytes()),
        2 => text(r#"{"status":1,"request":"03AGtoken"}"#),
        1 => text(r#"{"status":1,"request":"OK","result":"cf","user_agent":"UA"}"#),
        1 => text(r#"{"status":1,"request":"[1,5,9]"}"#),
        1 => text(r#"{"status":1,"request":"{\"challenge\":\"c\",\"validate\":\"v\",\"seccode\":\"s\"}"}"#),
        4 => code,
        1 => (0u64..8, 0u64..8).prop_map(|(t, w)| format!(r#"{{"threads":"{t}","working_threads":{w}}}"#).into_bytes()),
        1 => text("<html><title>502 Bad Gateway</title></html>"),
        1 => text("OK|7412"),
        1 => text(""),
        2 => prop::collection::vec(any::<u8>(), 0..64),
        1 => ".{0,40}".prop_map(String::into_bytes),
    ]
}

fn upstream() -> impl Strategy<Value = Upstream> {
    let latency = prop_oneof![8 => 0u64..2_000, 1 => 2_000u64..40_000];
    prop_oneof![
        12 => (latency.clone(), prop::sample::select(vec![200u16, 200, 200, 500, 502, 429]), body())
            .prop_map(|(latency, status, body)| Upstream::Reply { latency, status, body }),
        2 => (latency, prop::sample::select(vec![TransportError::Timeout, TransportError::Connect, TransportError::Broken]))
            .prop_map(|(latency, error)| Upstream::Transport { latency, error }),
        1 => Just(Upstream::Silence),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    // Deadlines from just past the longest default first wait (shorter ones are refused).
    let longest_first_wait = task_types().map(|t| t.first_wait_ms()).max().unwrap_or(0);
    (
        prop::option::of(longest_first_wait + 1..200_000),
        prop::option::of(any::<u64>()),
        0u32..3,
        1u32..6,
        prop::sample::select(vec![5_000u64, 10_000, 30_000]),
    )
        .prop_map(|(deadline_ms, jitter_seed, unsolvable_retries, max_poll_errors, request_timeout_ms)| Config {
            deadline_ms,
            jitter_seed,
            unsolvable_retries,
            max_poll_errors,
            request_timeout_ms,
            ..Config::default()
        })
}

/// A model of `task`'s type taught `n` solves: `late_permille` of them ready in
/// `late_ms`, the rest in `early_ms` (spread over each range), each found by as many polls as
/// the type's table would need.
fn taught(task: &str, (n, early_ms, late_ms, late_permille): (u64, (u64, u64), (u64, u64), u64)) -> SolveTimes {
    let kind = Task::from_json(task).unwrap().task_type();
    let mut model = SolveTimes::new(kind.name()).unwrap();
    for i in 0..n {
        let (lo, hi) = if i * 617 % 1_000 < late_permille { late_ms } else { early_ms };
        let elapsed = lo + (hi.saturating_sub(lo)) * (i * 37 % 101) / 100;
        let polls = 1 + elapsed.saturating_sub(kind.first_wait_ms()).div_ceil(kind.poll_interval_ms()) as u32;
        model.observe(&solution(elapsed, polls));
    }
    model
}

/// What a model is taught: how many solves, the early and the late group's ranges (ms), and
/// the late group's share (permille).
fn teaching() -> impl Strategy<Value = (u64, (u64, u64), (u64, u64), u64)> {
    (0u64..90, (1_000u64..30_000, 0u64..10_000), (20_000u64..150_000, 0u64..20_000), 0u64..600).prop_map(
        |(n, (early, spread), (late, late_spread), share)| {
            (n, (early, early + spread), (late, late + late_spread), share)
        },
    )
}

/// Host stalls: `(step, ms)`: before acting on the request of step `step`, the host sleeps `ms`
/// more (a store outage, a paused process), then asks for its output again.
type Stalls = [(usize, u64)];

fn stalls() -> impl Strategy<Value = Vec<(usize, u64)>> {
    let ms = prop_oneof![2 => 0u64..30_000, 2 => 60_000u64..200_000, 1 => 200_000u64..400_000];
    prop::collection::vec((0usize..30, ms), 0..3)
}

/// The outputs of one run, with times, and where restores happened.
struct Run {
    outputs: Vec<(u64, Output)>,
    snapshots: Vec<String>,
    /// When each result (reply or transport error) was fed back.
    results: Vec<u64>,
    /// When the host last woke from a stall.
    woke: Option<u64>,
    /// The solve's own `ends_by`.
    ends_by: Option<u64>,
}

/// A host model: sleeps until each request is due, sends it, delivers the scripted reply (or its
/// own timeout when the reply would come later than `timeout_ms`) and takes the next output.
/// `restore_at` lists step indices before which the solve is snapshotted and restored, and
/// `stalls` where the host sleeps longer (then asks for its output again: a stalled host's
/// request may be due in the past). Outputs are recorded at the time the host acts on them.
/// With `model`, the solve is created with its learned waits.
fn drive(
    task: &str,
    config: &Config,
    model: Option<&SolveTimes>,
    start: u64,
    script: &[Upstream],
    restore_at: &[usize],
    stalls: &Stalls,
) -> Run {
    let mut solve = match model {
        None => Solve::from_json(task, KEY, config, start).expect("valid task"),
        Some(model) => {
            let (task, key) = (Task::from_json(task).unwrap(), ApiKey::new(KEY).unwrap());
            Solve::with_solve_times(task, key, config, model, start).expect("valid task")
        }
    };
    let mut now = start;
    let mut script = script.iter().cycle();
    let mut run =
        Run { outputs: Vec::new(), snapshots: Vec::new(), results: Vec::new(), woke: None, ends_by: solve.ends_by() };
    let mut output = solve.poll_output(now).expect("no misuse");
    for step in 0..2_000 {
        let mut ask = false;
        if let Output::Send(request) = &output {
            assert!(request.at >= now, "due in the past ({} < {now})", request.at);
            now = now.max(request.at);
            if let Some((_, ms)) = stalls.iter().find(|(at, _)| *at == step) {
                now += ms;
                run.woke = Some(now);
                ask = true;
            }
        }
        let snapshot = solve.snapshot();
        if restore_at.contains(&step) {
            solve = Solve::restore(&snapshot, KEY).expect("restore");
            ask = true;
        }
        if ask {
            output = solve.poll_output(now).expect("no misuse");
        }
        run.snapshots.push(snapshot);
        run.outputs.push((now, output.clone()));
        output = match output {
            Output::Send(request) => {
                let next = match script.next().unwrap() {
                    Upstream::Reply { latency, status, body } if *latency < request.timeout_ms => {
                        now += latency;
                        solve.handle_response(now, request.id, *status, body).expect("awaited")
                    }
                    Upstream::Transport { latency, error } if *latency < request.timeout_ms => {
                        now += latency;
                        solve.handle_transport_error(now, request.id, *error).expect("awaited")
                    }
                    _ => {
                        now += request.timeout_ms;
                        solve.handle_transport_error(now, request.id, TransportError::Timeout).expect("awaited")
                    }
                };
                run.results.push(now);
                next
            }
            Output::Solved(_) | Output::Failed(_) => {
                assert_eq!(solve.poll_output(now + 12_345).unwrap(), output, "terminal outputs are sticky");
                return run;
            }
        };
    }
    panic!("no terminal output after 2000 steps");
}

fn check_invariants(task: &str, config: &Config, start: u64, run: &Run) {
    let task_type = Task::from_json(task).unwrap().task_type();
    let deadline = start + config.deadline_ms.unwrap_or(task_type.deadline_ms());
    let timeout = config.request_timeout_ms;
    // The last poll's window: the submit plus the type's token lifetime, where that ends after
    // the deadline.
    let window_end = task_type.token_ttl_ms().map(|ttl| start + ttl).filter(|&end| end > deadline);
    let ends_by = window_end.unwrap_or(deadline).max(deadline) + timeout;
    assert_eq!(run.ends_by, Some(ends_by), "ends_by: the later of the deadline and the window's end, plus a timeout");
    let mut last_task_request: Option<(u64, RequestKind)> = None;
    let mut last_poll: Option<(u32, u64)> = None;
    for (at, output) in &run.outputs {
        let Output::Send(request) = output else { continue };
        assert!(*at + timeout <= ends_by, "sent at {at}: its timeout passes ends_by {ends_by}");
        if *at >= deadline {
            assert_eq!(request.kind, RequestKind::Poll, "a {:?} sent at {at}, deadline {deadline}", request.kind);
            assert!(window_end.is_some_and(|end| *at < end), "sent at {at}, window {window_end:?}");
            assert!(last_poll.is_none_or(|(id, _)| id == request.id), "a second request after the deadline");
            assert!(
                !run.results.iter().any(|&fed| fed >= deadline && fed <= *at),
                "polled at {at}, after a result at or after the deadline {deadline}"
            );
            last_poll = Some((request.id, *at));
        }
    }
    for (at, output) in &run.outputs {
        match output {
            Output::Send(request) => {
                assert!(!request.url.contains(KEY), "key in URL");
                assert!(!format!("{request:?}").contains(KEY), "key in Debug");
                if request.kind == RequestKind::Poll {
                    let (previous, kind) = last_task_request.expect("a poll follows a submit");
                    assert!(
                        *at >= previous + min_poll_gap(kind),
                        "polled {} ms after the previous {kind:?}",
                        at - previous
                    );
                }
                if matches!(request.kind, RequestKind::Poll | RequestKind::Submit) {
                    last_task_request = Some((*at, request.kind));
                }
            }
            other => assert!(!format!("{other:?}").contains(KEY), "key in an output: {other:?}"),
        }
    }
    let (end, last) = run.outputs.last().unwrap();
    assert!(matches!(last, Output::Solved(_) | Output::Failed(_)));
    match run.woke {
        None => assert!(*end <= deadline + timeout, "a host that never stalled: ended at {end}, deadline {deadline}"),
        Some(woke) => assert!(*end <= ends_by.max(woke), "ended at {end}, ends_by {ends_by}, woke at {woke}"),
    }
    if let (Some((_, sent)), Output::Solved(solution), Some(end)) = (last_poll, last, window_end) {
        assert!(solution.solved_at >= sent && solution.solved_at < end, "{solution:?}: sent at {sent}, window {end}");
        assert_eq!(solution.expires_at, Some(end), "the last poll's answer is usable until the window's end");
    }
    for snapshot in &run.snapshots {
        assert!(!snapshot.contains(KEY), "key in a snapshot");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_solve_terminates_within_its_bounds_and_keeps_the_invariants(
        task in prop::sample::select(tasks()),
        config in config(),
        start in prop_oneof![Just(0u64), 1_600_000_000_000u64..1_900_000_000_000],
        script in prop::collection::vec(upstream(), 1..40),
        stalls in stalls(),
    ) {
        let run = drive(&task, &config, None, start, &script, &[], &stalls);
        check_invariants(&task, &config, start, &run);
    }

    #[test]
    fn snapshot_and_restore_at_any_step_changes_nothing(
        task in prop::sample::select(tasks()),
        config in config(),
        script in prop::collection::vec(upstream(), 1..30),
        restore_at in prop::collection::vec(0usize..60, 0..8),
        stalls in stalls(),
    ) {
        let plain = drive(&task, &config, None, 1_000, &script, &[], &stalls);
        let restored = drive(&task, &config, None, 1_000, &script, &restore_at, &stalls);
        prop_assert_eq!(plain.outputs, restored.outputs);
    }

    /// The same invariants and the same decisions after restores for a solve created with a
    /// learned model (a first wait earlier or later than the table's, a gap).
    #[test]
    fn a_solve_with_a_learned_model_keeps_the_invariants_and_restores(
        task in prop::sample::select(tasks()),
        config in config(),
        teaching in teaching(),
        start in prop_oneof![Just(0u64), 1_600_000_000_000u64..1_900_000_000_000],
        script in prop::collection::vec(upstream(), 1..40),
        restore_at in prop::collection::vec(0usize..60, 0..8),
        stalls in stalls(),
    ) {
        let model = taught(&task, teaching);
        let run = drive(&task, &config, Some(&model), start, &script, &[], &stalls);
        check_invariants(&task, &config, start, &run);
        let restored = drive(&task, &config, Some(&model), start, &script, &restore_at, &stalls);
        prop_assert_eq!(run.outputs, restored.outputs);
    }

    /// Hosts that stall once, early in a solve whose submit is accepted, for any time up to
    /// 400 s: around every type's deadline and token lifetime, where the last poll is decided.
    #[test]
    fn a_stalled_host_gets_at_most_one_last_poll_within_the_window(
        task in prop::sample::select(tasks()),
        config in config(),
        start in prop_oneof![Just(0u64), 1_600_000_000_000u64..1_900_000_000_000],
        script in prop::collection::vec(upstream(), 1..20),
        stall in (1usize..4, 0u64..400_000),
        restore_at in prop::collection::vec(0usize..8, 0..3),
    ) {
        let accepted = Upstream::Reply { latency: 300, status: 200, body: br#"{"status":1,"request":"7412"}"#.to_vec() };
        let script: Vec<Upstream> = std::iter::once(accepted).chain(script).collect();
        let run = drive(&task, &config, None, start, &script, &[], &[stall]);
        check_invariants(&task, &config, start, &run);
        let restored = drive(&task, &config, None, start, &script, &restore_at, &[stall]);
        prop_assert_eq!(run.outputs, restored.outputs);
    }

    #[test]
    fn arbitrary_input_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256), text in ".{0,200}", status in any::<u16>()) {
        let _ = Task::from_json(&text);
        let _ = Config::from_json(&text);
        let _ = Solve::restore(&text, KEY);
        // Both parse the reply with the engine's reply parser first.
        let _ = captchaai_engine::account::parse_threads_info(status, &bytes);
        let _ = captchaai_engine::account::parse_balance(status, &bytes);
    }

    /// Truncated snapshots (cut anywhere in the text, the whole length included) and snapshots
    /// with one byte changed anywhere either restore to a solve that still behaves or fail with
    /// a typed error; a cut snapshot is never mistaken for a whole one.
    #[test]
    fn mutated_snapshots_restore_or_fail_cleanly(
        task in prop::sample::select(tasks()),
        cut in 0.0f64..=1.0,
        mutate in prop::option::of((0.0f64..1.0, any::<u8>())),
    ) {
        let mut solve = Solve::from_json(&task, KEY, &Config::default(), 0).unwrap();
        let Output::Send(submit) = solve.poll_output(0).unwrap() else { panic!("expected the submit") };
        solve.handle_response(100, submit.id, 200, br#"{"status":1,"request":"7412"}"#).unwrap();
        let snapshot = solve.snapshot();
        let mut bytes = snapshot.clone().into_bytes();
        if let Some((at, byte)) = mutate {
            let at = ((bytes.len() as f64) * at) as usize;
            bytes[at] = byte;
        }
        let keep = ((bytes.len() as f64) * cut).round() as usize;
        bytes.truncate(keep);
        let whole = keep == snapshot.len();
        if let Ok(text) = String::from_utf8(bytes) {
            match Solve::restore(&text, KEY) {
                Ok(mut restored) => {
                    prop_assert!(whole, "a snapshot cut to {keep} of {} bytes restored", snapshot.len());
                    // Whatever it restored to, it must still behave.
                    let _ = restored.poll_output(1_000_000);
                }
                Err(_) => prop_assert!(!whole || mutate.is_some(), "the intact snapshot failed to restore"),
            }
        }
    }
}
