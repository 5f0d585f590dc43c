//! Replays every golden vector in testdata/vectors natively and compares the full transcript.
//! `BLESS=1 cargo test --test vectors` rewrites the transcripts, and everything else derived from
//! the engine's rules: the solve-times models built from `solve_times_recipe` and the model after
//! the solve (read the diff afterwards); the hand-written `expect` summaries are checked either
//! way.

use std::fs;
use std::path::PathBuf;

mod common;

use captchaai_engine::RequestKind;
use captchaai_vectors::{Native, Vector, build_solve_times, replay_full};
use serde_json::Value as Json;

fn vector_files() -> Vec<PathBuf> {
    json_files("testdata/vectors")
}

/// The `.json` files directly in `dir` (relative to the crate), sorted.
fn json_files(dir: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// The last event that ends a transcript: `solved`, `failed`, `rejected` (or an `error`).
fn outcome(transcript: &[Json]) -> (&str, &Json) {
    let last = transcript.last().expect("empty transcript");
    let (kind, body) = last.as_object().unwrap().iter().find(|(k, _)| *k != "at").expect("event kind");
    (kind.as_str(), body)
}

/// Checks a transcript against the vector's hand-written expectations.
fn check_expect(vector: &Vector, transcript: &[Json]) -> Result<(), String> {
    let expect = &vector.expect;
    let (kind, body) = outcome(transcript);
    let want = |key: &str| expect.get(key);
    if want("outcome").and_then(Json::as_str) != Some(kind) {
        return Err(format!("outcome {kind}, expected {:?}", want("outcome")));
    }
    let sends = transcript.iter().filter(|e| e.get("send").is_some()).count() as u64;
    if want("sends").and_then(Json::as_u64) != Some(sends) {
        return Err(format!("{sends} requests sent, expected {:?}", want("sends")));
    }
    for key in ["code", "class", "retry_after_ms", "field"] {
        if let Some(expected) = want(key)
            && body.get(key) != Some(expected)
        {
            return Err(format!("{key} is {:?}, expected {expected:?}", body.get(key)));
        }
    }
    if let Some(answer) = want("answer") {
        let got = body.get("answer").and_then(|a| a.get("text").or_else(|| a.get("json")));
        if got != Some(answer) {
            return Err(format!("answer {got:?}, expected {answer:?}"));
        }
    }
    Ok(())
}

/// Invariants every transcript must keep, whatever the vector.
fn check_invariants(vector: &Vector, transcript: &[Json]) -> Result<(), String> {
    let mut last_at = 0;
    let mut last_task_send: Option<(u64, Option<&str>)> = None;
    for event in transcript {
        let at = event.get("at").and_then(Json::as_u64).ok_or("event without time")?;
        if at < last_at {
            return Err("time went backwards in the transcript".into());
        }
        last_at = at;
        if event.get("error").is_some() {
            return Err(format!("replay error: {event}"));
        }
        if let Some(send) = event.get("send") {
            let url = send.get("url").and_then(Json::as_str).unwrap_or_default();
            if url.contains(&vector.key) {
                return Err("the key is in a URL".into());
            }
            let kind = send.get("kind").and_then(Json::as_str);
            if kind == Some("poll")
                && let Some((previous, previous_kind)) = last_task_send
            {
                let previous_kind = if previous_kind == Some("poll") { RequestKind::Poll } else { RequestKind::Submit };
                if at < previous + common::min_poll_gap(previous_kind) {
                    return Err(format!("polled {} ms after the previous request for the task", at - previous));
                }
            }
            if matches!(kind, Some("poll" | "submit")) {
                last_task_send = Some((at, kind));
            }
        } else if event.get("reply").is_none() && event.get("transport").is_none() {
            let text = event.to_string();
            if text.contains(&vector.key) {
                return Err(format!("the key appears in an output: {text}"));
            }
        }
    }
    Ok(())
}

#[test]
fn golden_vectors_replay_exactly() {
    let bless = std::env::var_os("BLESS").is_some();
    let files = vector_files();
    assert!(files.len() >= 60, "expected the full vector set, found {}", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = fs::read_to_string(path).unwrap();
        let mut vector = Vector::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = vector.name.clone();
        if let Some(recipe) = &vector.solve_times_recipe {
            let built = build_solve_times(recipe).unwrap_or_else(|e| panic!("{name}: solve_times_recipe: {e}"));
            if bless {
                vector.solve_times = Some(built);
            } else if vector.solve_times.as_ref() != Some(&built) {
                failures.push(format!(
                    "{name}: solve_times is not what solve_times_recipe builds (the rule changed? bless)\n  \
                     stored: {:?}\n  built:  {built}",
                    vector.solve_times
                ));
                continue;
            }
        }
        let replayed = replay_full(&mut Native, &vector);
        let transcript = replayed.transcript;
        if let Err(e) = check_expect(&vector, &transcript).and_then(|()| check_invariants(&vector, &transcript)) {
            let pretty = serde_json::to_string_pretty(&transcript).unwrap();
            failures.push(format!("{name}: {e}\n  transcript: {pretty}"));
            continue;
        }
        if bless {
            vector.transcript = transcript;
            vector.solve_times_after = replayed.solve_times_after;
            fs::write(path, vector.to_pretty() + "\n").unwrap();
        } else if vector.solve_times_after != replayed.solve_times_after {
            failures.push(format!(
                "{name}: the model after the solve differs\n  stored:   {:?}\n  replayed: {:?}",
                vector.solve_times_after, replayed.solve_times_after
            ));
        } else if vector.transcript != transcript {
            let first = vector
                .transcript
                .iter()
                .zip(&transcript)
                .position(|(a, b)| a != b)
                .unwrap_or(transcript.len().min(vector.transcript.len()));
            failures.push(format!(
                "{name}: transcript differs at event {first}\n  stored:   {}\n  replayed: {}",
                vector.transcript.get(first).map(Json::to_string).unwrap_or_default(),
                transcript.get(first).map(Json::to_string).unwrap_or_default(),
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} vectors failed:\n{}", failures.len(), files.len(), failures.join("\n"));
}

#[test]
fn vector_files_round_trip_through_the_schema() {
    for path in vector_files() {
        let text = fs::read_to_string(&path).unwrap();
        let vector = Vector::parse(&text).unwrap();
        assert_eq!(vector.to_pretty() + "\n", text, "{} is not in canonical form", path.display());
    }
}

/// The solve-times vectors show what they say: a fast model polls before the table's first wait,
/// a slow one after it, a bimodal one waits longer after a first poll that found nothing (and
/// its solve's snapshot is version 3), one with the early group's stragglers after regular polls
/// through the early group (its snapshot says after how many), a model of another type is
/// refused; and every model
/// after a solved solve has learned from it.
#[test]
fn solve_times_vectors_show_their_models() {
    use captchaai_engine::{ApiKey, Config, Output, Solve, SolveTimes, Task};
    let load = |name: &str| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/vectors/{name}.json"));
        Vector::parse(&fs::read_to_string(path).unwrap()).unwrap()
    };
    let model = |v: &Vector| v.solve_times.as_deref().expect("a model").parse::<SolveTimes>().unwrap();
    let table = |v: &Vector| {
        let kind = v.task["type"].as_str().unwrap();
        captchaai_engine::task_types().find(|t| t.name() == kind).unwrap().first_wait_ms()
    };
    // The first poll's time after the submit, in the stored transcript.
    let first_poll_gap = |v: &Vector| {
        let sends: Vec<&Json> = v.transcript.iter().filter_map(|e| e.get("send")).collect();
        let at = |i: usize| sends[i]["at"].as_u64().unwrap();
        assert_eq!(sends[0]["kind"], "submit");
        assert_eq!(sends[1]["kind"], "poll");
        (at(1), at(0), sends.iter().map(|s| s["at"].as_u64().unwrap()).collect::<Vec<_>>())
    };
    let n = |text: &str| text.parse::<SolveTimes>().unwrap().observations();

    let fast = load("solve_times_fast");
    let wait = model(&fast).first_wait_ms().expect("a learned first wait");
    assert!(wait < table(&fast), "fast: {wait} ms, table {}", table(&fast));
    let (poll, submit, _) = first_poll_gap(&fast);
    assert!(poll - submit < table(&fast), "fast: the first poll comes before the table's");

    let slow = load("solve_times_slow");
    let wait = model(&slow).first_wait_ms().expect("a learned first wait");
    assert!(wait > table(&slow), "slow: {wait} ms, table {}", table(&slow));
    let (poll, submit, _) = first_poll_gap(&slow);
    assert!(poll - submit > table(&slow), "slow: the first poll comes after the table's");

    let bimodal = load("solve_times_bimodal");
    let (_, _, ats) = first_poll_gap(&bimodal);
    let interval = captchaai_engine::task_types().find(|t| t.name() == "turnstile").unwrap().poll_interval_ms();
    assert!(ats[2] - ats[1] > interval, "bimodal: a second wait longer than the interval: {ats:?}");
    assert!(!bimodal.restore_before.is_empty(), "bimodal: restored mid-solve");
    let task = Task::from_json(&bimodal.task.to_string()).unwrap();
    let key = ApiKey::new(&bimodal.key).unwrap();
    let config = Config::from_json(&bimodal.config.to_string()).unwrap();
    assert_eq!(config.poll_cost_ms, 1_000, "bimodal: a poll worth 1 s");
    let mut solve = Solve::with_solve_times(task, key, &config, &model(&bimodal), bimodal.start_ms).unwrap();
    assert!(matches!(solve.poll_output(bimodal.start_ms), Ok(Output::Send(_))));
    assert!(solve.snapshot().contains(r#""version":3"#), "bimodal: {}", solve.snapshot());

    let stragglers = load("solve_times_stragglers");
    let (_, _, ats) = first_poll_gap(&stragglers);
    // (Poll times count from the send; each reply takes 200 ms.)
    for regular in 2..5 {
        assert!(
            (interval..2 * interval).contains(&(ats[regular] - ats[regular - 1])),
            "stragglers: regular polls: {ats:?}"
        );
    }
    assert!(ats[5] - ats[4] > 2 * interval, "stragglers: then a wait over the gap: {ats:?}");
    let task = Task::from_json(&stragglers.task.to_string()).unwrap();
    let key = ApiKey::new(&stragglers.key).unwrap();
    let solve =
        Solve::with_solve_times(task, key, &Config::default(), &model(&stragglers), stragglers.start_ms).unwrap();
    assert!(solve.snapshot().contains(r#""gap_after_polls":4"#), "stragglers: {}", solve.snapshot());

    let foreign = load("solve_times_other_type");
    assert_ne!(model(&foreign).task_type(), foreign.task["type"].as_str().unwrap());
    assert_eq!(outcome(&foreign.transcript).1["field"], "solve_times");
    assert_eq!(foreign.solve_times_after, foreign.solve_times, "a refused solve teaches nothing");

    for v in [&fast, &slow, &bimodal, &stragglers] {
        let (before, after) = (v.solve_times.as_deref().unwrap(), v.solve_times_after.as_deref().unwrap());
        assert_eq!(n(after), n(before) + 1, "{}: the model observed the solution", v.name);
    }
}

fn endpoint_files() -> Vec<PathBuf> {
    json_files("testdata/vectors/endpoint")
}

/// Every endpoint vector case gives its stored result natively, and agrees with its hand-written
/// `expect`; `BLESS=1` rewrites the results. No result holds the key a case's request carried,
/// except where the case put it (a submit's or question's `key`, a refusal's `key`).
#[test]
fn endpoint_vectors_give_their_results() {
    use captchaai_vectors::endpoint::{Call, EndpointVector, check_expect, run_case};
    let bless = std::env::var_os("BLESS").is_some();
    let files = endpoint_files();
    assert!(files.len() >= 4, "expected the endpoint vectors, found {}", files.len());
    let mut failures = Vec::new();
    let mut cases = 0;
    for path in &files {
        let text = fs::read_to_string(path).unwrap();
        let mut vector = EndpointVector::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for case in &mut vector.cases {
            cases += 1;
            let result = run_case(&mut Native, &case.call);
            let name = format!("{} / {}", vector.name, case.about);
            if let Err(e) = check_expect(&case.expect, &result) {
                failures.push(format!("{name}: {e}\n  result: {result}"));
                continue;
            }
            if let Call::Read { params, .. } = &case.call {
                let mut rendered = result.clone();
                for outcome in ["submit", "res", "refusal"] {
                    if let Some(body) = rendered.get_mut(outcome).and_then(Json::as_object_mut) {
                        body.remove("key");
                    }
                }
                let rendered = rendered.to_string();
                for (_, value) in params.iter().filter(|(name, _)| name.eq_ignore_ascii_case("key")) {
                    if value.len() >= 8 && rendered.contains(value.as_str()) {
                        failures.push(format!("{name}: the key appears in the result: {rendered}"));
                    }
                }
            }
            if bless {
                case.result = result;
            } else if case.result != result {
                failures.push(format!("{name}: the result differs\n  stored:   {}\n  replayed: {result}", case.result));
            }
        }
        if bless {
            fs::write(path, vector.to_pretty() + "\n").unwrap();
        } else {
            assert_eq!(vector.to_pretty() + "\n", text, "{} is not in canonical form", path.display());
        }
    }
    assert!(cases >= 100, "expected the full endpoint case set, found {cases}");
    assert!(failures.is_empty(), "{} endpoint cases failed:\n{}", failures.len(), failures.join("\n"));
}

/// The last-poll vectors show what they say: a host stalled past the deadline sends exactly one
/// poll, due when it woke, while the submit plus the token lifetime has not passed (its answer
/// then expires at that time), and nothing at all once it has, or for a type whose tokens do not
/// outlive the deadline.
#[test]
fn last_poll_vectors_show_their_decisions() {
    let load = |name: &str| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/vectors/{name}.json"));
        Vector::parse(&fs::read_to_string(path).unwrap()).unwrap()
    };
    // The sends after the host woke from its stall, as (kind, at).
    let after_stall = |v: &Vector| -> Vec<(String, u64)> {
        let woke = v.transcript.iter().position(|e| e.get("stalled").is_some()).expect("a stall");
        v.transcript[woke..]
            .iter()
            .filter_map(|e| e.get("send"))
            .map(|s| (s["kind"].as_str().unwrap().to_owned(), s["at"].as_u64().unwrap()))
            .collect()
    };
    for name in ["deadline_last_poll_saves_the_answer", "deadline_last_poll_not_ready"] {
        let v = load(name);
        let until = v.stall_before[0].until_ms;
        assert!(until >= 120_000, "{name}: the host wakes past turnstile's 120 s deadline");
        assert_eq!(after_stall(&v), [("poll".to_owned(), until)], "{name}: one last poll, due when the host woke");
    }
    let saved = load("deadline_last_poll_saves_the_answer");
    assert_eq!(outcome(&saved.transcript).1["expires_at"], 300_000, "the submit plus turnstile's 300 s lifetime");
    for name in ["deadline_last_poll_past_lifetime", "deadline_late_no_window"] {
        assert_eq!(after_stall(&load(name)), [], "{name}: nothing sent after the deadline");
    }
}
