//! Account calls (threadsinfo, getbalance) as pure builders and parsers, and the thread gate.

mod common;

use captchaai_engine::account::{self, Admission, ThreadGate, UnknownTicket};
use captchaai_engine::{ApiKey, Body, Class, Config, RequestKind};
use common::KEY;

#[test]
fn threadsinfo_and_getbalance_requests_post_the_key_in_the_body() {
    let key = ApiKey::new(KEY).unwrap();
    let config = Config { base_url: "http://127.0.0.1:8099/".into(), ..Default::default() };
    let threads = account::threads_info_request(&key, &config).unwrap();
    assert_eq!(
        (threads.kind, threads.at, &*threads.url),
        (RequestKind::ThreadsInfo, 0, "http://127.0.0.1:8099/res.php")
    );
    assert!(threads.body == Body::Form(format!("key={KEY}&action=threadsinfo&json=1").into()));
    let balance = account::balance_request(&key, &Config::default()).unwrap();
    assert!(balance.body == Body::Form(format!("key={KEY}&action=getbalance&json=1").into()));
    assert_eq!(&*balance.url, "https://ocr.captchaai.com/res.php");
    let bad = Config { base_url: "nope".into(), ..Default::default() };
    assert_eq!(account::threads_info_request(&key, &bad).unwrap_err().field.as_deref(), Some("base_url"));
}

#[test]
fn threadsinfo_replies_parse_with_numbers_or_strings() {
    for body in [r#"{"threads":"5","working_threads":2}"#, r#"{"status":1,"threads":5,"working_threads":"2"}"#] {
        let info = account::parse_threads_info(200, body.as_bytes()).unwrap();
        assert_eq!((info.threads, info.working_threads), (5, 2));
        assert_eq!(info.free(), 3);
    }
    let banned = account::parse_threads_info(200, b"IP_BANNED").unwrap_err();
    assert_eq!(
        (banned.code.as_str(), banned.class, banned.retry_after_ms),
        ("IP_BANNED", Class::Permanent, Some(300_000))
    );
    let bad_key =
        account::parse_threads_info(200, br#"{"status":0,"request":"ERROR_KEY_DOES_NOT_EXIST"}"#).unwrap_err();
    assert_eq!((bad_key.code.as_str(), bad_key.class), ("ERROR_KEY_DOES_NOT_EXIST", Class::Permanent));
    let html = account::parse_threads_info(502, b"<html><title>502</title></html>").unwrap_err();
    assert_eq!((html.code.as_str(), html.class), ("UNEXPECTED_REPLY", Class::Transient));
}

#[test]
fn balance_replies_parse_as_json_or_bare_decimals() {
    assert_eq!(account::parse_balance(200, br#"{"status":1,"request":"12.75"}"#), Ok(12.75));
    assert_eq!(account::parse_balance(200, br#"{"status":1,"request":3.5}"#), Ok(3.5));
    assert_eq!(account::parse_balance(200, b" 1.234\n"), Ok(1.234));
    assert_eq!(account::parse_balance(200, br#"{"status":1,"request":"lots"}"#).unwrap_err().code, "UNEXPECTED_REPLY");
    assert_eq!(account::parse_balance(200, b"ERROR_WRONG_USER_KEY").unwrap_err().code, "ERROR_WRONG_USER_KEY");
}

/// An account reply the engine cannot read is quoted in the failure (a proxy's error page, say),
/// but one that echoes the request never puts the key there: these parsers are not given the key,
/// so every run of 32 or more letters and digits (a key's shape) is left out of the quote.
#[test]
fn an_account_reply_echoing_the_request_never_puts_the_key_in_the_failure() {
    let echoes = [
        format!("key={KEY}&action=threadsinfo&json=1"),
        format!("<html><title>bad request key={KEY}</title></html>"),
        format!("{}{KEY}", "x".repeat(45)), // the key across the quote's 60-character cut
        format!("é{KEY}ü"),
        format!("{{\"status\":0,\"request\":\"{KEY}\"}}"),
    ];
    for body in &echoes {
        for failure in [
            account::parse_threads_info(502, body.as_bytes()).unwrap_err(),
            account::parse_balance(502, body.as_bytes()).unwrap_err(),
            account::parse_threads_info(200, body.as_bytes()).unwrap_err(),
            account::parse_balance(200, body.as_bytes()).unwrap_err(),
        ] {
            for part in KEY.as_bytes().windows(8) {
                let part = std::str::from_utf8(part).unwrap();
                assert!(!failure.message.contains(part), "{body}: {}", failure.message);
            }
        }
    }
    // What is not key-shaped is still quoted.
    let page = account::parse_threads_info(502, b"<html><title>Bad Gateway</title></html>").unwrap_err();
    assert!(page.message.contains("Bad Gateway"), "{}", page.message);
}

#[test]
fn the_thread_gate_admits_up_to_the_plan_minus_the_reserve() {
    let mut gate = ThreadGate::new(5, 1).unwrap();
    assert_eq!(gate.capacity(), 4);
    let admitted: Vec<_> = (0..4).map(|_| gate.enter()).collect();
    assert!(admitted.iter().all(|(_, a)| *a == Admission::Admitted));
    let (fifth, a5) = gate.enter();
    let (sixth, a6) = gate.enter();
    assert_eq!((a5, a6), (Admission::Queued { position: 0 }, Admission::Queued { position: 1 }));
    assert_eq!((gate.running(), gate.queued()), (4, 2));
    assert_eq!(gate.leave(admitted[0].0), Ok(vec![fifth]), "a finished solve admits the next in line");
    assert_eq!(gate.admission(sixth), Ok(Admission::Queued { position: 0 }));
    assert_eq!(gate.leave(sixth), Ok(vec![]), "a queued solve can withdraw");
    assert_eq!(gate.leave(sixth), Err(UnknownTicket(sixth)));
    let (seventh, _) = gate.enter();
    assert_eq!(gate.set_plan(6).unwrap(), vec![seventh], "a bigger plan admits waiting solves");
    assert_eq!(gate.set_plan(3).unwrap(), Vec::<u64>::new(), "a smaller plan never stops running solves");
    assert_eq!(gate.running(), 5);
    assert!(gate.set_plan(1).is_err(), "the reserve must leave a thread");
    assert_eq!(ThreadGate::new(2, 2).unwrap_err().field.as_deref(), Some("reserve"));
}

#[test]
fn a_new_arrival_never_jumps_the_queue() {
    let mut gate = ThreadGate::new(1, 0).unwrap();
    let (first, _) = gate.enter();
    let (second, _) = gate.enter();
    assert_eq!(gate.leave(first), Ok(vec![second]));
    let (third, admission) = gate.enter();
    assert_eq!(admission, Admission::Queued { position: 0 });
    assert_eq!(gate.leave(second), Ok(vec![third]));
}
