//! Drives the native engine with a virtual clock: one solve per given solve time, against a
//! fake CaptchaAI that answers at once (zero network latency), `CAPCHA_NOT_READY` until the
//! solve time has passed since the submit was sent, then the answer. Prints, per solve, the
//! `res.php` polls it sent and how long after the answer was ready the engine saw it.
//!
//! stdin:  `{"types": [{"name": .., "task": <task JSON>, "solve_ms": [..], "initial_wait_ms": null}, ..]}`
//! stdout: `{"<name>": [[polls, delay_ms], ..], ..}` in the input's order of solve times.
//! The engine's own tables decide every wait (default config: no jitter), unless
//! `initial_wait_ms` overrides the type's first wait through the engine's config.

use std::io::Read as _;

use captchaai_engine::{Config, Output, RequestKind, Solve};
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
}

/// One solve: (polls, delay from ready to seen), or a message.
fn run(task: &str, solve_ms: u64, initial_wait_ms: Option<u64>) -> Result<(u32, u64), String> {
    let config = Config { initial_wait_ms, ..Config::default() };
    let mut solve =
        Solve::from_json(task, KEY, &config, T0).map_err(|f| format!("create: {} {}", f.code, f.message))?;
    let mut now = T0;
    let mut ready_at = None;
    let mut output = solve.poll_output(now).map_err(|m| format!("{m:?}"))?;
    // Bounded: a solve ends by its deadline; 10,000 steps is far beyond any schedule.
    for _ in 0..10_000 {
        match output {
            Output::Send(request) => {
                now = now.max(request.at);
                let body = match request.kind {
                    RequestKind::Submit => {
                        ready_at = Some(now + solve_ms);
                        r#"{"status":1,"request":"73000000001"}"#.to_owned()
                    }
                    RequestKind::Poll if Some(now) >= ready_at => answer_for(task),
                    RequestKind::Poll => r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#.to_owned(),
                    other => return Err(format!("unexpected request {other:?}")),
                };
                output = solve.handle_response(now, request.id, 200, body.as_bytes()).map_err(|m| format!("{m:?}"))?;
            }
            Output::Solved(solution) => {
                let ready = ready_at.ok_or("solved before a submit")?;
                return Ok((solution.polls, solution.solved_at - ready));
            }
            Output::Failed(failure) => return Err(format!("failed: {} {}", failure.code, failure.message)),
        }
    }
    Err("no end after 10,000 steps".into())
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
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
    let input: Input = serde_json::from_str(&text).map_err(|e| format!("input: {e}"))?;
    let mut out = serde_json::Map::new();
    for t in &input.types {
        let task = t.task.to_string();
        let rows = t
            .solve_ms
            .iter()
            .map(|&ms| {
                run(&task, ms, t.initial_wait_ms)
                    .map(|(p, d)| serde_json::json!([p, d]))
                    .map_err(|e| format!("{}: {e}", t.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.insert(t.name.clone(), serde_json::Value::Array(rows));
    }
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
