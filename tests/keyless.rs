//! Keyless solves: requests rendered without the key, which `with_key` fills at send time to the
//! exact bytes a solve with the key sends, for every captcha type and upload, every golden
//! vector's decisions, and the refusals that keep a keyless request from being sent as it is.

mod common;

use captchaai_engine::{
    ApiKey, Body, Config, Failure, HttpRequest, KEY_PLACEHOLDER, Misuse, Output, RequestKind, Solve, SolveTimes, Task,
    TransportError, WithKeyError, task_types,
};
use captchaai_vectors::{Engine, Native, Vector, replay_full};
use common::*;

fn key() -> ApiKey {
    ApiKey::new(KEY).unwrap()
}

fn image_b64(len: usize, fill: u8) -> String {
    use base64::Engine as _;
    let mut bytes = b"GIF89a\x20\x00\x20\x00".to_vec();
    bytes.resize(len, fill);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One valid task of every captcha type, and images again as a multipart upload and a synchronous
/// solve. Values
/// hold characters the form escapes (and, in one, the placeholder itself).
fn tasks() -> Vec<String> {
    let img = image_b64(180, 7);
    let cells: Vec<String> = (0..9).map(|i| image_b64(100 + i, i as u8)).collect();
    let cells = serde_json::to_string(&cells).unwrap();
    let proxy = r#""proxy":"u:p@10.0.0.1:8080","proxytype":"HTTP""#;
    vec![
        format!(r#"{{"type":"recaptcha_v2","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}?a=1&b=ü","cookies":"a:1; b=2"}}"#),
        format!(r#"{{"type":"recaptcha_v2_enterprise","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"log in"}}"#),
        format!(
            r#"{{"type":"recaptcha_v3","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"login","min_score":0.7}}"#
        ),
        format!(r#"{{"type":"recaptcha_v3_enterprise","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"login"}}"#),
        format!(
            r#"{{"type":"turnstile","sitekey":"0x4AAAAAAABkMYinukE8nzY","pageurl":"{PAGE}","data":"{KEY_PLACEHOLDER}"}}"#
        ),
        format!(r#"{{"type":"cloudflare_challenge","pageurl":"{PAGE}",{proxy}}}"#),
        format!(
            r#"{{"type":"geetest_v3","gt":"022397c99c9f646f6477822485f30404","challenge":"c1","pageurl":"{PAGE}"}}"#
        ),
        format!(r#"{{"type":"geetest_v4","captcha_id":"e392e1d7fd421dc63325744d5a2b9c73","pageurl":"{PAGE}"}}"#),
        format!(r#"{{"type":"captchafox","sitekey":"sk-fox","pageurl":"{PAGE}",{proxy}}}"#),
        format!(r#"{{"type":"friendly_captcha","sitekey":"FCMST","pageurl":"{PAGE}","version":"v2"}}"#),
        format!(r#"{{"type":"lemin","captcha_id":"CROPPED_1","div_id":"lemin-cropped","pageurl":"{PAGE}"}}"#),
        format!(r#"{{"type":"image","image":"{img}","instructions":"type the {KEY_PLACEHOLDER} & digits"}}"#),
        format!(r#"{{"type":"image","image":"{img}","upload":"multipart","instructions":"{KEY_PLACEHOLDER} ü"}}"#),
        format!(r#"{{"type":"image","image":"{img}","sync":true}}"#),
        format!(r#"{{"type":"grid","image":"{img}","instructions":"bicycles","grid_size":"4x4"}}"#),
        format!(r#"{{"type":"bls","instructions":"664","images":{cells}}}"#),
    ]
}

fn keyed(task: &str) -> Solve {
    Solve::from_json(task, KEY, &Config::default(), 0).unwrap_or_else(|f| panic!("{task}: {f}"))
}

fn keyless(task: &str) -> Solve {
    Solve::keyless_from_json(task, &Config::default(), 0).unwrap_or_else(|f| panic!("{task}: {f}"))
}

fn send(output: Output) -> HttpRequest {
    match output {
        Output::Send(request) => request,
        other => panic!("expected a request, got {other:?}"),
    }
}

/// The keyless request holds no key, and `with_key` of it is the keyed request, byte for byte.
fn assert_same_request(keyless: &HttpRequest, keyed: &HttpRequest, what: &str) {
    assert!(keyless.is_keyless() && !keyed.is_keyless(), "{what}");
    let (bytes, raw_key) = (keyless.body.as_bytes(), KEY.as_bytes());
    assert!(!bytes.windows(raw_key.len()).any(|w| w == raw_key), "{what}: the key is in a keyless body");
    assert!(bytes.windows(KEY_PLACEHOLDER.len()).any(|w| w == KEY_PLACEHOLDER.as_bytes()), "{what}");
    let filled = keyless.with_key(&key()).unwrap();
    assert_eq!(filled, *keyed, "{what}");
    assert_eq!(filled.body.as_bytes(), keyed.body.as_bytes(), "{what}: bodies differ");
    assert!(!filled.is_keyless(), "{what}");
    // Both print without the key.
    assert!(!format!("{filled:?}{keyless:?}").contains(KEY), "{what}");
}

#[test]
fn the_tasks_cover_every_type_and_a_multipart_upload() {
    let tasks = tasks();
    let types: Vec<String> = tasks
        .iter()
        .map(|t| serde_json::from_str::<serde_json::Value>(t).unwrap()["type"].as_str().unwrap().to_owned())
        .collect();
    for spec in task_types() {
        assert!(types.iter().any(|t| t == spec.name()), "no task of type {}", spec.name());
    }
    let multipart =
        tasks.iter().map(|t| send(keyed(t).poll_output(0).unwrap())).filter(|r| matches!(r.body, Body::Multipart(_)));
    assert_eq!(multipart.count(), 1);
}

#[test]
fn every_request_of_every_type_with_the_key_inserted_is_the_keyed_request() {
    for task in tasks() {
        let (mut with, mut without) = (keyed(&task), keyless(&task));
        assert!(without.is_keyless() && !with.is_keyless());
        // The submit, a busy plan's threadsinfo and the submit again, then the first poll and the
        // next: every kind of request a solve sends.
        let mut now = 0;
        let mut replies = [
            (200, code_body("ERROR_ZERO_BALANCE")),
            (200, r#"{"status":1,"threads":"5","working_threads":5}"#.to_owned()),
            (200, r#"{"status":1,"request":"7412"}"#.to_owned()),
            (200, r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#.to_owned()),
        ]
        .into_iter();
        let (mut a, mut b) = (with.poll_output(now).unwrap(), without.poll_output(now).unwrap());
        let mut kinds = Vec::new();
        while let (Output::Send(keyed_request), Output::Send(keyless_request)) = (&a, &b) {
            assert_same_request(keyless_request, keyed_request, &task);
            kinds.push(keyed_request.kind);
            now = now.max(keyed_request.at) + 50;
            let Some((status, body)) = replies.next() else { break };
            a = with.handle_response(now, keyed_request.id, status, body.as_bytes()).unwrap();
            b = without.handle_response(now, keyless_request.id, status, body.as_bytes()).unwrap();
        }
        assert_eq!(with.snapshot(), without.snapshot(), "{task}: the same state");
        if !task.contains(r#""sync":true"#) {
            let expected = [
                RequestKind::Submit,
                RequestKind::ThreadsInfo,
                RequestKind::Submit,
                RequestKind::Poll,
                RequestKind::Poll,
            ];
            assert_eq!(kinds, expected, "{task}");
        }
    }
}

#[test]
fn keyless_solves_with_a_model_send_the_keyed_requests() {
    let mut model = SolveTimes::new("turnstile").unwrap();
    for _ in 0..40 {
        model.observe(&solution(4_000, 1));
    }
    let task = Task::from_json(&turnstile_task()).unwrap();
    let mut with = Solve::with_solve_times(task.clone(), key(), &Config::default(), &model, 0).unwrap();
    let mut without = Solve::keyless_with_solve_times(task, &Config::default(), &model, 0).unwrap();
    let submit = send(without.poll_output(0).unwrap());
    assert_same_request(&submit, &send(with.poll_output(0).unwrap()), "submit");
    let accepted = br#"{"status":1,"request":"7412"}"#;
    let poll = send(without.handle_response(10, submit.id, 200, accepted).unwrap());
    assert_same_request(&poll, &send(with.handle_response(10, submit.id, 200, accepted).unwrap()), "first poll");
    assert!(poll.at < 10 + 13_000, "the model's first wait, not the table's");
}

/// The replayer's engine for keyless solves: it creates and restores them without the key, sends
/// `with_key` of each request (which must be the keyed request) and feeds replies back through
/// `ApiKey::redact`, as a host storing its history does.
struct Keyless;

fn filled(output: Result<Output, Misuse>) -> Result<Output, Misuse> {
    output.map(|output| match output {
        Output::Send(request) => {
            assert!(request.is_keyless());
            Output::Send(request.with_key(&key()).expect("a keyless request"))
        }
        terminal => terminal,
    })
}

impl Engine for Keyless {
    type Solve = Solve;

    fn create(&mut self, task_json: &str, key: &str, config: &Config, now: u64) -> Result<Solve, Failure> {
        ApiKey::new(key)?; // a bad key is refused as a keyed solve refuses it
        Solve::keyless_from_json(task_json, config, now)
    }

    fn restore(&mut self, snapshot: &str, key: &str) -> Result<Solve, String> {
        ApiKey::new(key).map_err(|e| e.to_string())?;
        Solve::restore_keyless(snapshot).map_err(|e| e.to_string())
    }

    fn snapshot(&mut self, solve: &Solve) -> String {
        solve.snapshot()
    }

    fn poll_output(&mut self, solve: &mut Solve, now: u64) -> Result<Output, Misuse> {
        filled(solve.poll_output(now))
    }

    fn handle_response(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        status: u16,
        body: &[u8],
    ) -> Result<Output, Misuse> {
        let text = String::from_utf8_lossy(body);
        let stored = key().redact(&text).into_owned();
        filled(solve.handle_response(now, id, status, stored.as_bytes()))
    }

    fn handle_transport_error(
        &mut self,
        solve: &mut Solve,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> Result<Output, Misuse> {
        filled(solve.handle_transport_error(now, id, error))
    }

    fn create_with_times(
        &mut self,
        task_json: &str,
        key: &str,
        config: &Config,
        now: u64,
        solve_times: &str,
    ) -> Result<Result<Solve, Failure>, String> {
        let model: SolveTimes = solve_times.parse().map_err(|e: captchaai_engine::SolveTimesError| e.to_string())?;
        Ok((|| -> Result<Solve, Failure> {
            ApiKey::new(key)?;
            let task = Task::from_json(task_json)?;
            Ok(Solve::keyless_with_solve_times(task, config, &model, now)?)
        })())
    }
}

#[test]
fn every_golden_vector_makes_the_same_transcript_keyless() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/vectors");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    assert!(files.len() > 50, "{} vectors", files.len());
    for file in files {
        let vector = Vector::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(replay_full(&mut Keyless, &vector), replay_full(&mut Native, &vector), "{}", file.display());
    }
}

#[test]
fn a_keyless_snapshot_continues_with_or_without_the_key() {
    let (mut with, mut without) = (keyed(&recaptcha_task()), keyless(&recaptcha_task()));
    let submit = send(without.poll_output(0).unwrap());
    let accepted = br#"{"status":1,"request":"7412"}"#;
    without.handle_response(5, submit.id, 200, accepted).unwrap();
    let keyed_submit = send(with.poll_output(0).unwrap());
    with.handle_response(5, keyed_submit.id, 200, accepted).unwrap();
    let snapshot = without.snapshot();
    assert_eq!(snapshot, with.snapshot());
    let mut keyed_again = Solve::restore(&snapshot, KEY).unwrap();
    let mut keyless_again = Solve::restore_keyless(&with.snapshot()).unwrap();
    assert!(keyless_again.is_keyless() && !keyed_again.is_keyless());
    let poll = send(keyless_again.poll_output(5).unwrap());
    assert_same_request(&poll, &send(keyed_again.poll_output(5).unwrap()), "poll after restore");
    assert_eq!(keyless_again.task_id(), Some("7412"));
}

#[test]
fn with_key_refuses_requests_that_hold_no_placeholder() {
    let mut with = keyed(&turnstile_task());
    let request = send(with.poll_output(0).unwrap());
    assert_eq!(request.with_key(&key()), Err(WithKeyError::NotKeyless));
    // Rebuilt across a boundary: only a body with the placeholder is keyless.
    let rebuild = |body: Body| {
        HttpRequest::keyless_from_parts(
            1,
            RequestKind::Submit,
            0,
            "https://ocr.captchaai.com/in.php",
            "x",
            body,
            30_000,
        )
    };
    assert_eq!(rebuild(request.body.clone()).err(), Some(WithKeyError::NotKeyless));
    assert_eq!(rebuild(Body::Form("method=turnstile&json=1".into())).err(), Some(WithKeyError::NotKeyless));
    // A keyless request, rebuilt from its parts, fills to the keyed one.
    let mut without = keyless(&turnstile_task());
    let keyless_request = send(without.poll_output(0).unwrap());
    let HttpRequest { id, kind, at, url, content_type, body, timeout_ms, .. } = keyless_request.clone();
    let rebuilt = HttpRequest::keyless_from_parts(id, kind, at, url, content_type, body, timeout_ms).unwrap();
    assert_eq!(rebuilt.with_key(&key()).unwrap(), request);
    assert_eq!(rebuilt.with_key(&key()).unwrap().with_key(&key()), Err(WithKeyError::NotKeyless));
}

#[test]
fn a_keyless_solve_validates_the_task_and_config_as_a_keyed_one() {
    let bad = [r#"{"type":"nope"}"#.to_owned(), format!(r#"{{"type":"recaptcha_v2","pageurl":"{PAGE}"}}"#)];
    for task in bad {
        let keyless = Solve::keyless_from_json(&task, &Config::default(), 0).err().unwrap();
        let keyed = Solve::from_json(&task, KEY, &Config::default(), 0).err().unwrap();
        assert_eq!(keyless, keyed, "{task}");
    }
    let config = Config { deadline_ms: Some(1), ..Config::default() };
    assert_eq!(
        Solve::keyless_from_json(&turnstile_task(), &config, 0).err(),
        Solve::from_json(&turnstile_task(), KEY, &config, 0).err()
    );
}

#[test]
fn redact_removes_the_key_from_a_reply_as_a_solve_does() {
    let reply = format!("<html>bad key {KEY} in {KEY}</html>");
    assert_eq!(key().redact(&reply), "<html>bad key <redacted> in <redacted></html>");
    assert!(matches!(key().redact("OK|1"), std::borrow::Cow::Borrowed("OK|1")));
    // A keyless solve fed the redacted reply fails exactly as a keyed solve fed the raw one.
    let (mut with, mut without) = (keyed(&turnstile_task()), keyless(&turnstile_task()));
    let (a, b) = (send(with.poll_output(0).unwrap()), send(without.poll_output(0).unwrap()));
    let raw = format!(r#"{{"status":0,"request":"ERROR_WRONG_USER_KEY","error_text":"key {KEY} is wrong"}}"#);
    let keyed_outcome = with.handle_response(1, a.id, 200, raw.as_bytes()).unwrap();
    let keyless_outcome = without.handle_response(1, b.id, 200, key().redact(&raw).as_bytes()).unwrap();
    assert_eq!(keyed_outcome, keyless_outcome);
    assert!(!format!("{keyless_outcome:?}").contains(KEY));
}
