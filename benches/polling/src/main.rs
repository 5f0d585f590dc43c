//! Drives the native engine with a virtual clock: one solve per given solve time, against a
//! fake CaptchaAI that answers at once (zero network latency), `CAPCHA_NOT_READY` until the
//! solve time has passed since the submit was sent, then the answer. Prints, per solve, the
//! `res.php` polls it sent and how long after the answer was ready the engine saw it.
//!
//! stdin:  `{"types": [{"name": .., "task": <task JSON>, "solve_ms": [..], "initial_wait_ms": null,
//!          "adaptive": false}, ..]}`
//! stdout: `{"<name>": [[polls, delay_ms, first_wait_ms], ..], ..}` in the input's order of
//! solve times.
//! The engine's own tables decide every wait (default config: no jitter), unless
//! `initial_wait_ms` overrides the type's first wait through the engine's config, or `adaptive`
//! runs the solves in order with one `SolveTimes` model that observes each finished solve.
//!
//! `polling-bench cost` instead prints the engine-cost numbers as JSON (wall-clock means over
//! many repetitions, native build): `observe`, a canned solve created with and without a
//! warmed model, parsing a model, and the model's text size per type.

use std::io::Read as _;
use std::time::Instant;

use captchaai_engine::{ApiKey, Config, Output, RequestKind, Solve, SolveTimes, Task};
use serde::Deserialize;

/// A placeholder key: the fake service accepts anything well formed.
const KEY: &str = "0123456789abcdef0123456789abcdef";
/// Virtual epoch of every solve.
const T0: u64 = 1_700_000_000_000;

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
    adaptive: bool,
}

/// One solve: (polls, delay from ready to seen, first wait), or a message. With a model, the
/// solve is created with it and the model observes the solution.
fn run(
    task: &str,
    solve_ms: u64,
    initial_wait_ms: Option<u64>,
    model: Option<&mut SolveTimes>,
) -> Result<(u32, u64, u64), String> {
    let config = Config { initial_wait_ms, ..Config::default() };
    let create = |f: String| format!("create: {f}");
    let parsed = Task::from_json(task).map_err(|e| create(e.to_string()))?;
    let key = ApiKey::new(KEY).map_err(|e| create(e.to_string()))?;
    let mut solve = match &model {
        Some(model) => Solve::with_solve_times(parsed, key, &config, model, T0),
        None => Solve::new(parsed, key, &config, T0),
    }
    .map_err(|e| create(e.to_string()))?;
    let (mut now, mut submitted, mut first_wait) = (T0, T0, None);
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
                return Ok((solution.polls, solution.solved_at - ready, first_wait.unwrap_or(0)));
            }
            Output::Failed(failure) => return Err(format!("failed: {} {}", failure.code, failure.message)),
        }
    }
    Err("no end after 10,000 steps".into())
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

fn main() -> Result<(), String> {
    if std::env::args().nth(1).as_deref() == Some("cost") {
        return cost();
    }
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
    let input: Input = serde_json::from_str(&text).map_err(|e| format!("input: {e}"))?;
    let mut out = serde_json::Map::new();
    for t in &input.types {
        let task = t.task.to_string();
        let kind = t.task.get("type").and_then(|v| v.as_str()).unwrap_or_default();
        let mut model = if t.adaptive { Some(SolveTimes::new(kind).map_err(|e| e.to_string())?) } else { None };
        let rows = t
            .solve_ms
            .iter()
            .map(|&ms| {
                run(&task, ms, t.initial_wait_ms, model.as_mut())
                    .map(|(p, d, w)| serde_json::json!([p, d, w]))
                    .map_err(|e| format!("{}: {e}", t.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.insert(t.name.clone(), serde_json::Value::Array(rows));
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}

/// Mean wall-clock nanoseconds of `f` over `n` runs (after `n / 10` warm-up runs).
fn mean_ns(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

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
/// "model_bytes": {type: bytes}}`. Models are warmed with 1,000 observations spread over 5-110 s.
fn cost() -> Result<(), String> {
    let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#;
    let warm = |kind: &str| -> Result<SolveTimes, String> {
        let mut model = SolveTimes::new(kind).map_err(|e| e.to_string())?;
        for i in 0..1_000u64 {
            model.observe(&solution(5_000 + (i * 7_919) % 105_000, 1 + (i % 4) as u32));
        }
        Ok(model)
    };
    let mut model = warm("turnstile")?;
    let mut i = 0u64;
    let observe_ns = mean_ns(200_000, || {
        i += 1;
        model.observe(&solution(5_000 + (i * 7_919) % 105_000, 1 + (i % 4) as u32));
    });
    let model = warm("turnstile")?;
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
        sizes.insert(t.name().to_owned(), warm(t.name())?.to_string().len().into());
    }
    let out = serde_json::json!({
        "observe_ns": observe_ns, "solve_ns": solve_ns, "solve_with_model_ns": solve_with_model_ns,
        "parse_ns": parse_ns, "model_bytes": sizes,
    });
    println!("{out}");
    Ok(())
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
