//! Drives the native engine with a virtual clock: one solve per given solve time, against a
//! fake CaptchaAI that answers at once (zero network latency), `CAPCHA_NOT_READY` until the
//! solve time has passed since the submit was sent, then the answer. Prints, per solve, the
//! `res.php` polls it sent and how long after the answer was ready the engine saw it.
//!
//! stdin:  `{"types": [{"name": .., "task": <task JSON>, "solve_ms": [..], "initial_wait_ms": null,
//!          "poll_cost_ms": null, "adaptive": false, "oracle": []}, ..]}`
//! stdout: `{"<name>": [[polls, delay_ms, first_wait_ms, main_polls, main_first_wait_ms,
//!          main_delay_ms], ..], ..}`
//! in the input's order of solve times.
//! The engine's own tables decide every wait (default config: no jitter), unless
//! `initial_wait_ms` overrides the type's first wait through the engine's config, or `adaptive`
//! runs the solves in order with one `SolveTimes` model that observes each finished solve
//! (created with `poll_cost_ms`, a minute apart: whether one explores is a hash of when).
//! `main_polls` and `main_delay_ms` are what the model's chosen schedule (whose first wait is
//! `main_first_wait_ms`, 0 while the table applies) would have polled and waited for that solve
//! (the same as `polls` and `delay_ms` unless the solve explored).
//!
//! With `oracle` (poll costs in ms), the entry instead prints, per cost, the best schedule of
//! adaptive polling's family for those very solve times, chosen in hindsight:
//! `[[poll_cost_ms, first_wait_s, longer_wait_after (0: none), longer_wait_until_s, mean polls,
//! mean delay ms], ..]`. The family: a first poll on the whole-second grid from 1 s to one interval
//! before the deadline, then one every interval, except one longer wait (after any poll, to a
//! whole second).
//!
//! `polling-bench cost` instead prints the engine-cost numbers as JSON (wall-clock means over
//! many repetitions, native build): `observe`, a canned solve created with and without a
//! warmed model, parsing a model, and the model's text size per type.

use std::io::Read as _;
use std::time::Instant;

use captchaai_engine::{ApiKey, Config, Output, RequestKind, Schedule, Solve, SolveTimes, Task};
use serde::Deserialize;

/// A placeholder key: the fake service accepts anything well formed.
const KEY: &str = "0123456789abcdef0123456789abcdef";
/// Virtual epoch of the first solve.
const T0: u64 = 1_700_000_000_000;
/// Between the creation of one solve and the next.
const SPACING_MS: u64 = 60_000;

#[derive(Deserialize)]
struct Input {
    types: Vec<TypeInput>,
}

#[derive(Deserialize)]
struct TypeInput {
    name: String,
    task: serde_json::Value,
    solve_ms: Vec<u64>,
    #[serde(default)]
    initial_wait_ms: Option<u64>,
    #[serde(default)]
    poll_cost_ms: Option<u64>,
    #[serde(default)]
    adaptive: bool,
    #[serde(default)]
    oracle: Vec<u64>,
}

/// One solve created at `start`: (polls, delay from ready to seen, first wait, and the polls,
/// first wait and delay of the model's chosen schedule), or a message. With a model, the solve
/// is created with it and the model observes the solution.
fn run(
    task: &str,
    solve_ms: u64,
    config: &Config,
    start: u64,
    model: Option<&mut SolveTimes>,
) -> Result<[u64; 6], String> {
    let create = |f: String| format!("create: {f}");
    let parsed = Task::from_json(task).map_err(|e| create(e.to_string()))?;
    let key = ApiKey::new(KEY).map_err(|e| create(e.to_string()))?;
    let interval = parsed.task_type().poll_interval_ms();
    let planned = model.as_deref().and_then(|model| model.schedule(config, start));
    let mut solve = match &model {
        Some(model) => Solve::with_solve_times(parsed, key, config, model, start),
        None => Solve::new(parsed, key, config, start),
    }
    .map_err(|e| create(e.to_string()))?;
    let (mut now, mut submitted, mut first_wait) = (start, start, None);
    let mut ready_at = None;
    let mut output = solve.poll_output(now).map_err(|m| format!("{m:?}"))?;
    // Bounded: a solve ends by its deadline; 10,000 steps is far beyond any schedule.
    for _ in 0..10_000 {
        match output {
            Output::Send(request) => {
                now = now.max(request.at);
                let body = match request.kind {
                    RequestKind::Submit => {
                        submitted = now;
                        ready_at = Some(now + solve_ms);
                        r#"{"status":1,"request":"73000000001"}"#.to_owned()
                    }
                    RequestKind::Poll if first_wait.is_none() => {
                        first_wait = Some(now - submitted);
                        if Some(now) >= ready_at { answer_for(task) } else { not_ready() }
                    }
                    RequestKind::Poll if Some(now) >= ready_at => answer_for(task),
                    RequestKind::Poll => not_ready(),
                    other => return Err(format!("unexpected request {other:?}")),
                };
                output = solve.handle_response(now, request.id, 200, body.as_bytes()).map_err(|m| format!("{m:?}"))?;
            }
            Output::Solved(solution) => {
                let ready = ready_at.ok_or("solved before a submit")?;
                if let Some(model) = model {
                    model.observe(&solution);
                }
                let (polls, delay) = (u64::from(solution.polls), solution.solved_at - ready);
                let (main_polls, main_delay) = match planned {
                    Some((this, main)) if this != main => {
                        let n = polls_of(&main, solve_ms, interval);
                        (n, main.poll_ms(n as u32, interval).saturating_sub(solve_ms))
                    }
                    _ => (polls, delay),
                };
                let main_wait = planned.map_or(0, |(_, main)| main.first_wait_ms);
                return Ok([polls, delay, first_wait.unwrap_or(0), main_polls, main_wait, main_delay]);
            }
            Output::Failed(failure) => return Err(format!("failed: {} {}", failure.code, failure.message)),
        }
    }
    Err("no end after 10,000 steps".into())
}

/// The polls `schedule` makes for an answer ready `solve_ms` after the submit.
fn polls_of(schedule: &Schedule, solve_ms: u64, interval_ms: u64) -> u64 {
    (1..).find(|&n| schedule.poll_ms(n, interval_ms) >= solve_ms).map_or(0, u64::from)
}

fn not_ready() -> String {
    r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#.to_owned()
}

/// A ready reply in the shape the type's answer takes.
fn answer_for(task: &str) -> String {
    let kind = serde_json::from_str::<serde_json::Value>(task)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_default();
    let answer = match kind.as_str() {
        "grid" | "bls" => "[1,4]".to_owned(),
        "geetest_v3" => r#"{"challenge":"c","validate":"v","seccode":"s|jordan"}"#.to_owned(),
        "geetest_v4" => {
            r#"{"captcha_id":"x","lot_number":"l","pass_token":"p","gen_time":"1","captcha_output":"o"}"#.to_owned()
        }
        "lemin" => r#"{"answer":"0xa","challenge_uuid":"u"}"#.to_owned(),
        _ => "03AFcWeA-token".to_owned(),
    };
    serde_json::json!({"status": 1, "request": answer, "result": answer, "user_agent": "Mozilla/5.0"}).to_string()
}

/// The best schedule of the family for the solve times `solve_ms` of a type with this poll
/// interval and deadline, per poll cost, in hindsight: every first wait, every poll to wait
/// longer after and every end of the longer wait is tried on the solves' exact survival counts
/// (a schedule that leaves a solve unanswered before the deadline is not a candidate).
fn oracle(solve_ms: &[u64], interval_ms: u64, deadline_ms: u64, costs: &[u64]) -> Vec<serde_json::Value> {
    let n = solve_ms.len() as f64;
    let mut sorted = solve_ms.to_vec();
    sorted.sort_unstable();
    let (interval, horizon) = ((interval_ms / 1_000) as usize, (deadline_ms / 1_000) as usize);
    // survival[t]: solves not ready by t seconds.
    let survival: Vec<f64> =
        (0..=horizon).map(|t| (sorted.len() - sorted.partition_point(|&ms| ms <= t as u64 * 1_000)) as f64).collect();
    // ahead[t]: survival summed over regular polls from t; left[t]: survival at the last of them.
    let (mut ahead, mut left) = (vec![0.0; horizon], vec![0.0; horizon]);
    for t in (0..horizon).rev() {
        let (next, next_left) =
            if t + interval < horizon { (ahead[t + interval], left[t + interval]) } else { (0.0, survival[t]) };
        ahead[t] = survival[t] + next;
        left[t] = next_left;
    }
    let ready: f64 = sorted.iter().map(|&ms| ms as f64).sum();
    // Per cost: (price, polls, time from the submit to the answers' polls in ms, first wait, after, until).
    let mut best: Vec<(f64, f64, f64, usize, usize, usize)> =
        costs.iter().map(|_| (f64::INFINITY, 0.0, 0.0, 0, 0, 0)).collect();
    let mut consider = |polls: f64, time: f64, wait: usize, after: usize, until: usize| {
        for (slot, &cost) in best.iter_mut().zip(costs) {
            let price = time * 1_000.0 + cost as f64 * polls;
            if price < slot.0 {
                *slot = (price, polls, time * 1_000.0, wait, after, until);
            }
        }
    };
    for wait in 1..=horizon - interval {
        if left[wait] == 0.0 {
            consider(n + ahead[wait], wait as f64 * n + interval as f64 * ahead[wait], wait, 0, 0);
        }
        for last in (wait..horizon).step_by(interval) {
            let before = ahead[wait] - ahead[last];
            for until in last + interval + 1..horizon {
                if left[until] != 0.0 {
                    continue;
                }
                let polls = n + before + survival[last] + ahead[until];
                let time = wait as f64 * n
                    + interval as f64 * before
                    + (until - last) as f64 * survival[last]
                    + interval as f64 * ahead[until];
                consider(polls, time, wait, (last - wait) / interval + 1, until);
            }
        }
    }
    costs
        .iter()
        .zip(best)
        .map(|(&cost, (_, polls, time, wait, after, until))| {
            serde_json::json!([cost, wait, after, until, polls / n, (time - ready) / n])
        })
        .collect()
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("cost") => return cost(),
        Some("count") => {
            return count(args.get(2).map_or("", String::as_str), args.get(3).and_then(|n| n.parse().ok()).unwrap_or(0));
        }
        _ => {}
    }
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
    let input: Input = serde_json::from_str(&text).map_err(|e| format!("input: {e}"))?;
    let mut out = serde_json::Map::new();
    for t in &input.types {
        let task = t.task.to_string();
        let kind = t.task.get("type").and_then(|v| v.as_str()).unwrap_or_default();
        if !t.oracle.is_empty() {
            let row = captchaai_engine::task_types().find(|row| row.name() == kind).ok_or("unknown type")?;
            let best = oracle(&t.solve_ms, row.poll_interval_ms(), row.deadline_ms(), &t.oracle);
            out.insert(t.name.clone(), serde_json::Value::Array(best));
            continue;
        }
        let mut config = Config { initial_wait_ms: t.initial_wait_ms, ..Config::default() };
        if let Some(cost) = t.poll_cost_ms {
            config.poll_cost_ms = cost;
        }
        let mut model = if t.adaptive { Some(SolveTimes::new(kind).map_err(|e| e.to_string())?) } else { None };
        let rows = t
            .solve_ms
            .iter()
            .enumerate()
            .map(|(i, &ms)| {
                run(&task, ms, &config, T0 + i as u64 * SPACING_MS, model.as_mut())
                    .map(|row| serde_json::json!(row))
                    .map_err(|e| format!("{}: {e}", t.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.insert(t.name.clone(), serde_json::Value::Array(rows));
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}

/// Mean wall-clock nanoseconds of `f` over `n / 5` runs, the fastest of five such batches (after
/// `n / 10` warm-up runs).
fn mean_ns(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    // The fastest of five batches: on a shared machine a batch that another process preempted
    // measures the machine, not the engine (one mean of all runs read 4.1-6.1 µs for `observe`
    // under a concurrent build, the fastest batch 3.2 µs).
    (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n / BATCHES {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(n / BATCHES)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Batches [`mean_ns`] times, keeping the fastest.
const BATCHES: u32 = 5;

/// A canned solve (submit, three not-ready polls, the answer), created with `model` if given.
fn canned(task: &str, model: Option<&SolveTimes>) -> u32 {
    let parsed = Task::from_json(task).ok();
    let key = ApiKey::new(KEY).ok();
    let (Some(parsed), Some(key)) = (parsed, key) else { return 0 };
    let config = Config::default();
    let solve = match model {
        Some(model) => Solve::with_solve_times(parsed, key, &config, model, T0),
        None => Solve::new(parsed, key, &config, T0),
    };
    let Ok(mut solve) = solve else { return 0 };
    let replies = [r#"{"status":1,"request":"7412"}"#, "CAPCHA_NOT_READY", "CAPCHA_NOT_READY", "CAPCHA_NOT_READY"];
    let mut output = solve.poll_output(T0);
    for reply in replies.iter().copied().chain(std::iter::once(r#"{"status":1,"request":"0.TOKEN"}"#)) {
        match output {
            Ok(Output::Send(request)) => output = solve.handle_response(request.at, request.id, 200, reply.as_bytes()),
            _ => break,
        }
    }
    matches!(output, Ok(Output::Solved(_))) as u32
}

/// The engine-cost numbers: `{"observe_ns", "solve_ns", "solve_with_model_ns", "parse_ns",
/// "model_bytes": {type: bytes}, "default_poll_cost_ms"}`. Models are taught 1,000 solves
/// ([`taught`]).
fn cost() -> Result<(), String> {
    let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#;
    let (mut model, lesson) = taught("turnstile")?;
    let mut i = 0;
    let observe_ns = mean_ns(200_000, || {
        i += 1;
        model.observe(&lesson[i % lesson.len()]);
    });
    let (model, _) = taught("turnstile")?;
    let mut solved = 0;
    let solve_ns = mean_ns(100_000, || solved += canned(task, None));
    let solve_with_model_ns = mean_ns(100_000, || solved += canned(task, Some(&model)));
    if solved == 0 {
        return Err("the canned solve did not solve".into());
    }
    let text = model.to_string();
    let mut parsed = 0;
    let parse_ns = mean_ns(100_000, || parsed += text.parse::<SolveTimes>().is_ok() as u32);
    let mut sizes = serde_json::Map::new();
    for t in captchaai_engine::task_types() {
        sizes.insert(t.name().to_owned(), taught(t.name())?.0.to_string().len().into());
    }
    let out = serde_json::json!({
        "observe_ns": observe_ns, "solve_ns": solve_ns, "solve_with_model_ns": solve_with_model_ns,
        "parse_ns": parse_ns, "model_bytes": sizes, "default_poll_cost_ms": Config::default().poll_cost_ms,
    });
    println!("{out}");
    Ok(())
}

/// Runs `n` of one engine operation (`observe`, `solve`, `solve-with-model`, `parse`) after the
/// setup `cost` uses, for instruction counts: `valgrind --tool=callgrind` at two values of `n`,
/// the difference over their difference.
fn count(kind: &str, n: usize) -> Result<(), String> {
    let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#;
    let (mut model, lesson) = taught("turnstile")?;
    let text = model.to_string();
    let mut done = 0u64;
    for i in 0..n {
        done += match kind {
            "observe" => u64::from(model.observe(&lesson[i % lesson.len()])),
            "solve" => u64::from(canned(task, None)),
            "solve-with-model" => u64::from(canned(task, Some(&model))),
            "parse" => u64::from(text.parse::<SolveTimes>().is_ok()),
            "text" => {
                println!("{text}");
                return Ok(());
            }
            _ => return Err(format!("unknown operation `{kind}`")),
        };
    }
    println!("{done}");
    Ok(())
}

/// A model of `kind` after 1,000 solves ready from 1 s to 7 s before the deadline (spread by a
/// stride), each polled on the schedule the model gave it then (zero latency), and the
/// solutions it observed.
fn taught(kind: &str) -> Result<(SolveTimes, Vec<captchaai_engine::Solution>), String> {
    let row = captchaai_engine::task_types().find(|row| row.name() == kind).ok_or("unknown type")?;
    let mut model = SolveTimes::new(kind).map_err(|e| e.to_string())?;
    let mut lesson = Vec::new();
    let table = Schedule { first_wait_ms: row.first_wait_ms(), gap: None };
    for i in 0..1_000u64 {
        let start = T0 + i * SPACING_MS;
        let ready = 1_000 + (i * 7_919) % (row.deadline_ms() - 8_000);
        let schedule = model.schedule(&Config::default(), start).map_or(table, |(this, _)| this);
        let polls = polls_of(&schedule, ready, row.poll_interval_ms()) as u32;
        let elapsed = schedule.poll_ms(polls, row.poll_interval_ms());
        let mut solved = solution(elapsed, polls);
        (solved.submitted_at, solved.solved_at) = (start, start + elapsed);
        model.observe(&solved);
        lesson.push(solved);
    }
    Ok((model, lesson))
}

/// A solution of one attempt: `elapsed` ms after the submit, found at poll `polls`. Solutions
/// are `#[non_exhaustive]`: one is read from its JSON form once, then copied and set (a copy
/// shares the answer and task id, so `observe_ns` counts no allocation).
fn solution(elapsed: u64, polls: u32) -> captchaai_engine::Solution {
    static ONE: std::sync::LazyLock<captchaai_engine::Solution> = std::sync::LazyLock::new(|| {
        serde_json::from_value(serde_json::json!({
            "answer": {"text": "t"}, "user_agent": null, "task_id": "1", "submitted_at": T0, "solved_at": T0,
            "elapsed_ms": 0, "polls": 1, "attempts": 1, "expires_at": null,
        }))
        .expect("a solution's JSON form")
    });
    let mut solution = ONE.clone();
    (solution.solved_at, solution.elapsed_ms, solution.polls) = (T0 + elapsed, elapsed, polls);
    solution
}
