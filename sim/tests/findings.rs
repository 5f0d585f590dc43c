//! Engine bugs found by the fuzzers' and the simulation's checks, as regression tests (both
//! fixed in the engine: replies lose the key before anything reads them, and restore refuses a
//! step due at or after the deadline). The inputs are also in fuzz/regressions/.

use captchaai_engine::{Config, Output, Solve};

const KEY: &str = "fuzzKEY0123456789abcdefghijklmno";
const TASK: &str = r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#;

/// An upstream that echoes the key in `error_text` after 190 other characters: the engine clips
/// the text to 200 characters *before* redacting the key, so the first 10 characters of the key
/// reach the failure message (`...xxxxfuzzKEY012)`). Fix: redact before clipping (solve.rs
/// `on_other_reply`; the same order applies to `describe` of unreadable bodies).
#[test]
fn no_part_of_the_key_in_a_clipped_error_text() {
    let mut solve = Solve::from_json(TASK, KEY, &Config::default(), 0).expect("task");
    let Ok(Output::Send(submit)) = solve.poll_output(0) else { panic!("no submit") };
    let body = format!(r#"{{"status":0,"request":"ERROR_BAD_PARAMETERS","error_text":"{}{KEY}"}}"#, "x".repeat(190));
    let Ok(Output::Failed(failure)) = solve.handle_response(submit.at, submit.id, 200, body.as_bytes()) else {
        panic!("not failed")
    };
    assert!(!failure.message.contains(&KEY[..8]), "a key prefix is in the message: {}", failure.message);
}

/// A snapshot whose ready step is due after the deadline restores, and the restored solve asks
/// for that request (due at 500 s with a 120 s deadline) instead of failing: a host that sleeps
/// until `at` sends it after the deadline. Engine-written snapshots never hold such a state, so
/// only a corrupted or forged snapshot triggers it. Fix: `check_state` refuses `at >= deadline`,
/// or `output` fails when the step's `at` (not only `now`) is at or after the deadline.
#[test]
fn a_restored_solve_never_asks_for_a_request_after_its_deadline() {
    let solve = Solve::from_json(TASK, KEY, &Config::default(), 0).expect("task");
    let forged = solve.snapshot().replace(r#""at":0"#, r#""at":500000"#);
    let Ok(mut restored) = Solve::restore(&forged, KEY) else { return }; // refusing it is a fix too
    let deadline = restored.deadline().expect("deadline");
    if let Ok(Output::Send(request)) = restored.poll_output(0) {
        assert!(request.at < deadline, "request due at {} after the deadline {deadline}", request.at);
    }
}
