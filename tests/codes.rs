//! Every error code's class and action, checked by driving a solve: the code arrives at submit
//! and while polling, and the engine's next move must be the one the contract (§2) calls for.
//! The expectations are written out here independently of the code table (`codes()`).

mod common;

use RequestKind::{Poll, Submit, ThreadsInfo};
use captchaai_engine::{Class, Failure, RequestKind, Solve, Source, codes};
use common::*;

/// What should happen when a code arrives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Then {
    /// Fail with this class (and retry-after).
    Fail(Class, Option<u64>),
    /// Send this kind of request after waiting this long.
    Send(RequestKind, u64),
}

use Then::{Fail, Send};

const P: Class = Class::Permanent;

/// (code, at submit, while polling). Turnstile: polls every 5 s; replies arrive at +100 ms.
const EXPECTED: &[(&str, Then, Then)] = &[
    ("CAPCHA_NOT_READY", Send(Submit, 5_000), Send(Poll, 5_000)),
    ("CAPTCHA_NOT_READY", Send(Submit, 5_000), Send(Poll, 5_000)),
    ("ERROR_WRONG_USER_KEY", Fail(P, None), Fail(P, None)),
    ("ERROR_KEY_DOES_NOT_EXIST", Fail(P, None), Fail(P, None)),
    ("ERROR_ZERO_BALANCE", Send(ThreadsInfo, 0), Send(Poll, 8_000)),
    ("IP_BANNED", Fail(P, Some(300_000)), Fail(P, Some(300_000))),
    ("ERROR_PAGEURL", Fail(P, None), Fail(P, None)),
    ("ERROR_GOOGLEKEY", Fail(P, None), Fail(P, None)),
    ("ERROR_WRONG_GOOGLEKEY", Fail(P, None), Fail(P, None)),
    ("ERROR_BAD_TOKEN_OR_PAGEURL", Fail(P, None), Fail(P, None)),
    ("ERROR_BAD_PARAMETERS", Fail(P, None), Fail(P, None)),
    ("ERROR_ZERO_CAPTCHA_FILESIZE", Fail(P, None), Fail(P, None)),
    ("ERROR_TOO_BIG_CAPTCHA_FILESIZE", Fail(P, None), Fail(P, None)),
    ("ERROR_IMAGE_DIMENSIONS_TOO_LARGE", Fail(P, None), Fail(P, None)),
    ("ERROR_WRONG_FILE_EXTENSION", Fail(P, None), Fail(P, None)),
    ("ERROR_IMAGE_TYPE_NOT_SUPPORTED", Fail(P, None), Fail(P, None)),
    ("ERROR_UPLOAD", Fail(P, None), Fail(P, None)),
    ("ERROR_BAD_PROXY", Fail(P, None), Fail(P, None)),
    ("ERROR_PROXY_CONNECTION_FAILED", Send(Submit, 10_000), Send(Poll, 10_000)),
    ("ERROR_SERVER_ERROR", Send(Submit, 10_000), Send(Poll, 10_000)),
    ("ERROR_INTERNAL_SERVER_ERROR", Send(Submit, 10_000), Send(Poll, 10_000)),
    ("ERROR_CAPTCHA_UNSOLVABLE", Send(Submit, 0), Send(Submit, 0)),
    ("ERROR_WRONG_ID_FORMAT", Fail(P, None), Fail(P, None)),
    ("ERROR_WRONG_CAPTCHA_ID", Fail(P, None), Fail(P, None)),
    ("ERROR_EMPTY_ACTION", Fail(P, None), Fail(P, None)),
    ("ERROR_DOMAIN_NOT_ALLOWED", Fail(P, None), Fail(P, None)),
    ("ERROR_CAPTCHAIMAGE_BLOCKED", Fail(P, None), Fail(P, None)),
    ("ERROR_BAD_DUPLICATES", Send(Submit, 0), Send(Submit, 0)),
    ("ERROR_IP_NOT_ALLOWED", Fail(P, None), Fail(P, None)),
    ("ERROR_IP_ADDRES", Fail(P, None), Fail(P, None)),
    ("ERROR_TOKEN_EXPIRED", Fail(P, None), Fail(P, None)),
    ("ERROR_DUPLICATE_REPORT", Fail(P, None), Fail(P, None)),
    ("REPORT_NOT_RECORDED", Fail(P, None), Fail(P, None)),
    ("ERROR_NO_SLOT_AVAILABLE", Send(Submit, 8_000), Send(Poll, 5_000)),
    ("MAX_USER_TURN", Send(Submit, 10_000), Send(Poll, 10_000)),
    ("ERROR_TOO_MUCH_REQUESTS", Send(Submit, 10_000), Send(Poll, 10_000)),
    ("ERROR: 1001", Send(Submit, 10_000), Send(Poll, 10_000)),
    ("ERROR_BRAND_NEW_CODE", Fail(P, None), Fail(P, None)),
];

/// Engine codes never arrive on the wire; they are checked elsewhere.
const ENGINE_CODES: &[&str] =
    &["INVALID_TASK", "INVALID_CONFIG", "INVALID_KEY", "TRANSPORT_ERROR", "UNEXPECTED_REPLY", "DEADLINE_EXCEEDED"];

/// The engine's next move, and the failure if it failed.
fn observe(solve: &mut Solve, now: u64) -> (Then, Option<Failure>) {
    match reaction(solve, now) {
        Reaction::Sends { kind, after_ms, .. } => (Send(kind, after_ms), None),
        Reaction::Failed(failure) => (Fail(failure.class, failure.retry_after_ms), Some(failure)),
        Reaction::Solved(s) => panic!("solved unexpectedly: {s:?}"),
    }
}

fn at_submit(code: &str) -> (Then, Option<Failure>) {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, &code_body(code));
    observe(&mut solve, 100)
}

fn at_poll(code: &str) -> Then {
    let mut solve = start(&turnstile_task());
    let (poll, at) = to_first_poll(&mut solve);
    json_reply(&mut solve, at + 100, &poll, &code_body(code));
    observe(&mut solve, at + 100).0
}

#[test]
fn every_code_has_its_documented_class_and_action() {
    for (code, submit, poll) in EXPECTED {
        let (got, failure) = at_submit(code);
        assert_eq!(got, *submit, "{code} at submit");
        if let Some(failure) = failure {
            assert_eq!(failure.code, *code, "the raw code is kept");
            assert!(!failure.message.is_empty());
        }
        assert_eq!(at_poll(code), *poll, "{code} while polling");
    }
}

#[test]
fn the_table_and_this_test_cover_the_same_codes() {
    for row in codes() {
        let code = row.code();
        let listed = EXPECTED.iter().any(|(c, ..)| *c == code || (code == "ERROR: " && c.starts_with(code)));
        assert!(listed || ENGINE_CODES.contains(&code), "{code} has no expectation here");
        assert_eq!(row.source() == Source::Engine, ENGINE_CODES.contains(&code), "{code}: engine code or not");
    }
    for (code, ..) in EXPECTED {
        let known = codes().any(|row| row.code() == *code || (row.code() == "ERROR: " && code.starts_with("ERROR: ")));
        assert!(known || *code == "ERROR_BRAND_NEW_CODE", "{code} is not in the table");
    }
}

/// A reply reading an engine code, or a word that is not a code, is an unreadable reply (retried
/// after 5 s), never taken for a code.
#[test]
fn engine_codes_and_plain_words_are_not_wire_codes() {
    for body in ["INVALID_TASK", "HELLO"] {
        let (got, _) = at_submit_plain(body);
        assert_eq!(got, Send(Submit, 5_000), "{body}");
    }
}

fn at_submit_plain(body: &str) -> (Then, Option<Failure>) {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, body);
    observe(&mut solve, 100)
}

#[test]
fn unsolvable_after_the_resubmission_budget_is_the_unsolvable_outcome() {
    let mut solve = start(&turnstile_task());
    let mut now = 0;
    for attempt in 1..=2 {
        let submit = expect_send(&mut solve, now);
        json_reply(&mut solve, now + 100, &submit, &format!(r#"{{"status":1,"request":"{attempt}"}}"#));
        now = match solve.poll_output(now + 100).unwrap() {
            captchaai_engine::Output::Send(poll) => poll.at,
            other => panic!("{other:?}"),
        };
        let poll = expect_send(&mut solve, now);
        json_reply(&mut solve, now + 100, &poll, &code_body("ERROR_CAPTCHA_UNSOLVABLE"));
        now += 100;
    }
    match reaction(&mut solve, now) {
        Reaction::Failed(f) => {
            assert_eq!((f.code.as_str(), f.class), ("ERROR_CAPTCHA_UNSOLVABLE", Class::Unsolvable));
            assert_eq!(f.task_id.as_deref(), Some("2"), "the failure names the last task id");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn submit_retries_back_off_exponentially_then_give_up() {
    let config = captchaai_engine::Config { deadline_ms: Some(600_000), ..Default::default() };
    let mut solve = start_with(&turnstile_task(), &config);
    let mut now = 0;
    let mut waits = Vec::new();
    let mut submit = expect_send(&mut solve, now);
    for step in 0.. {
        assert!(step < 100, "no end after 100 submits: {waits:?}");
        json_reply(&mut solve, now, &submit, &code_body("ERROR_SERVER_ERROR"));
        match reaction(&mut solve, now) {
            Reaction::Sends { kind: Submit, after_ms, request } => {
                waits.push(after_ms);
                now += after_ms;
                submit = request;
            }
            Reaction::Failed(f) => {
                assert_eq!(
                    (f.code.as_str(), f.class, f.retry_after_ms),
                    ("ERROR_SERVER_ERROR", Class::Transient, Some(10_000))
                );
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(waits, [10_000, 20_000, 40_000, 60_000, 60_000], "10 s doubling, capped at 60 s, five retries");
}

/// Submit retries back off from the code's retry-after, doubling, capped at 60 s, and
/// docs/outcomes.md states exactly this curve (the README once said "10 s doubling" for
/// transport errors).
#[test]
fn submit_backoff_matches_the_table_and_the_docs() {
    let gaps = |fail: &dyn Fn(&mut captchaai_engine::Solve, u64, u32)| {
        let config = captchaai_engine::Config { deadline_ms: Some(600_000), ..Default::default() };
        let mut solve = start_with(&turnstile_task(), &config);
        let mut sent = Vec::new();
        let mut now = 0;
        while let captchaai_engine::Output::Send(request) = solve.poll_output(now).unwrap() {
            assert!(sent.len() < 100, "no end after 100 requests: {sent:?}");
            now = request.at;
            sent.push(now);
            fail(&mut solve, now, request.id);
        }
        sent.windows(2).map(|w| (w[1] - w[0]) / 1_000).collect::<Vec<_>>()
    };
    let transport = gaps(&|solve, now, id| {
        solve.handle_transport_error(now, id, captchaai_engine::TransportError::Connect).unwrap();
    });
    let server = gaps(&|solve, now, id| json_reply_at(solve, now, id, &code_body("ERROR_SERVER_ERROR")));
    let unreadable = gaps(&|solve, now, id| json_reply_at(solve, now, id, "<html>502</html>"));
    assert_eq!(transport, [5, 10, 20, 40, 60]);
    assert_eq!(unreadable, [5, 10, 20, 40, 60]);
    assert_eq!(server, [10, 20, 40, 60, 60]);
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/outcomes.md")).unwrap();
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let stated = "starts at the code's retry-after (5 s for transport errors and unreadable replies, 10 s for server \
                  errors), doubles and is capped at 60 s";
    assert!(doc.contains(stated), "docs/outcomes.md no longer states the backoff");
}

fn json_reply_at(solve: &mut captchaai_engine::Solve, now: u64, id: u32, body: &str) {
    solve.handle_response(now, id, 200, body.as_bytes()).unwrap();
}
