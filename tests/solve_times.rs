//! The adaptive polling model, `SolveTimes`: the table applies unchanged under 20 observations,
//! it learns earlier and later first waits, its text form round-trips and refuses bad input with
//! a typed error, and no model ever makes a solve poll sooner than 1 s after the submit, polls
//! less than 5 s apart, or send anything at or after the deadline.

mod common;

use captchaai_engine::{
    ApiKey, Config, Output, RequestKind, Solution, Solve, SolveTimes, SolveTimesError, Task, task_types,
};
use common::{KEY, solution, solution_of_attempts};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;
const TURNSTILE: &str = r#"{"type":"turnstile","sitekey":"0x4AAA","pageurl":"https://example.com/login"}"#;

/// Every request a solve sends, as (kind, ms after the start), against a service whose answer
/// is ready `ready_ms` after the submit; and the solution, if it solved.
fn drive(
    task: &str,
    config: &Config,
    model: Option<&SolveTimes>,
    ready_ms: u64,
) -> (Vec<(RequestKind, u64)>, Option<Solution>) {
    let task = Task::from_json(task).unwrap();
    let key = ApiKey::new(KEY).unwrap();
    let mut solve = match model {
        Some(model) => Solve::with_solve_times(task, key, config, model, T0).unwrap(),
        None => Solve::new(task, key, config, T0).unwrap(),
    };
    let (mut sent, mut ready_at) = (Vec::new(), u64::MAX);
    let mut output = solve.poll_output(T0).unwrap();
    for _ in 0..1_000 {
        match output {
            Output::Send(request) => {
                sent.push((request.kind, request.at - T0));
                let body = match request.kind {
                    RequestKind::Submit => {
                        ready_at = request.at + ready_ms;
                        r#"{"status":1,"request":"7412"}"#
                    }
                    _ if request.at >= ready_at => r#"{"status":1,"request":"0.TOKEN"}"#,
                    _ => "CAPCHA_NOT_READY",
                };
                output = solve.handle_response(request.at, request.id, 200, body.as_bytes()).unwrap();
            }
            Output::Solved(solution) => return (sent, Some(solution)),
            Output::Failed(_) => return (sent, None),
        }
    }
    panic!("no end after 1,000 steps");
}

/// A model that has driven `n` turnstile solves ready after `ready_ms` each.
fn learned(ready_ms: u64, n: usize) -> SolveTimes {
    taught(n, |_, _| ready_ms)
}

/// A model that has driven `n` turnstile solves, the `i`th ready `ready_ms(i, model so far)`
/// after its submit.
fn taught(n: usize, ready_ms: impl Fn(usize, &SolveTimes) -> u64) -> SolveTimes {
    let mut model = SolveTimes::new("turnstile").unwrap();
    for i in 0..n {
        let (_, solved) = drive(TURNSTILE, &Config::default(), Some(&model), ready_ms(i, &model));
        assert!(model.observe(&solved.unwrap()));
    }
    model
}

fn first_poll(sent: &[(RequestKind, u64)]) -> u64 {
    sent.iter().find(|(kind, _)| *kind == RequestKind::Poll).unwrap().1
}

#[test]
fn under_twenty_observations_the_table_applies_unchanged() {
    let model = learned(3_000, 19);
    assert_eq!(model.observations(), 19);
    assert_eq!(model.first_wait_ms(), None);
    for ready in [1_000, 12_000, 40_000] {
        assert_eq!(
            drive(TURNSTILE, &Config::default(), Some(&model), ready),
            drive(TURNSTILE, &Config::default(), None, ready)
        );
    }
}

#[test]
fn fast_solves_bring_the_first_poll_forward_without_more_polls() {
    let table = task_types().find(|t| t.name() == "turnstile").unwrap().first_wait_ms();
    let model = learned(4_000, 120);
    let (sent, solved) = drive(TURNSTILE, &Config::default(), Some(&model), 4_000);
    assert!(first_poll(&sent) < table, "first poll at {} ms, table {table}", first_poll(&sent));
    assert!(first_poll(&sent) >= 4_000);
    assert_eq!(solved.unwrap().polls, 1);
}

#[test]
fn slow_solves_push_the_first_poll_back() {
    let table = task_types().find(|t| t.name() == "turnstile").unwrap().first_wait_ms();
    let model = learned(70_000, 60);
    let (sent, solved) = drive(TURNSTILE, &Config::default(), Some(&model), 70_000);
    assert!(first_poll(&sent) > table + 30_000, "first poll at {} ms", first_poll(&sent));
    let (_, fixed) = drive(TURNSTILE, &Config::default(), None, 70_000);
    assert!(solved.unwrap().polls < fixed.unwrap().polls);
}

#[test]
fn a_later_first_poll_is_one_the_table_makes_and_sees_answers_when_the_table_would() {
    let turnstile = task_types().find(|t| t.name() == "turnstile").unwrap();
    let (table, interval) = (turnstile.first_wait_ms(), turnstile.poll_interval_ms());
    // Solves ready 61-79 s after the submit, in a cycle of 1.3 s steps.
    let model = taught(200, |n, _| 61_000 + n as u64 * 1_300 % 18_000);
    let wait = model.first_wait_ms().unwrap();
    assert!(wait > table + 30_000, "first wait {wait} ms");
    assert_eq!((wait - table) % interval, 0, "first wait {wait} ms is not a table poll time");
    for ready in (wait - interval + 1..100_000).step_by(1_700) {
        let (_, learned) = drive(TURNSTILE, &Config::default(), Some(&model), ready);
        let (_, fixed) = drive(TURNSTILE, &Config::default(), None, ready);
        let (learned, fixed) = (learned.unwrap(), fixed.unwrap());
        assert_eq!(learned.solved_at, fixed.solved_at, "ready after {ready} ms");
        assert!(learned.polls < fixed.polls);
    }
}

/// A later first wait makes the answers ready before the table's poll it replaces wait one
/// interval longer: with 1 in 20 of them (ready 12 s after the submit, the rest 20 s), the
/// table's first wait stays; with none, it moves to the table's next poll time.
#[test]
fn a_first_wait_moves_later_only_when_few_answers_came_before_it() {
    let some_early = taught(100, |i, _| if i % 20 == 0 { 12_000 } else { 20_000 });
    assert_eq!(some_early.first_wait_ms(), Some(13_000));
    assert_eq!(learned(20_000, 100).first_wait_ms(), Some(18_000));
}

#[test]
fn the_config_first_wait_wins_and_another_type_is_refused() {
    let model = learned(70_000, 60);
    let config = Config { initial_wait_ms: Some(13_000), ..Config::default() };
    assert_eq!(first_poll(&drive(TURNSTILE, &config, Some(&model), 70_000).0), 13_000);
    let other = SolveTimes::new("recaptcha_v2").unwrap();
    let task = Task::from_json(TURNSTILE).unwrap();
    let error = Solve::with_solve_times(task, ApiKey::new(KEY).unwrap(), &Config::default(), &other, T0).err().unwrap();
    assert_eq!((error.code, error.field.as_deref()), ("INVALID_CONFIG", Some("solve_times")));
}

#[test]
fn a_short_deadline_keeps_the_learned_first_wait_before_it() {
    let model = learned(70_000, 60);
    let config = Config { deadline_ms: Some(30_000), ..Config::default() };
    let (sent, _) = drive(TURNSTILE, &config, Some(&model), 70_000);
    assert!(sent.iter().all(|(_, at)| *at < 30_000), "{sent:?}");
}

/// Solves that come in two groups (3 s and 60 s): after a first poll that finds nothing, the
/// second skips the gap; a snapshot (version 3) keeps it, and the restored solve sends the same.
#[test]
fn a_gap_in_solve_times_is_skipped_and_snapshots_keep_it() {
    let model = taught(60, |i, _| if i % 2 == 0 { 3_000 } else { 60_000 });
    let (sent, _) = drive(TURNSTILE, &Config::default(), Some(&model), 60_000);
    let polls: Vec<u64> = sent.iter().filter(|(k, _)| *k == RequestKind::Poll).map(|(_, at)| *at).collect();
    assert!(polls[1] - polls[0] > 20_000, "{polls:?}");
    assert!(polls.windows(2).skip(1).all(|w| w[1] - w[0] == 5_000), "{polls:?}");

    let task = Task::from_json(TURNSTILE).unwrap();
    let mut solve = Solve::with_solve_times(task, ApiKey::new(KEY).unwrap(), &Config::default(), &model, T0).unwrap();
    let Output::Send(submit) = solve.poll_output(T0).unwrap() else { panic!() };
    let Output::Send(first) = solve.handle_response(T0, submit.id, 200, br#"{"status":1,"request":"7412"}"#).unwrap()
    else {
        panic!()
    };
    let snapshot = solve.snapshot();
    assert!(snapshot.contains(r#""version":3"#) && snapshot.contains("second_wait_ms"), "{snapshot}");
    let mut restored = Solve::restore(&snapshot, KEY).unwrap();
    let a = solve.handle_response(first.at, first.id, 200, b"CAPCHA_NOT_READY").unwrap();
    let b = restored.handle_response(first.at, first.id, 200, b"CAPCHA_NOT_READY").unwrap();
    assert_eq!(a, b);
    let Output::Send(second) = a else { panic!() };
    assert_eq!(second.at - first.at, polls[1] - polls[0]);
}

/// Two groups (3 s and 60 s) and a few of the early group's stragglers, ready 2 s after the
/// first poll: the gap follows a second regular poll, which finds the stragglers (waiting for
/// the gap would make them wait for the later group); the snapshot keeps where the gap starts.
#[test]
fn stragglers_of_an_early_group_are_polled_before_the_gap() {
    let straggler = |model: &SolveTimes| model.first_wait_ms().unwrap_or(13_000) + 2_000;
    let model = taught(80, |i, model| match i % 10 {
        0..=4 => 3_000,
        5 => straggler(model),
        _ => 60_000,
    });
    let polls = |ready_ms| -> Vec<u64> {
        let (sent, _) = drive(TURNSTILE, &Config::default(), Some(&model), ready_ms);
        sent.iter().filter(|(k, _)| *k == RequestKind::Poll).map(|(_, at)| *at).collect()
    };
    let found = polls(straggler(&model));
    assert_eq!(found.len(), 2, "the straggler is found one interval after the first poll: {found:?}");
    assert_eq!(found[1] - found[0], 5_000, "{found:?}");
    let late = polls(60_000);
    assert_eq!(late[1] - late[0], 5_000, "{late:?}");
    assert!(late[2] - late[1] > 20_000, "the gap follows the second poll: {late:?}");
    assert!(late.windows(2).skip(2).all(|w| w[1] - w[0] == 5_000), "{late:?}");

    let task = Task::from_json(TURNSTILE).unwrap();
    let mut solve = Solve::with_solve_times(task, ApiKey::new(KEY).unwrap(), &Config::default(), &model, T0).unwrap();
    let Output::Send(submit) = solve.poll_output(T0).unwrap() else { panic!() };
    let mut output = solve.handle_response(T0, submit.id, 200, br#"{"status":1,"request":"7412"}"#).unwrap();
    for _ in 0..2 {
        let Output::Send(poll) = output else { panic!("{output:?}") };
        let snapshot = solve.snapshot();
        assert!(snapshot.contains(r#""version":3"#) && snapshot.contains(r#""gap_after_polls":2"#), "{snapshot}");
        let mut restored = Solve::restore(&snapshot, KEY).unwrap();
        output = solve.handle_response(poll.at, poll.id, 200, b"CAPCHA_NOT_READY").unwrap();
        assert_eq!(restored.handle_response(poll.at, poll.id, 200, b"CAPCHA_NOT_READY").unwrap(), output);
    }
    let Output::Send(after_gap) = output else { panic!() };
    assert_eq!(after_gap.at - T0, late[2]);
    for (from, to) in
        [(r#""gap_after_polls":2"#, r#""gap_after_polls":1"#), (r#""gap_after_polls":2"#, r#""gap_after_polls":-2"#)]
    {
        let broken = solve.snapshot().replace(from, to);
        assert!(matches!(Solve::restore(&broken, KEY), Err(captchaai_engine::RestoreError::Invalid(_))), "{to}");
    }
}

#[test]
fn resubmitted_and_pollless_solves_are_not_observed() {
    let mut model = SolveTimes::new("turnstile").unwrap();
    assert!(!model.observe(&solution_of_attempts(20_000, 2, 2)));
    assert!(!model.observe(&solution(20_000, 0)));
    assert_eq!(model.observations(), 0);
}

/// Whether an error is the one expected.
type Expected = fn(&SolveTimesError) -> bool;

#[test]
fn bad_text_is_a_typed_error() {
    let good = learned(8_000, 25).to_string();
    let cases: Vec<(String, Expected)> = vec![
        ("".into(), |e| matches!(e, SolveTimesError::Malformed(_))),
        ("{\"format\":".into(), |e| matches!(e, SolveTimesError::Malformed(_))),
        ("[1,2]".into(), |e| matches!(e, SolveTimesError::Foreign)),
        (r#"{"format":"captchaai-engine/solve","version":1}"#.into(), |e| matches!(e, SolveTimesError::Foreign)),
        (good.replace("\"version\":1", "\"version\":9"), |e| matches!(e, SolveTimesError::UnsupportedVersion(9))),
        (good.replace("turnstile", "hcaptcha"), |e| matches!(e, SolveTimesError::Invalid(_))),
        (good.replace("\"n\":", "\"extra\":1,\"n\":"), |e| matches!(e, SolveTimesError::Invalid(_))),
        (good.replace("\"fast_ms\":", "\"fast_ms\":9999999,\"x\":"), |e| matches!(e, SolveTimesError::Invalid(_))),
        (good.replace("\"hist\":\"", "\"hist\":\"500:1,"), |e| matches!(e, SolveTimesError::Invalid(_))),
        (good.replace("\"hist\":\"", "\"hist\":\"0:0,"), |e| matches!(e, SolveTimesError::Invalid(_))),
        (good.replace("\"hist\":\"", "\"hist\":\"x,"), |e| matches!(e, SolveTimesError::Invalid(_))),
        (good.replace("\"missed\":\"", "\"missed\":\"127:99999,"), |e| matches!(e, SolveTimesError::Invalid(_))),
    ];
    for (text, expected) in cases {
        let error = text.parse::<SolveTimes>().expect_err(&text);
        assert!(expected(&error), "{text}: {error:?}");
    }
}

#[test]
fn a_reloaded_model_makes_the_same_requests() {
    for ready in [2_000, 9_000, 33_000, 95_000] {
        let model = learned(ready, 40);
        let text = model.to_string();
        assert!(text.len() <= 1_024, "{} B", text.len());
        let reloaded: SolveTimes = text.parse().unwrap();
        assert_eq!(reloaded, model);
        assert_eq!(reloaded.to_string(), text);
        for probe in [1_000, ready, 50_000] {
            assert_eq!(
                drive(TURNSTILE, &Config::default(), Some(&reloaded), probe),
                drive(TURNSTILE, &Config::default(), Some(&model), probe)
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever it observed, a model never makes a solve poll within 1 s of the submit or two
    /// polls within 5 s, nor send at or after the deadline; its text stays within 1 KiB, reads
    /// back equal, and the same model and inputs make the same requests.
    #[test]
    fn no_model_polls_too_soon(
        type_index in 0usize..14,
        seen in prop::collection::vec((0u64..400_000, 0u32..40, 1u32..3), 0..300),
        ready in 0u64..150_000,
    ) {
        let kind = task_types().nth(type_index % task_types().len()).unwrap();
        let mut model = SolveTimes::new(kind.name()).unwrap();
        let mut turnstile = SolveTimes::new("turnstile").unwrap();
        for (elapsed, polls, attempts) in seen {
            model.observe(&solution_of_attempts(elapsed, polls, attempts));
            turnstile.observe(&solution_of_attempts(elapsed, polls, attempts));
        }
        let text = model.to_string();
        prop_assert!(text.len() <= 1_024, "{} B", text.len());
        prop_assert_eq!(&text.parse::<SolveTimes>().unwrap(), &model);
        if let Some(wait) = model.first_wait_ms() {
            prop_assert!(wait >= 1_000);
        }
        let (sent, _) = drive(TURNSTILE, &Config::default(), Some(&turnstile), ready);
        let polls: Vec<u64> = sent.iter().filter(|(k, _)| *k == RequestKind::Poll).map(|(_, at)| *at).collect();
        prop_assert!(polls.first().is_none_or(|&first| first >= 1_000));
        prop_assert!(polls.windows(2).all(|w| w[1] - w[0] >= 5_000), "{:?}", polls);
        prop_assert!(sent.iter().all(|(_, at)| *at < 120_000));
        prop_assert_eq!(drive(TURNSTILE, &Config::default(), Some(&turnstile), ready).0, sent);
    }

    /// Any text either reads as a model or is refused with an error; it never panics.
    #[test]
    fn any_text_parses_or_errs(text in ".{0,300}") {
        let _ = text.parse::<SolveTimes>();
    }
}
