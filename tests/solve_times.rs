//! The adaptive polling model, `SolveTimes`: the table applies unchanged under
//! `SolveTimes::min_observations()` observations; then each solve gets the schedule of least
//! expected cost (the wait from the answer being ready to the poll that finds it, plus the config's
//! `poll_cost_ms` per poll), or for a few solves an exploring one; a drift test forgets most of
//! the past when answers move away from the estimate, and all of what lies beyond the new
//! answers; its text form round-trips, reads versions 1 to 4 and refuses bad input with a typed
//! error; and no model ever makes a solve poll sooner than 1 s after the submit, polls less than
//! 5 s apart, or send anything at or after the deadline.

mod common;

use captchaai_engine::{
    ApiKey, Config, Output, RequestKind, Schedule, Solution, Solve, SolveTimes, SolveTimesError, Task, task_types,
};
use common::{KEY, solution, solution_of_attempts};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000;
/// Between the creation of one taught solve and the next.
const SPACING_MS: u64 = 60_000;
const TURNSTILE: &str = r#"{"type":"turnstile","sitekey":"0x4AAA","pageurl":"https://example.com/login"}"#;

/// Every request a solve created at `start` sends, as (kind, ms after the start), against a
/// service whose answer is ready `ready_ms` after the submit; and the solution, if it solved.
fn drive(
    task: &str,
    config: &Config,
    model: Option<&SolveTimes>,
    start: u64,
    ready_ms: u64,
) -> (Vec<(RequestKind, u64)>, Option<Solution>) {
    let task = Task::from_json(task).unwrap();
    let key = ApiKey::new(KEY).unwrap();
    let mut solve = match model {
        Some(model) => Solve::with_solve_times(task, key, config, model, start).unwrap(),
        None => Solve::new(task, key, config, start).unwrap(),
    };
    let (mut sent, mut ready_at) = (Vec::new(), u64::MAX);
    let mut output = solve.poll_output(start).unwrap();
    for _ in 0..1_000 {
        match output {
            Output::Send(request) => {
                sent.push((request.kind, request.at - start));
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
    taught(n, |_| ready_ms)
}

/// A model that has driven `n` turnstile solves a minute apart (at the default poll cost), the
/// `i`th ready `ready_ms(i)` after its submit, observing each, as a host does.
fn taught(n: usize, ready_ms: impl Fn(usize) -> u64) -> SolveTimes {
    taught_at(n, &Config::default(), ready_ms)
}

fn taught_at(n: usize, config: &Config, ready_ms: impl Fn(usize) -> u64) -> SolveTimes {
    let mut model = SolveTimes::new("turnstile").unwrap();
    for i in 0..n {
        let start = T0 + i as u64 * SPACING_MS;
        let (_, solved) = drive(TURNSTILE, config, Some(&model), start, ready_ms(i));
        assert!(model.observe(&solved.unwrap()));
    }
    model
}

/// A creation time at which `model` gives a solve its chosen schedule (not an exploring one).
fn not_exploring(model: &SolveTimes, config: &Config) -> u64 {
    (0..1_000)
        .map(|i| T0 + 7 * i)
        .find(|&now| model.schedule(config, now).is_some_and(|(this, main)| this == main))
        .unwrap()
}

fn polls(sent: &[(RequestKind, u64)]) -> Vec<u64> {
    sent.iter().filter(|(kind, _)| *kind == RequestKind::Poll).map(|(_, at)| *at).collect()
}

/// The chosen schedule of `model` at the default poll cost.
fn main_schedule(model: &SolveTimes) -> Schedule {
    model.schedule(&Config::default(), T0).unwrap().1
}

#[test]
fn under_the_minimum_of_observations_the_table_applies_unchanged() {
    let minimum = SolveTimes::min_observations() as usize;
    assert!(minimum >= 1);
    let model = learned(3_000, minimum - 1);
    assert_eq!(model.observations() as usize, minimum - 1);
    assert_eq!(model.first_wait_ms(), None);
    assert_eq!(model.schedule(&Config::default(), T0), None);
    for ready in [1_000, 12_000, 40_000] {
        for start in [T0, T0 + 1, T0 + 99] {
            assert_eq!(
                drive(TURNSTILE, &Config::default(), Some(&model), start, ready),
                drive(TURNSTILE, &Config::default(), None, start, ready)
            );
        }
    }
}

#[test]
fn fast_solves_bring_the_first_poll_forward_without_more_polls() {
    let table = task_types().find(|t| t.name() == "turnstile").unwrap().first_wait_ms();
    let model = learned(4_000, 120);
    let wait = model.first_wait_ms().unwrap();
    assert!((4_000..table).contains(&wait), "first wait {wait} ms, table {table}");
    let start = not_exploring(&model, &Config::default());
    let (sent, solved) = drive(TURNSTILE, &Config::default(), Some(&model), start, 4_000);
    assert_eq!(polls(&sent), [wait]);
    assert_eq!(solved.unwrap().polls, 1);
}

#[test]
fn slow_solves_push_the_first_poll_back() {
    let table = task_types().find(|t| t.name() == "turnstile").unwrap().first_wait_ms();
    let model = learned(70_000, 60);
    let start = not_exploring(&model, &Config::default());
    let (sent, solved) = drive(TURNSTILE, &Config::default(), Some(&model), start, 70_000);
    assert!(polls(&sent)[0] > table + 30_000, "first poll at {} ms", polls(&sent)[0]);
    let (_, fixed) = drive(TURNSTILE, &Config::default(), None, start, 70_000);
    assert!(solved.unwrap().polls < fixed.unwrap().polls);
}

/// Answers always ready 20.5 s after the submit (it polls at the table's 13 s and every 5 s
/// before, and explores the seconds around its first poll): the best schedule of the family polls
/// first at 21 s, where one poll finds every answer half a second after it is ready. The model
/// learns it to within one poll or 2 s of waiting: its smoothed estimate keeps a few percent of
/// the mass where no answer was seen, so a cheap poll may go before 21 s and with a dear one the
/// first poll may wait a little longer, to be surer of finding the answer.
#[test]
fn answers_ready_at_one_time_cost_at_most_a_poll_or_two_seconds_over_the_best_schedule() {
    for poll_cost_ms in [0, 250, 1_000, 4_000, 60_000] {
        let config = Config { poll_cost_ms, ..Config::default() };
        let model = taught_at(200, &config, |_| 20_500);
        let (_, main) = model.schedule(&config, T0).unwrap();
        let polls = (1..=10).find(|&n| main.poll_ms(n, 5_000) >= 20_500).unwrap();
        let cost = main.poll_ms(polls, 5_000) - 20_500 + u64::from(polls) * poll_cost_ms;
        let best = 500 + poll_cost_ms;
        assert!(cost <= best + poll_cost_ms.max(2_000), "{main:?} costs {cost} ms at {poll_cost_ms} ms a poll");
    }
}

/// The price of a poll decides: from the same solves, a dear poll gives a schedule with fewer
/// expected polls and a free one a schedule with less waiting, measured on those solves.
#[test]
fn the_poll_cost_trades_polls_for_waiting() {
    let spread = |i: usize| 10_000 + (i as u64 * 7_919) % 40_000;
    let model = taught(300, spread);
    let interval = 5_000;
    let measure = |poll_cost_ms: u64| {
        let config = Config { poll_cost_ms, ..Config::default() };
        let (_, main) = model.schedule(&config, T0).unwrap();
        let (mut polls, mut waited) = (0, 0);
        for i in 0..1_000 {
            let ready = spread(i);
            let n = (1..).find(|&n| main.poll_ms(n, interval) >= ready).unwrap();
            polls += u64::from(n);
            waited += main.poll_ms(n, interval) - ready;
        }
        (polls, waited)
    };
    let (free, dear) = (measure(0), measure(60_000));
    assert!(dear.0 < free.0, "polls: {dear:?} against {free:?}");
    assert!(free.1 < dear.1, "waiting: {free:?} against {dear:?}");
    // Out of range: a typed error naming the field.
    let task = Task::from_json(TURNSTILE).unwrap();
    let config = Config { poll_cost_ms: 60_001, ..Config::default() };
    let error = Solve::with_solve_times(task, ApiKey::new(KEY).unwrap(), &config, &model, T0).err().unwrap();
    assert_eq!((error.code, error.field.as_deref()), ("INVALID_CONFIG", Some("poll_cost_ms")));
}

/// A few solves explore (a hash of the creation time decides which, so the same time gives the
/// same schedule): an earlier or later first poll, at most an eighth of the solves.
#[test]
fn a_few_solves_explore_and_the_creation_time_decides_which() {
    let model = taught(200, |i| 10_000 + (i as u64 * 7_919) % 20_000);
    let config = Config::default();
    let (mut exploring, mut waits) = (0, std::collections::BTreeSet::new());
    for i in 0..8_000 {
        let now = T0 + i * 1_003;
        let (this, main) = model.schedule(&config, now).unwrap();
        assert_eq!(model.schedule(&config, now).unwrap().0, this);
        if this != main {
            exploring += 1;
            waits.insert(this.first_wait_ms);
        }
    }
    // At most an eighth of the solves explore: of 8,000 hashed creation times, 1,000 plus
    // three standard deviations of the draw (about 90) at the most.
    assert!((1..=1_090).contains(&exploring), "{exploring} of 8,000 explore");
    let main = main_schedule(&model).first_wait_ms;
    assert!(waits.iter().any(|&w| w < main) && waits.iter().any(|&w| w > main), "{waits:?} around {main}");
}

#[test]
fn the_config_first_wait_wins_and_another_type_is_refused() {
    let model = learned(70_000, 60);
    let config = Config { initial_wait_ms: Some(13_000), ..Config::default() };
    assert_eq!(polls(&drive(TURNSTILE, &config, Some(&model), T0, 70_000).0)[0], 13_000);
    assert_eq!(model.schedule(&config, T0), None);
    let other = SolveTimes::new("recaptcha_v2").unwrap();
    let task = Task::from_json(TURNSTILE).unwrap();
    let error = Solve::with_solve_times(task, ApiKey::new(KEY).unwrap(), &Config::default(), &other, T0).err().unwrap();
    assert_eq!((error.code, error.field.as_deref()), ("INVALID_CONFIG", Some("solve_times")));
}

#[test]
fn a_short_deadline_keeps_the_learned_first_wait_before_it() {
    let model = learned(70_000, 60);
    let config = Config { deadline_ms: Some(30_000), ..Config::default() };
    for start in [T0, T0 + 1, T0 + 2] {
        let (sent, _) = drive(TURNSTILE, &config, Some(&model), start, 70_000);
        assert!(sent.iter().all(|(_, at)| *at < 30_000), "{sent:?}");
    }
}

/// Solves that come in two groups (3 s and 60 s): after the polls for the early group, one wait
/// skips the gap; a snapshot (version 3) keeps it, and the restored solve sends the same.
#[test]
fn a_gap_in_solve_times_is_skipped_and_snapshots_keep_it() {
    let model = taught(120, |i| if i % 2 == 0 { 3_000 } else { 60_000 });
    let gap = main_schedule(&model).gap.expect("a longer wait");
    assert!(gap.wait_ms > 20_000, "{gap:?}");
    let start = not_exploring(&model, &Config::default());
    let (sent, _) = drive(TURNSTILE, &Config::default(), Some(&model), start, 60_000);
    let polls = polls(&sent);
    let after = gap.after_polls as usize;
    assert_eq!(polls[after] - polls[after - 1], gap.wait_ms, "{polls:?}");
    assert!(polls.windows(2).enumerate().all(|(i, w)| i + 1 == after || w[1] - w[0] == 5_000), "{polls:?}");

    let task = Task::from_json(TURNSTILE).unwrap();
    let mut solve =
        Solve::with_solve_times(task, ApiKey::new(KEY).unwrap(), &Config::default(), &model, start).unwrap();
    let Output::Send(submit) = solve.poll_output(start).unwrap() else { panic!() };
    let mut output = solve.handle_response(start, submit.id, 200, br#"{"status":1,"request":"7412"}"#).unwrap();
    for _ in 0..after {
        let Output::Send(poll) = output else { panic!("{output:?}") };
        let snapshot = solve.snapshot();
        assert!(snapshot.contains(r#""version":3"#) && snapshot.contains("second_wait_ms"), "{snapshot}");
        let mut restored = Solve::restore(&snapshot, KEY).unwrap();
        output = solve.handle_response(poll.at, poll.id, 200, b"CAPCHA_NOT_READY").unwrap();
        assert_eq!(restored.handle_response(poll.at, poll.id, 200, b"CAPCHA_NOT_READY").unwrap(), output);
    }
    let Output::Send(after_gap) = output else { panic!() };
    assert_eq!(after_gap.at - start, polls[after]);
}

/// The remembered intervals' weights, from the text form's `seen` (`from:to:weight,..`).
fn weights(model: &SolveTimes) -> Vec<((u32, u32), u32)> {
    let text: serde_json::Value = serde_json::from_str(&model.to_string()).unwrap();
    let seen = text["seen"].as_str().unwrap();
    seen.split(',')
        .map(|entry| {
            let parts: Vec<u32> = entry.split(':').map(|part| part.parse().unwrap()).collect();
            ((parts[0], parts[1]), parts[2])
        })
        .collect()
}

/// Teaches `model` more turnstile solves (the `i`th of `range` ready `ready_ms(i)` after its
/// submit) and returns the observations at which the drift test fired: where every remembered
/// weight fell to a sixteenth (at most), not by the usual 1/80.
fn drift_fired_at(
    model: &mut SolveTimes,
    range: std::ops::Range<usize>,
    ready_ms: impl Fn(usize) -> u64,
) -> Vec<usize> {
    let total = |model: &SolveTimes| weights(model).iter().map(|(_, weight)| u64::from(*weight)).sum::<u64>();
    let mut fired = Vec::new();
    for i in range {
        let before = total(model);
        let start = T0 + i as u64 * SPACING_MS;
        let (_, solved) = drive(TURNSTILE, &Config::default(), Some(model), start, ready_ms(i));
        assert!(model.observe(&solved.unwrap()));
        // The new answer adds 1,024 of its own.
        let kept = total(model) - 1_024;
        if kept < before / 2 {
            assert!(kept <= before / 16, "{i}: {before} -> {kept}");
            fired.push(i);
        }
    }
    fired
}

/// Answers that move away from what the model learned (ready at 60 s after 60 at 8 s, or at 2 s
/// after 60 at 30 s) fire the drift test within a few solves, not at the first, and the model
/// then keeps a sixteenth of its past; it learns the new times within a few dozen.
#[test]
fn answers_that_move_away_from_the_estimate_make_it_forget() {
    for (old_ms, new_ms) in [(8_000, 60_000), (30_000, 2_000)] {
        let mut model = learned(old_ms, 60);
        let fired = drift_fired_at(&mut model, 60..100, |_| new_ms);
        assert!(matches!(fired.first(), Some(61..=75)), "{old_ms} -> {new_ms}: fired at {fired:?}");
        let median = model.quantile_ms(500).unwrap();
        assert!(median.abs_diff(new_ms) <= 5_000, "{old_ms} -> {new_ms}: median {median} ms");
    }
}

/// When the drift test fires, every interval wholly beyond the answers it gathered is forgotten
/// (answers now later: those that end before the new ones start; now earlier: those that start
/// after the new ones end), not kept at a sixteenth: nothing is left of the service as it was.
/// After answers move from 8 s to 60 s, the first poll is past 40 s five solves later (a sixteenth
/// of the past held it at 8 s, with a longer wait after it, for some 45 solves). The sum that
/// fires may have begun before the move, with an old answer (it does for the move from 30 s to
/// 2 s here): then its edge reaches into the old answers, and less is found stale.
#[test]
fn a_drift_forgets_what_lies_beyond_the_new_answers() {
    for (old_ms, new_ms) in [(8_000, 60_000), (30_000, 2_000)] {
        let fired = drift_fired_at(&mut learned(old_ms, 60), 60..100, |_| new_ms)[0];
        // The same model again, stopped right after the test fired.
        let mut model = learned(old_ms, 60);
        assert_eq!(drift_fired_at(&mut model, 60..fired + 1, |_| new_ms), [fired]);
        let seen = weights(&model);
        let new = |&&((from, to), _): &&((u32, u32), u32)| {
            u64::from(from) * 1_000 < new_ms && new_ms <= u64::from(to) * 1_000
        };
        let (first_start, last_end) = seen
            .iter()
            .filter(new)
            .fold((u32::MAX, 0), |(start, end), ((from, to), _)| (start.min(*from), end.max(*to)));
        for ((from, to), _) in &seen {
            let beyond = if new_ms > old_ms { *to <= first_start } else { *from >= last_end };
            assert!(!beyond, "{old_ms} -> {new_ms}: {from}..{to} s is still remembered: {seen:?}");
        }
        if new_ms > old_ms {
            drift_fired_at(&mut model, fired + 1..fired + 6, |_| new_ms);
            let first_poll = main_schedule(&model).first_wait_ms;
            assert!(first_poll >= 40_000, "{old_ms} -> {new_ms}: first poll at {first_poll} ms 5 solves after");
        }
    }
}

/// Answers from an unchanging spread (ready 3 to 40 s, in a fixed scrambled order) never fire
/// the drift test: the sums stay under the limit over a thousand solves.
#[test]
fn a_steady_spread_never_fires_the_drift_test() {
    let ready_ms = |i: usize| 3_000 + (i as u64 * 7_919) % 37_000;
    let mut model = taught(20, ready_ms);
    assert_eq!(drift_fired_at(&mut model, 20..1_000, ready_ms), Vec::<usize>::new());
}

#[test]
fn resubmitted_and_pollless_solves_are_not_observed() {
    let mut model = SolveTimes::new("turnstile").unwrap();
    assert!(!model.observe(&solution_of_attempts(20_000, 2, 2)));
    assert!(!model.observe(&solution(20_000, 0)));
    assert_eq!(model.observations(), 0);
}

/// A model's text as version `version` with the drift sums `drift` (JSON).
fn with_drift(text: &str, version: u64, drift: &str) -> String {
    let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
    value["version"] = version.into();
    value["drift"] = serde_json::from_str(drift).unwrap();
    value.to_string()
}

/// Whether an error is the one expected.
type Expected = fn(&SolveTimesError) -> bool;

#[test]
fn bad_text_is_a_typed_error() {
    let good = learned(8_000, 25).to_string();
    assert!(good.contains(r#""version":4"#), "{good}");
    let invalid = |e: &SolveTimesError| matches!(e, SolveTimesError::Invalid(_));
    let cases: Vec<(String, Expected)> = vec![
        ("".into(), |e| matches!(e, SolveTimesError::Malformed(_))),
        ("{\"format\":".into(), |e| matches!(e, SolveTimesError::Malformed(_))),
        ("[1,2]".into(), |e| matches!(e, SolveTimesError::Foreign)),
        (r#"{"format":"captchaai-engine/solve","version":2}"#.into(), |e| matches!(e, SolveTimesError::Foreign)),
        (good.replace("\"version\":4", "\"version\":9"), |e| matches!(e, SolveTimesError::UnsupportedVersion(9))),
        (with_drift(&good, 2, r#""1:0""#), invalid),
        (with_drift(&good, 4, r#""1:9999999""#), invalid),
        (with_drift(&good, 4, r#""1""#), invalid),
        (with_drift(&good, 4, "[1,0]"), invalid),
        (with_drift(&good, 3, r#""1/20:0""#), invalid),
        (with_drift(&good, 4, r#""0/20:5""#), invalid),
        (with_drift(&good, 4, r#""5/500:0""#), invalid),
        (with_drift(&good, 4, r#""5/:0""#), invalid),
        (with_drift(&good, 4, r#""5:7/2/3""#), invalid),
        (good.replace("turnstile", "hcaptcha"), invalid),
        (good.replace("\"n\":", "\"extra\":1,\"n\":"), invalid),
        (good.replace("\"n\":25", "\"n\":0"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"0:500:1024,"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"5:5:1024,"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"0:1:0,"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"0:1:99999999,"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"x,"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"0:1,"), invalid),
        (good.replace("\"seen\":\"", "\"seen\":\"99:100:1024,"), invalid),
    ];
    for (text, expected) in cases {
        let error = text.parse::<SolveTimes>().expect_err(&text);
        assert!(expected(&error), "{text}: {error:?}");
    }
}

/// A version 2 model (no drift test) is read as the same model with both drift sums zero; a
/// version 3 one keeps its sums, their edges not known; a version 4 one keeps both.
#[test]
fn versions_2_to_4_are_read() {
    let v2 = r#"{"format":"captchaai-engine/solve-times","version":2,"type":"turnstile","n":25,"seen":"0:8:20480,8:13:4096"}"#;
    let model: SolveTimes = v2.parse().unwrap();
    let v4 = v2.replace(r#""version":2"#, r#""version":4"#);
    assert_eq!(model.to_string(), v4);
    let drifting = |version: u64, drift: &str| {
        v2.replace(r#""version":2"#, &format!(r#""version":{version}"#))
            .replace('}', &format!(r#","drift":"{drift}"}}"#))
    };
    let model: SolveTimes = drifting(3, "5:70000").parse().unwrap();
    assert_eq!(model.to_string(), drifting(4, "5:70000"));
    assert_ne!(model, v4.parse().unwrap());
    let model: SolveTimes = drifting(4, "5/13:70000/8").parse().unwrap();
    assert_eq!(model.to_string(), drifting(4, "5/13:70000/8"));
    assert_ne!(model, drifting(4, "5:70000").parse().unwrap());
}

/// Version 1 models (histograms of lower bounds) are read: each remembered lower bound becomes an
/// interval up to one poll interval after it, from the submit for solves answered at their
/// first poll; a malformed one is still refused.
#[test]
fn a_version_1_model_is_read() {
    let v1 = r#"{"format":"captchaai-engine/solve-times","version":1,"type":"turnstile","n":40,"fast_ms":13000,"floor_ms":0,"calm":21,"hist":"8:1893,13:1012,43:2149","missed":"13:1012,43:2149"}"#;
    let model: SolveTimes = v1.parse().unwrap();
    assert_eq!((model.task_type(), model.observations()), ("turnstile", 40));
    assert!(model.first_wait_ms().is_some());
    let text = model.to_string();
    assert!(text.contains(r#""version":4"#) && text.contains("0:14:") && text.contains("13:19:"), "{text}");
    assert_eq!(text.parse::<SolveTimes>().unwrap(), model);
    let broken = v1.replace("\"hist\":\"8:", "\"hist\":\"x:");
    assert!(matches!(broken.parse::<SolveTimes>(), Err(SolveTimesError::Invalid(_))));
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
            for start in [T0, T0 + 5, T0 + 11] {
                assert_eq!(
                    drive(TURNSTILE, &Config::default(), Some(&reloaded), start, probe),
                    drive(TURNSTILE, &Config::default(), Some(&model), start, probe)
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever it observed and whatever a poll costs, a model never makes a solve poll within
    /// 1 s of the submit or two polls within 5 s, nor send at or after the deadline; its text
    /// stays within 1 KiB, reads back equal, and the same model and inputs make the same requests.
    #[test]
    fn no_model_polls_too_soon(
        type_index in 0usize..14,
        seen in prop::collection::vec((0u64..400_000, 0u32..40, 1u32..3, 0u64..1_000_000), 0..300),
        ready in 0u64..150_000,
        poll_cost_ms in 0u64..=60_000,
        start in 0u64..1_000_000,
    ) {
        let kind = task_types().nth(type_index % task_types().len()).unwrap();
        let mut model = SolveTimes::new(kind.name()).unwrap();
        let mut turnstile = SolveTimes::new("turnstile").unwrap();
        for (elapsed, polls, attempts, submitted_at) in seen {
            let mut observed = solution_of_attempts(elapsed, polls, attempts);
            observed.submitted_at = submitted_at;
            model.observe(&observed);
            turnstile.observe(&observed);
        }
        let text = model.to_string();
        prop_assert!(text.len() <= 1_024, "{} B", text.len());
        prop_assert_eq!(&text.parse::<SolveTimes>().unwrap(), &model);
        if let Some(wait) = model.first_wait_ms() {
            prop_assert!(wait >= 1_000);
        }
        let config = Config { poll_cost_ms, ..Config::default() };
        let (sent, _) = drive(TURNSTILE, &config, Some(&turnstile), start, ready);
        let polls = polls(&sent);
        prop_assert!(polls.first().is_none_or(|&first| first >= 1_000));
        prop_assert!(polls.windows(2).all(|w| w[1] - w[0] >= 5_000), "{:?}", polls);
        prop_assert!(sent.iter().all(|(_, at)| *at < 120_000));
        prop_assert_eq!(drive(TURNSTILE, &config, Some(&turnstile), start, ready).0, sent);
    }

    /// Any text either reads as a model or is refused with an error; it never panics.
    #[test]
    fn any_text_parses_or_errs(text in ".{0,300}") {
        let _ = text.parse::<SolveTimes>();
    }
}
