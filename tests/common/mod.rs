//! Helpers shared by the integration tests: a test key, common tasks, and a tiny driver that
//! reads like a transcript.
#![allow(dead_code)]

use captchaai_engine::{Config, Failure, HttpRequest, Output, RequestKind, Solution, Solve};

pub const KEY: &str = "0123456789abcdef0123456789abcdef";
pub const GOOGLEKEY: &str = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-";
pub const PAGE: &str = "https://portal.example.com/export";

/// A solution of one attempt, `elapsed` ms after a submit at 0, found by poll `polls` (what a
/// `SolveTimes` model observes), read from its JSON form (`Solution` is `#[non_exhaustive]`).
pub fn solution(elapsed: u64, polls: u32) -> Solution {
    serde_json::from_value(serde_json::json!({
        "answer": {"text": "t"},
        "user_agent": null,
        "task_id": "1",
        "submitted_at": 0,
        "solved_at": elapsed,
        "elapsed_ms": elapsed,
        "polls": polls,
        "attempts": 1,
        "expires_at": null,
    }))
    .expect("a solution's JSON form")
}

/// [`solution`] of `attempts` tasks (a model observes only solves of one).
pub fn solution_of_attempts(elapsed: u64, polls: u32, attempts: u32) -> Solution {
    let mut solution = solution(elapsed, polls);
    solution.attempts = attempts;
    solution
}

/// The least time from a task's previous request to its next poll: the poll interval's floor
/// (5 s) after a poll, the first wait's floor (1 s) after a submit.
pub fn min_poll_gap(previous: RequestKind) -> u64 {
    let floor = |field| Config::limits().iter().find(|l| l.field == field).map(|l| l.min).unwrap();
    match previous {
        RequestKind::Poll => floor("poll_interval_ms"),
        _ => floor("initial_wait_ms"),
    }
}

pub fn turnstile_task() -> String {
    format!(r#"{{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"{PAGE}"}}"#)
}

pub fn recaptcha_task() -> String {
    format!(r#"{{"type":"recaptcha_v2","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}"}}"#)
}

pub fn start(task: &str) -> Solve {
    start_with(task, &Config::default())
}

pub fn start_with(task: &str, config: &Config) -> Solve {
    Solve::from_json(task, KEY, config, 0).unwrap_or_else(|f| panic!("task rejected: {f}"))
}

/// The next output must be a request due at `now` or earlier; returns it.
pub fn expect_send(solve: &mut Solve, now: u64) -> HttpRequest {
    match solve.poll_output(now).unwrap() {
        Output::Send(request) if request.at <= now => request,
        other => panic!("expected a request due at {now}, got {other:?}"),
    }
}

pub fn json_reply(solve: &mut Solve, now: u64, request: &HttpRequest, body: &str) {
    solve.handle_response(now, request.id, 200, body.as_bytes()).unwrap();
}

pub fn code_body(code: &str) -> String {
    format!(r#"{{"status":0,"request":"{code}"}}"#)
}

/// What the engine does next after the last input, seen from `now`.
#[derive(Debug, PartialEq)]
pub enum Reaction {
    /// It sends `request` (of `kind`) after waiting `after_ms`.
    Sends {
        kind: RequestKind,
        after_ms: u64,
        request: HttpRequest,
    },
    Failed(Failure),
    Solved(Solution),
}

pub fn reaction(solve: &mut Solve, now: u64) -> Reaction {
    match solve.poll_output(now).unwrap() {
        Output::Send(request) => Reaction::Sends { kind: request.kind, after_ms: request.at - now, request },
        Output::Failed(f) => Reaction::Failed(f),
        Output::Solved(s) => Reaction::Solved(s),
    }
}

/// Submits and gets a task id accepted, then sends the first poll; returns the poll and its time.
pub fn to_first_poll(solve: &mut Solve) -> (HttpRequest, u64) {
    let submit = expect_send(solve, 0);
    json_reply(solve, 100, &submit, r#"{"status":1,"request":"7412"}"#);
    let Output::Send(poll) = solve.poll_output(100).unwrap() else { panic!("expected the first poll") };
    (poll.clone(), poll.at)
}
