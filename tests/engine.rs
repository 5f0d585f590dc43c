//! Validation, host misuse, snapshots, timing rules, freshness and key hygiene.

mod common;

use captchaai_engine::{
    ApiKey, Body, Class, Config, Failure, Misuse, Output, RequestKind, RestoreError, Solve, TransportError,
};
use common::*;

// Validation ---------------------------------------------------------------------------------

#[test]
fn bad_tasks_fail_permanently_naming_the_field_with_nothing_sent() {
    let img_small = "R0lGODlhAQABAAAAACw=";
    let cases = [
        (r#"{"pageurl":"https://a.b"}"#.to_owned(), "type"),
        (r#"{"type":"hcaptcha"}"#.to_owned(), "type"),
        (r#"{"type":"nope"}"#.to_owned(), "type"),
        (format!(r#"{{"type":"recaptcha_v2","pageurl":"{PAGE}"}}"#), "sitekey"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"","pageurl":"{PAGE}"}}"#), "sitekey"),
        (r#"{"type":"recaptcha_v2","sitekey":"k","pageurl":"ftp://x"}"#.to_owned(), "pageurl"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","googlekey":"k"}}"#), "googlekey"),
        (format!(r#"{{"type":"recaptcha_v3","sitekey":"k","pageurl":"{PAGE}"}}"#), "action"),
        (format!(r#"{{"type":"recaptcha_v3","sitekey":"k","pageurl":"{PAGE}","action":"a","min_score":1.5}}"#), "min_score"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","proxy":"1.2.3.4:80"}}"#), "proxytype"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","proxy":"1.2.3.4","proxytype":"HTTP"}}"#), "proxy"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","proxy":"1.2.3.4:99999","proxytype":"HTTP"}}"#), "proxy"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","proxy":"1.2.3.4:80","proxytype":"FTP"}}"#), "proxytype"),
        (format!(r#"{{"type":"captchafox","sitekey":"k","pageurl":"{PAGE}"}}"#), "proxy"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"method":"x"}}}}"#), "extra.method"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"json":"0"}}}}"#), "extra.json"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"sitekey":"x"}}}}"#), "extra.sitekey"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":[1]}}"#), "extra"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","sitekey":"k2"}}"#), "sitekey"),
        // Reserved and typed names in any case and with PHP array syntax (a PHP backend reads
        // `key[]` as `key`), and names outside the safe set.
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"KEY":"x"}}}}"#), "extra.KEY"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"key[]":"x"}}}}"#), "extra.key[]"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"key[0]":"x"}}}}"#), "extra.key[0]"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"method[]":"x"}}}}"#), "extra.method[]"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"json[]":"0"}}}}"#), "extra.json[]"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"Method":"x"}}}}"#), "extra.Method"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"SiteKey":"x"}}}}"#), "extra.SiteKey"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"pageurl[a]":"x"}}}}"#), "extra.pageurl[a]"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","extra":{{"GoogleKey":"x"}}}}"#), "extra.GoogleKey"),
        (format!(r#"{{"type":"recaptcha_v3","sitekey":"k","pageurl":"{PAGE}","action":"a","extra":{{"Version":"v2"}}}}"#), "extra.Version"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"a b":"x"}}}}"#), "extra.a b"),
        // A field's alias is the field; `version` would make the task a v3 one at CaptchaAI.
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"useragent":"x"}}}}"#), "extra.useragent"),
        (format!(r#"{{"type":"recaptcha_v2","sitekey":"k","pageurl":"{PAGE}","extra":{{"version":"v3"}}}}"#), "extra.version"),
        (format!(r#"{{"type":"geetest_v3","gt":"g","challenge":"c","pageurl":"{PAGE}","extra":{{"Version":"4"}}}}"#), "extra.Version"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"a.b":"x"}}}}"#), "extra.a.b"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"a[b]":"x"}}}}"#), "extra.a[b]"),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"":"x"}}}}"#), "extra."),
        (format!(r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"{}":"x"}}}}"#, "a".repeat(65)), "extra.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        (format!(r#"{{"type":"image","image":"{img_small}"}}"#), "image"),
        (r#"{"type":"image","image":"not base64!"}"#.to_owned(), "image"),
        (r#"{"type":"image","image":"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODlBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWmFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6"}"#.to_owned(), "image"),
        (r#"{"type":"bls","instructions":"664","images":["a"]}"#.to_owned(), "images"),
        (r#"{"type":"grid","instructions":"x"}"#.to_owned(), "image"),
    ];
    for (task, field) in cases {
        let failure =
            Solve::from_json(&task, KEY, &Config::default(), 0).err().unwrap_or_else(|| panic!("accepted {task}"));
        assert_eq!(failure.class, Class::Permanent, "{task}");
        assert_eq!(failure.code, "INVALID_TASK", "{task}");
        assert_eq!(failure.field.as_deref(), Some(field), "{task}: {}", failure.message);
        assert!(
            failure.message.contains(field) || field == "type",
            "{task}: message {:?} names the field",
            failure.message
        );
    }
    for not_a_task in ["{", "[1]", "\"x\"", r#"{"type":"turnstile","#] {
        let failure = Solve::from_json(not_a_task, KEY, &Config::default(), 0).err().unwrap();
        assert_eq!((failure.code.as_str(), failure.field), ("INVALID_TASK", None), "{not_a_task}");
    }
}

#[test]
fn safe_extra_names_pass_through_sorted_by_name() {
    let task = format!(
        r#"{{"type":"turnstile","sitekey":"k","pageurl":"{PAGE}","extra":{{"soft_id":"7","pingback":"x","header_acao":1,"Cookie-Jar_2":true}}}}"#
    );
    let mut solve = start(&task);
    let Body::Form(body) = expect_send(&mut solve, 0).body else { panic!("a form") };
    assert!(body.ends_with("&Cookie-Jar_2=1&header_acao=1&pingback=x&soft_id=7&json=1"), "{body}");
}

#[test]
fn malformed_keys_and_configs_are_rejected_locally() {
    for key in ["", "short", "0123456789abcdef0123456789abcde!", "0123456789abcdef0123456789abcdef0"] {
        let failure = Solve::from_json(&turnstile_task(), key, &Config::default(), 0).err().unwrap();
        assert_eq!((failure.code.as_str(), failure.field.as_deref()), ("INVALID_KEY", Some("key")));
        assert!(key.len() < 8 || !failure.message.contains(key), "the message never quotes the key");
    }
    let bad_configs = [
        (Config { base_url: "ocr.captchaai.com".into(), ..Default::default() }, "base_url"),
        (Config { base_url: "https://x.com/?key=1".into(), ..Default::default() }, "base_url"),
        (Config { poll_interval_ms: Some(1_000), ..Default::default() }, "poll_interval_ms"),
        (Config { initial_wait_ms: Some(100), ..Default::default() }, "initial_wait_ms"),
        (Config { deadline_ms: Some(9_000), ..Default::default() }, "deadline_ms"),
        (Config { deadline_ms: Some(10_000), initial_wait_ms: Some(10_000), ..Default::default() }, "deadline_ms"),
        (Config { request_timeout_ms: 0, ..Default::default() }, "request_timeout_ms"),
        (Config { max_submit_retries: 11, ..Default::default() }, "max_submit_retries"),
        (Config { unsolvable_retries: 6, ..Default::default() }, "unsolvable_retries"),
        (Config { max_jitter_ms: 10_001, ..Default::default() }, "max_jitter_ms"),
    ];
    for (config, field) in bad_configs {
        let failure = Solve::from_json(&turnstile_task(), KEY, &config, 0).err().unwrap();
        assert_eq!((failure.code.as_str(), failure.field.as_deref()), ("INVALID_CONFIG", Some(field)));
        // A host checking an operator's config up front gets the same answer.
        let checked = config.check().err().map(Failure::from);
        assert_eq!(checked.map(|f| (f.code, f.field)), Some(("INVALID_CONFIG".into(), Some(field.into()))));
    }
    assert_eq!(Config::default().check(), Ok(()));
    // What depends on the type is judged per solve: a 20 s deadline suits Turnstile (first poll
    // at 10 s), not reCAPTCHA v2 (26 s).
    let short = Config { deadline_ms: Some(20_000), ..Default::default() };
    assert_eq!(short.check(), Ok(()));
    assert!(Solve::from_json(&turnstile_task(), KEY, &short, 0).is_ok());
    let recaptcha = r#"{"type":"recaptcha_v2","sitekey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-","pageurl":"https://example.com"}"#;
    let failure = Solve::from_json(recaptcha, KEY, &short, 0).err().unwrap();
    assert_eq!(failure.field.as_deref(), Some("deadline_ms"), "{}", failure.message);
    assert_eq!(
        Config::from_json(r#"{"deadline_ms":60000,"jitter_seed":7}"#).unwrap(),
        Config { deadline_ms: Some(60_000), jitter_seed: Some(7), ..Default::default() }
    );
    assert!(Config::from_json(r#"{"dead_line":1}"#).is_err(), "unknown config fields are rejected");
    let normalised =
        start_with(&turnstile_task(), &Config { base_url: "http://127.0.0.1:9/x/".into(), ..Default::default() });
    assert_eq!(&*normalised.config().base_url, "http://127.0.0.1:9/x");
}

// Host misuse --------------------------------------------------------------------------------

#[test]
fn host_misuse_is_a_typed_error_and_changes_nothing() {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 1_000);
    let before = solve.snapshot();
    assert_eq!(solve.poll_output(999), Err(Misuse::TimeWentBackwards { last: 1_000, now: 999 }));
    assert_eq!(solve.handle_response(1_100, 7, 200, b"x"), Err(Misuse::UnknownRequest { request_id: 7 }));
    assert_eq!(solve.handle_response(1_100, 0, 200, b"x"), Err(Misuse::UnknownRequest { request_id: 0 }));
    assert_eq!(
        solve.handle_transport_error(900, submit.id, TransportError::Connect),
        Err(Misuse::TimeWentBackwards { last: 1_000, now: 900 })
    );
    assert_eq!(solve.snapshot(), before, "misuse left the state alone");
    json_reply(&mut solve, 1_100, &submit, r#"{"status":1,"request":"1"}"#);
    assert_eq!(
        solve.handle_response(1_200, submit.id, 200, b"again"),
        Err(Misuse::StaleResponse { request_id: submit.id })
    );
    let Ok(Output::Send(poll)) = solve.poll_output(1_150) else { panic!("expected the first poll") };
    assert_eq!((poll.kind, poll.at), (RequestKind::Poll, 14_100), "asking early is harmless");
    let before = solve.snapshot();
    assert_eq!(
        solve.handle_response(14_099, poll.id, 200, b"CAPCHA_NOT_READY"),
        Err(Misuse::NotDue { request_id: poll.id, at: 14_100 }),
        "a reply to a request sent before it was due is refused"
    );
    assert_eq!(solve.snapshot(), before, "and changes nothing");
}

#[test]
fn the_request_stays_the_same_until_its_result_comes_back() {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    let snapshot = solve.snapshot();
    assert_eq!(expect_send(&mut solve, 50), submit, "asking again gives the same request");
    let mut restored = Solve::restore(&snapshot, KEY).unwrap();
    assert_eq!(expect_send(&mut restored, 60), submit, "a snapshot taken while it is out sends it again");
}

#[test]
fn terminal_outputs_are_sticky() {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 10, &submit, &code_body("ERROR_WRONG_USER_KEY"));
    let first = solve.poll_output(10).unwrap();
    assert!(matches!(first, Output::Failed(_)));
    assert!(solve.is_finished());
    for now in [10, 11, 1_000_000] {
        assert_eq!(solve.poll_output(now).unwrap(), first);
    }
    assert_eq!(solve.handle_response(2_000_000, submit.id, 200, b"{}"), Err(Misuse::StaleResponse { request_id: 1 }));
}

// Timing -------------------------------------------------------------------------------------

#[test]
fn a_request_the_host_timed_out_is_retried_after_the_interval() {
    let mut solve = start(&turnstile_task());
    let (poll, at) = to_first_poll(&mut solve);
    assert_eq!(poll.timeout_ms, 30_000);
    solve.handle_transport_error(at + 30_000, poll.id, TransportError::Timeout).unwrap();
    match reaction(&mut solve, at + 30_000) {
        Reaction::Sends { kind: RequestKind::Poll, after_ms, .. } => assert_eq!(after_ms, 5_000),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        solve.handle_response(at + 40_000, poll.id, 200, b"late"),
        Err(Misuse::StaleResponse { request_id: poll.id })
    );
}

#[test]
fn nothing_is_sent_at_or_after_the_deadline_and_the_end_is_bounded() {
    let config = Config { deadline_ms: Some(30_000), ..Default::default() };
    let mut solve = start_with(&recaptcha_task(), &config);
    let submit = expect_send(&mut solve, 0);
    assert_eq!(solve.deadline(), Some(30_000));
    assert_eq!(
        solve.ends_by(),
        Some(120_000 + 30_000),
        "the last-poll window (the submit plus reCAPTCHA's 120 s token lifetime) plus the default request timeout"
    );
    json_reply(&mut solve, 100, &submit, r#"{"status":1,"request":"1"}"#);
    let mut now = 100;
    let end = loop {
        match solve.poll_output(now).unwrap() {
            Output::Send(request) => {
                now = now.max(request.at);
                assert!(now < 30_000, "sent at {now}, after the deadline");
                // A slow upstream: every poll hangs until the host's timeout.
                now += request.timeout_ms;
                solve.handle_transport_error(now, request.id, TransportError::Timeout).unwrap();
            }
            Output::Failed(f) => break (now, f),
            Output::Solved(s) => panic!("{s:?}"),
        }
    };
    assert!(end.0 <= 30_000 + 30_000, "a host that never stalls: terminal by the deadline + one request timeout");
    assert_eq!((end.1.code.as_str(), end.1.class), ("DEADLINE_EXCEEDED", Class::Transient));
    assert_eq!(end.1.task_id.as_deref(), Some("1"));
    assert_eq!(end.1.message, "no answer within the 30 s deadline", "the last poll was never asked for");
}

/// `ends_by` is known from the start: one request timeout after the later of the deadline and
/// the last-poll window's end (the submit plus the type's token lifetime, where it is known).
#[test]
fn ends_by_covers_the_last_poll_window() {
    let image = format!(r#"{{"type":"image","image":"{}"}}"#, gif_base64());
    let cases = [
        (turnstile_task(), Config::default(), 120_000, 300_000 + 30_000),
        (recaptcha_task(), Config::default(), 120_000, 120_000 + 30_000),
        (recaptcha_task(), Config { deadline_ms: Some(60_000), ..Default::default() }, 60_000, 120_000 + 30_000),
        (turnstile_task(), Config { deadline_ms: Some(400_000), ..Default::default() }, 400_000, 400_000 + 30_000),
        (turnstile_task(), Config { request_timeout_ms: 5_000, ..Default::default() }, 120_000, 300_000 + 5_000),
        (image, Config::default(), 60_000, 60_000 + 30_000),
    ];
    for (task, config, deadline, ends_by) in cases {
        let solve = Solve::from_json(&task, KEY, &config, 1_000).unwrap_or_else(|f| panic!("{task}: {f}"));
        assert_eq!(solve.deadline(), Some(1_000 + deadline), "{task} {config:?}");
        assert_eq!(solve.ends_by(), Some(1_000 + ends_by), "{task} {config:?}");
    }
}

/// A 150-byte GIF, base64 (an image task's smallest valid image).
fn gif_base64() -> String {
    let mut bytes = b"GIF89a\x10\x00\x10\x00".to_vec();
    bytes.resize(150, 7);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes)
}

// The last poll -------------------------------------------------------------------------------

/// A turnstile solve (120 s deadline, 300 s tokens) submitted at 0 and accepted at 100, whose
/// host then stalls with the first poll (due at 13,100) still to send; and its snapshot then.
fn stalled_turnstile() -> (Solve, String) {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, r#"{"status":1,"request":"7412"}"#);
    assert_eq!(expect_send(&mut solve, 13_100).at, 13_100);
    let snapshot = solve.snapshot();
    (solve, snapshot)
}

fn assert_last_poll_failed(failure: &Failure) {
    assert_eq!((failure.code.as_str(), failure.class), ("DEADLINE_EXCEEDED", Class::Transient));
    assert_eq!(failure.message, "no answer within the 120 s deadline, nor a usable one from the last poll after it");
    assert_eq!(failure.task_id.as_deref(), Some("7412"));
}

#[test]
fn a_solve_resumed_past_its_deadline_sends_one_last_poll_that_can_save_the_answer() {
    let (mut solve, snapshot) = stalled_turnstile();
    let last = expect_send(&mut solve, 130_000);
    assert_eq!((last.id, last.kind, last.at), (2, RequestKind::Poll, 130_000), "the same poll, due now");
    assert_eq!(expect_send(&mut solve, 131_000), last, "asking again gives the same request");
    // A snapshot taken before the deadline, restored after it, decides the same; so does one
    // taken while the last poll is out.
    let mut restored = Solve::restore(&snapshot, KEY).unwrap();
    assert_eq!(expect_send(&mut restored, 130_000), last);
    let mut out = Solve::restore(&solve.snapshot(), KEY).unwrap();
    assert_eq!(expect_send(&mut out, 131_000), last);
    json_reply(&mut solve, 131_400, &last, r#"{"status":1,"request":"0.TOKEN"}"#);
    let Output::Solved(solution) = solve.poll_output(131_400).unwrap() else { panic!("expected the answer") };
    assert_eq!(solution.answer.as_str(), "0.TOKEN");
    assert_eq!((solution.submitted_at, solution.solved_at, solution.polls), (0, 131_400, 1));
    assert_eq!(solution.expires_at, Some(300_000), "the answer may have waited since the submit: 0 + 300 s");
    assert!(solution.is_fresh(299_999, u64::MAX) && !solution.is_fresh(300_000, u64::MAX));
}

#[test]
fn a_last_poll_without_a_usable_answer_ends_the_solve() {
    // Not ready, an unreadable reply, a garbled answer, a transport error: the deadline failure,
    // and nothing more is sent.
    let replies = ["CAPCHA_NOT_READY", "<html>502</html>", "{\"status\":1,\"request\":\"0.T\u{FFFD}\"}"];
    for reply in replies.map(Some).into_iter().chain([None]) {
        let (mut solve, _) = stalled_turnstile();
        let last = expect_send(&mut solve, 130_000);
        let output = match reply {
            Some(body) => solve.handle_response(130_300, last.id, 200, body.as_bytes()).unwrap(),
            None => solve.handle_transport_error(160_000, last.id, TransportError::Timeout).unwrap(),
        };
        let Output::Failed(failure) = output else { panic!("{reply:?}: {output:?}") };
        assert_last_poll_failed(&failure);
        assert_eq!(solve.poll_output(200_000).unwrap(), Output::Failed(failure), "sticky");
    }
    // An answer that comes back once the window has ended is not handed out.
    let (mut solve, _) = stalled_turnstile();
    let last = expect_send(&mut solve, 299_000);
    match solve.handle_response(300_000, last.id, 200, br#"{"status":1,"request":"0.T"}"#).unwrap() {
        Output::Failed(failure) => assert_last_poll_failed(&failure),
        other => panic!("a stale answer was handed out: {other:?}"),
    }
    // The last poll asked for but not sent before the window ended: nothing is sent.
    let (mut solve, _) = stalled_turnstile();
    expect_send(&mut solve, 299_000);
    let mut restored = Solve::restore(&solve.snapshot(), KEY).unwrap();
    match restored.poll_output(300_000).unwrap() {
        Output::Failed(failure) => assert_last_poll_failed(&failure),
        other => panic!("sent after the window: {other:?}"),
    }
    // A code that fails ends the solve with its own failure, as at any time.
    let (mut solve, _) = stalled_turnstile();
    let last = expect_send(&mut solve, 130_000);
    let output = solve.handle_response(130_300, last.id, 200, code_body("ERROR_WRONG_CAPTCHA_ID").as_bytes()).unwrap();
    assert!(matches!(&output, Output::Failed(f) if f.code == "ERROR_WRONG_CAPTCHA_ID"), "{output:?}");
}

#[test]
fn no_last_poll_when_no_answer_of_the_task_is_surely_still_usable() {
    // The window has ended: 300 s after the submit.
    let (mut solve, _) = stalled_turnstile();
    let Output::Failed(failure) = solve.poll_output(300_000).unwrap() else { panic!("sent after the window") };
    assert_eq!(
        (failure.code.as_str(), failure.message.as_str()),
        ("DEADLINE_EXCEEDED", "no answer within the 120 s deadline")
    );
    // reCAPTCHA tokens live 120 s, its default deadline: no window at all.
    let mut solve = start(&recaptcha_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, r#"{"status":1,"request":"7412"}"#);
    assert!(matches!(solve.poll_output(121_000).unwrap(), Output::Failed(f) if f.code == "DEADLINE_EXCEEDED"));
    // No task id: a solve waiting to submit again gets the failure it was waiting on.
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, &code_body("ERROR_SERVER_ERROR"));
    assert!(matches!(solve.poll_output(130_000).unwrap(), Output::Failed(f) if f.code == "ERROR_SERVER_ERROR"));
}

#[test]
fn a_poll_answered_at_or_after_the_deadline_is_the_last() {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, r#"{"status":1,"request":"7412"}"#);
    let mut now = 13_100;
    let poll = loop {
        let poll = expect_send(&mut solve, now);
        if poll.at + 5_000 >= 120_000 {
            break poll;
        }
        json_reply(&mut solve, poll.at, &poll, "CAPCHA_NOT_READY");
        now = poll.at + 5_000;
    };
    assert!(poll.at < 120_000);
    // Its reply comes after the deadline: it ends the solve, whatever the window.
    json_reply(&mut solve, 121_000, &poll, "CAPCHA_NOT_READY");
    let Output::Failed(failure) = solve.poll_output(130_000).unwrap() else { panic!("polled again") };
    assert_eq!(
        (failure.code.as_str(), failure.message.as_str()),
        ("DEADLINE_EXCEEDED", "no answer within the 120 s deadline")
    );
}

#[test]
fn forged_late_steps_are_refused_on_restore() {
    let (mut solve, _) = stalled_turnstile();
    expect_send(&mut solve, 130_000);
    let out = solve.snapshot();
    assert!(out.contains(r#""step":"poll","at":130000"#), "{out}");
    assert!(Solve::restore(&out, KEY).is_ok(), "the last poll out restores");
    for forged in [
        out.replace(r#""at":130000"#, r#""at":300000"#),
        out.replace(r#""step":"poll","at":130000"#, r#""step":"submit","at":130000"#),
    ] {
        assert_ne!(forged, out);
        assert!(matches!(Solve::restore(&forged, KEY), Err(RestoreError::Invalid(_))), "{forged}");
    }
}

#[test]
fn a_late_host_gets_the_pending_failure_not_a_send() {
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, &code_body("ERROR_SERVER_ERROR"));
    // The host sleeps far past the deadline before asking again.
    match solve.poll_output(500_000).unwrap() {
        Output::Failed(f) => assert_eq!(
            (f.code.as_str(), f.class, f.retry_after_ms),
            ("ERROR_SERVER_ERROR", Class::Transient, Some(10_000))
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn solutions_carry_timing_expiry_and_freshness() {
    let mut solve = Solve::from_json(&recaptcha_task(), KEY, &Config::default(), 1_000).unwrap();
    let submit = expect_send(&mut solve, 1_000);
    json_reply(&mut solve, 1_300, &submit, r#"{"status":1,"request":73846221}"#);
    assert_eq!(solve.task_id(), Some("73846221"));
    let poll = expect_send(&mut solve, 27_300);
    assert_eq!(poll.at, 27_300, "reCAPTCHA v2 waits 26 s first");
    json_reply(&mut solve, 27_500, &poll, r#"{"status":1,"request":"03AGtoken"}"#);
    let Output::Solved(solution) = solve.poll_output(27_500).unwrap() else { panic!() };
    assert_eq!(solution.answer.as_str(), "03AGtoken");
    assert_eq!((solution.submitted_at, solution.solved_at, solution.elapsed_ms), (1_000, 27_500, 26_500));
    assert_eq!((solution.polls, solution.attempts), (1, 1));
    assert_eq!(solution.expires_at, Some(147_500), "reCAPTCHA tokens live 120 s from the answer");
    assert!(solution.is_fresh(27_500 + 90_000, 90_000));
    assert!(!solution.is_fresh(27_500 + 90_001, 90_000), "older than max_token_age");
    assert!(!solution.is_fresh(147_500, 200_000), "expired");
}

// Snapshots ----------------------------------------------------------------------------------

#[test]
fn snapshots_never_hold_the_key_and_restore_continues() {
    let mut solve = start(&turnstile_task());
    let (poll, at) = to_first_poll(&mut solve);
    let snapshot = solve.snapshot();
    assert!(!snapshot.contains(KEY));
    assert!(snapshot.starts_with(r#"{"format":"captchaai-engine/solve","version":2,"#), "{snapshot}");
    assert!(snapshot.len() < 1_024, "small: {} bytes", snapshot.len());
    let mut restored = Solve::restore(&snapshot, KEY).unwrap();
    assert_eq!(restored.snapshot(), snapshot);
    json_reply(&mut restored, at + 200, &poll, r#"{"status":1,"request":"0.tok"}"#);
    assert!(
        matches!(restored.poll_output(at + 200).unwrap(), Output::Solved(_)),
        "the in-flight request survives a restore"
    );
}

/// A snapshot written by engine 0.1 (format version 1) while a poll was in flight: the poll is
/// sent again under the same id, so an upgrade loses no solve.
#[test]
fn version_1_snapshots_restore_and_resend_the_request_in_flight() {
    let v1 = r#"{"format":"captchaai-engine/solve","version":1,"task":{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"https://portal.example.com/export"},"config":{"base_url":"https://ocr.captchaai.com","request_timeout_ms":30000,"deadline_ms":null,"initial_wait_ms":null,"poll_interval_ms":null,"max_submit_retries":5,"max_poll_errors":10,"unsolvable_retries":1,"jitter_seed":null,"max_jitter_ms":1000},"state":{"now":10100,"next_id":3,"phase":{"awaiting":{"step":"poll","id":2,"sent_at":10100}},"started_at":0,"attempt":1,"submit_retries":0,"poll_errors":0,"busy_rounds":0,"polls":1,"task_id":"7412","rng":0,"pending":null}}"#;
    let mut solve = Solve::restore(v1, KEY).unwrap();
    let poll = expect_send(&mut solve, 10_500);
    assert_eq!((poll.id, poll.kind, poll.at), (2, RequestKind::Poll, 10_100));
    json_reply(&mut solve, 10_700, &poll, r#"{"status":1,"request":"0.tok"}"#);
    let Output::Solved(solution) = solve.poll_output(10_700).unwrap() else { panic!("expected the answer") };
    assert_eq!((solution.polls, solution.submitted_at), (1, 0), "the resent poll is counted once");
    let v2 = solve.snapshot();
    assert!(v2.contains(r#""version":2"#), "written back as version 2");
}

/// A snapshot kept as its two parts: the base (task and config, with any image) once, and the
/// small state after each result; restoring from the parts is restoring the whole.
#[test]
fn snapshot_parts_restore_like_the_whole() {
    let mut solve = start(&recaptcha_task());
    let base = solve.snapshot_base();
    let submit = expect_send(&mut solve, 0);
    json_reply(&mut solve, 100, &submit, r#"{"status":1,"request":"7412"}"#);
    assert_eq!(solve.snapshot_base(), base, "the base never changes during a solve");
    let state = solve.snapshot_state();
    assert!(!state.contains(KEY) && !base.contains(KEY), "no key in either part");
    assert!(!state.contains("sitekey") && state.len() < 400, "the state holds no task data: {state}");
    let from_parts = Solve::restore_parts(&base, &state, KEY).unwrap();
    assert_eq!(from_parts.snapshot(), solve.snapshot());
    assert!(matches!(Solve::restore_parts(&base[..base.len() - 1], &state, KEY), Err(RestoreError::Truncated)));
    assert!(matches!(Solve::restore_parts(&base, &state[..10], KEY), Err(RestoreError::Truncated)));
    assert!(matches!(Solve::restore_parts(&base, "{}", KEY), Err(RestoreError::Invalid(_))));
}

#[test]
fn broken_snapshots_are_typed_errors() {
    let key = || KEY;
    let snapshot = start(&turnstile_task()).snapshot();
    assert_eq!(Solve::restore(&snapshot[..snapshot.len() / 2], key()).err(), Some(RestoreError::Truncated));
    assert!(matches!(Solve::restore("not json", key()).err(), Some(RestoreError::Malformed(_))));
    assert_eq!(Solve::restore(r#"{"hello":"world"}"#, key()).err(), Some(RestoreError::Foreign));
    assert_eq!(Solve::restore("[1,2]", key()).err(), Some(RestoreError::Foreign));
    let v4 = snapshot.replace(r#""version":2"#, r#""version":4"#);
    assert_eq!(Solve::restore(&v4, key()).err(), Some(RestoreError::UnsupportedVersion(4)));
    // Version 3 is version 2 with a learned second wait, and only with one.
    let v3 = snapshot.replace(r#""version":2"#, r#""version":3"#);
    assert!(matches!(Solve::restore(&v3, key()).err(), Some(RestoreError::Invalid(_))));
    for (from, to) in [
        (r#""next_id":1"#, r#""next_id":0"#),
        (r#""attempt":1"#, r#""attempt":9"#),
        (r#""type":"turnstile""#, r#""type":"hcaptcha""#),
        (r#""now":0"#, r#""now":"zero""#),
        (r#""ready""#, r#""sleeping""#),
        (r#""base_url":"https://ocr.captchaai.com""#, r#""base_url":"nope""#),
        (r#""rng":0"#, r#""rng":0,"extra":1"#),
    ] {
        assert!(snapshot.contains(from), "{from}");
        let broken = snapshot.replace(from, to);
        assert!(matches!(Solve::restore(&broken, key()).err(), Some(RestoreError::Invalid(_))), "{to}");
    }
    // The key is taken as text and checked, as Solve::from_json does.
    match Solve::restore(&snapshot, "bad").err() {
        Some(RestoreError::Key(e)) => assert_eq!((e.code, e.field.as_deref()), ("INVALID_KEY", Some("key"))),
        other => panic!("{other:?}"),
    }
}

// Key hygiene ---------------------------------------------------------------------------------

#[test]
fn the_key_appears_only_in_request_bodies() {
    let key = ApiKey::new(KEY).unwrap();
    assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
    let mut solve = start(&turnstile_task());
    let submit = expect_send(&mut solve, 0);
    assert!(!submit.url.contains(KEY));
    assert!(String::from_utf8_lossy(submit.body.as_bytes()).contains(KEY));
    let debug = format!("{submit:?}");
    assert!(!debug.contains(KEY) && debug.contains("key=<redacted>"), "{debug}");
    // A server that echoes the key into an error text does not get it into a message.
    let echo = format!(r#"{{"status":0,"request":"ERROR_BAD_PARAMETERS","error_text":"key {KEY} rejected"}}"#);
    json_reply(&mut solve, 10, &submit, &echo);
    let Output::Failed(failure) = solve.poll_output(10).unwrap() else { panic!() };
    assert!(!failure.message.contains(KEY) && failure.message.contains("<redacted>"), "{}", failure.message);
    assert!(!format!("{failure:?}").contains(KEY));
    assert!(!solve.snapshot().contains(KEY));
}
