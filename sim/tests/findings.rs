//! Engine bugs found by the fuzzers' and the simulation's checks, as regression tests (both
//! fixed in the engine: replies lose the key before anything reads them, and restore refuses a
//! step due at or after the deadline). The inputs are also in fuzz/regressions/.

use captchaai_engine::{Config, Output, RestoreError, Solve};

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
    assert!(failure.message.contains(&"x".repeat(190)), "the error text is quoted: {}", failure.message);
    assert!(!failure.message.contains(&KEY[..8]), "a key prefix is in the message: {}", failure.message);
}

/// A snapshot whose ready step is due after the deadline (500 s with a 120 s deadline) used to
/// restore, and the restored solve asked for that request instead of failing: a host that sleeps
/// until `at` sent it after the deadline. Engine-written snapshots never hold such a state, so
/// only a corrupted or forged snapshot triggers it. The fix: restore refuses a step due at or
/// after the deadline, while the same snapshot with a step due in time still restores.
#[test]
fn a_restored_solve_never_asks_for_a_request_after_its_deadline() {
    let solve = Solve::from_json(TASK, KEY, &Config::default(), 0).expect("task");
    let snapshot = solve.snapshot();
    let due = |at: u64| snapshot.replace(r#""at":0"#, &format!(r#""at":{at}"#));
    assert_ne!(due(500_000), snapshot, "the forgery changes the step's due time");
    match Solve::restore(&due(500_000), KEY) {
        Err(RestoreError::Invalid(why)) => assert!(why.contains("deadline"), "{why}"),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(mut restored) => {
            let deadline = restored.deadline().expect("deadline");
            let output = restored.poll_output(0).expect("poll_output");
            assert!(
                !matches!(&output, Output::Send(request) if request.at >= deadline),
                "asked for a request due after the deadline {deadline}: {output:?}"
            );
        }
    }
    let mut in_time = Solve::restore(&due(119_999), KEY).expect("a step due before the deadline restores");
    assert!(matches!(in_time.poll_output(0), Ok(Output::Send(request)) if request.at == 119_999));
}
