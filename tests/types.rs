//! The submit form of every captcha type, written out by hand from the API contract (§1.1), and
//! the registry rows' timings and answer handling.

mod common;

use captchaai_engine::{AnswerShape, Body, Config, FieldKind, Output, Solve, TaskType, task_types};
use common::*;

/// Decodes a form body into its pairs, checking the key comes first.
fn form_pairs(body: &Body) -> Vec<(String, String)> {
    let Body::Form(text) = body else { panic!("expected a form body") };
    let pairs: Vec<(String, String)> = form_urlencoded::parse(text.as_bytes()).into_owned().collect();
    assert_eq!(pairs[0], ("key".to_owned(), KEY.to_owned()), "the key goes first, in the body");
    pairs[1..].to_vec()
}

fn submit_pairs(task: &str) -> (String, Vec<(String, String)>) {
    let mut solve = Solve::from_json(task, KEY, &Config::default(), 0).unwrap_or_else(|f| panic!("{task}: {f}"));
    let request = expect_send(&mut solve, 0);
    assert_eq!(request.content_type, "application/x-www-form-urlencoded");
    (request.url.to_string(), form_pairs(&request.body))
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn image_b64() -> String {
    // A GIF header followed by padding: a valid-looking 120-byte image.
    use base64::Engine as _;
    let mut bytes = b"GIF89a\x10\x00\x10\x00".to_vec();
    bytes.resize(120, 0);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn every_type_sends_its_documented_form() {
    let img = image_b64();
    let cell = |i: usize| {
        use base64::Engine as _;
        let mut bytes = b"GIF89a\x20\x00\x20\x00".to_vec();
        bytes.resize(100 + i, i as u8);
        base64::engine::general_purpose::STANDARD.encode(bytes)
    };
    let cells: Vec<String> = (0..9).map(cell).collect();
    let cells_json = serde_json::to_string(&cells).unwrap();
    let uri = |i: usize| format!("data:image/gif;base64,{}", cells[i]);
    let in_php = "https://ocr.captchaai.com/in.php";
    // (task JSON, endpoint, the form after the key; empty: the task must be rejected)
    type Case<'a> = (String, &'a str, Vec<(String, String)>);
    let cases: Vec<Case> = vec![
        (
            format!(
                r#"{{"type":"recaptcha_v2","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","invisible":true,"data_s":"ds","cookies":"a:1;b:2","user_agent":"UA/1","proxy":"u:p@10.0.0.1:8080","proxytype":"socks5"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "userrecaptcha"),
                ("googlekey", GOOGLEKEY),
                ("pageurl", PAGE),
                ("invisible", "1"),
                ("data-s", "ds"),
                ("cookies", "a:1;b:2"),
                ("userAgent", "UA/1"),
                ("proxy", "u:p@10.0.0.1:8080"),
                ("proxytype", "SOCKS5"),
                ("json", "1"),
            ]),
        ),
        (
            format!(r#"{{"type":"recaptcha_v2","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","invisible":false}}"#),
            in_php,
            pairs(&[("method", "userrecaptcha"), ("googlekey", GOOGLEKEY), ("pageurl", PAGE), ("json", "1")]),
        ),
        (
            format!(
                r#"{{"type":"recaptcha_v2_enterprise","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"login"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "userrecaptcha"),
                ("googlekey", GOOGLEKEY),
                ("pageurl", PAGE),
                ("action", "login"),
                ("enterprise", "1"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"recaptcha_v3","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"verify","min_score":0.3}}"#
            ),
            in_php,
            pairs(&[
                ("method", "userrecaptcha"),
                ("googlekey", GOOGLEKEY),
                ("pageurl", PAGE),
                ("action", "verify"),
                ("min_score", "0.3"),
                ("version", "v3"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"recaptcha_v3_enterprise","sitekey":"{GOOGLEKEY}","pageurl":"{PAGE}","action":"a","min_score":"0.25"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "userrecaptcha"),
                ("googlekey", GOOGLEKEY),
                ("pageurl", PAGE),
                ("action", "a"),
                ("min_score", "0.25"),
                ("version", "v3"),
                ("enterprise", "1"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"turnstile","sitekey":"0x4AAA","pageurl":"{PAGE}","action":"login","data":"cd","extra":{{"pagedata":"x"}}}}"#
            ),
            in_php,
            vec![],
        ),
        (
            format!(
                r#"{{"type":"turnstile","sitekey":"0x4AAA","pageurl":"{PAGE}","action":"login","data":"cd","extra":{{"soft_id":7}}}}"#
            ),
            in_php,
            pairs(&[
                ("method", "turnstile"),
                ("sitekey", "0x4AAA"),
                ("pageurl", PAGE),
                ("action", "login"),
                ("data", "cd"),
                ("soft_id", "7"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"cloudflare_challenge","pageurl":"{PAGE}","proxy":"1.2.3.4:3128","proxytype":"HTTP","user_agent":"UA/2"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "cloudflare_challenge"),
                ("pageurl", PAGE),
                ("proxy", "1.2.3.4:3128"),
                ("proxytype", "HTTP"),
                ("userAgent", "UA/2"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"geetest_v3","gt":"g1","challenge":"c1","pageurl":"{PAGE}","api_server":"api.geetest.com"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "geetest"),
                ("gt", "g1"),
                ("challenge", "c1"),
                ("pageurl", PAGE),
                ("api_server", "api.geetest.com"),
                ("json", "1"),
            ]),
        ),
        (
            format!(r#"{{"type":"geetest_v4","captcha_id":"cid","pageurl":"{PAGE}"}}"#),
            in_php,
            pairs(&[("method", "geetest"), ("gt", "cid"), ("pageurl", PAGE), ("version", "4"), ("json", "1")]),
        ),
        (
            format!(
                r#"{{"type":"captchafox","sitekey":"sk","pageurl":"{PAGE}","proxy":"[::1]:9000","proxytype":"HTTPS"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "captchafox"),
                ("sitekey", "sk"),
                ("pageurl", PAGE),
                ("proxy", "[::1]:9000"),
                ("proxytype", "HTTPS"),
                ("json", "1"),
            ]),
        ),
        (
            format!(r#"{{"type":"friendly_captcha","sitekey":"FC","pageurl":"{PAGE}","version":"V1"}}"#),
            in_php,
            pairs(&[
                ("method", "friendly_captcha"),
                ("sitekey", "FC"),
                ("pageurl", PAGE),
                ("version", "v1"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"lemin","captcha_id":"CROPPED_1","div_id":"lemin-div","pageurl":"{PAGE}","api_server":"api.leminnow.com"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "lemin"),
                ("captcha_id", "CROPPED_1"),
                ("div_id", "lemin-div"),
                ("pageurl", PAGE),
                ("apiServer", "api.leminnow.com"),
                ("json", "1"),
            ]),
        ),
        (
            format!(
                r#"{{"type":"image","image":"data:image/gif;base64,{img}","phrase":1,"case_sensitive":true,"numeric":"2","min_len":3,"max_len":5,"calc":false,"language":1,"lang":"en","instructions":"digits"}}"#
            ),
            in_php,
            pairs(&[
                ("method", "base64"),
                ("body", &img),
                ("phrase", "1"),
                ("regsense", "1"),
                ("numeric", "2"),
                ("min_len", "3"),
                ("max_len", "5"),
                ("language", "1"),
                ("lang", "en"),
                ("textinstructions", "digits"),
                ("json", "1"),
            ]),
        ),
        (
            format!(r#"{{"type":"image","image":"{img}","sync":true}}"#),
            "https://ocr.captchaai.com/solve.php",
            pairs(&[("method", "base64"), ("body", &img), ("json", "1")]),
        ),
        (
            format!(r#"{{"type":"grid","image":"{img}","instructions":"buses"}}"#),
            in_php,
            pairs(&[
                ("method", "base64"),
                ("body", &img),
                ("instructions", "buses"),
                ("grid_size", "3x3"),
                ("img_type", "recaptcha"),
                ("json", "1"),
            ]),
        ),
        (format!(r#"{{"type":"bls","instructions":664,"images":{cells_json}}}"#), in_php, {
            let mut p = vec![("method".to_owned(), "bls".to_owned()), ("instructions".to_owned(), "664".to_owned())];
            for i in 0..9 {
                p.push((format!("image_base64_{}", i + 1), uri(i)));
            }
            p.push(("json".to_owned(), "1".to_owned()));
            p
        }),
    ];
    for (task, url, expected) in cases {
        if expected.is_empty() {
            // `pagedata` is a typed turnstile field, so extra may not set it.
            let failure = Solve::from_json(&task, KEY, &Config::default(), 0).err().expect("extra collision rejected");
            assert_eq!(failure.field.as_deref(), Some("extra.pagedata"));
            continue;
        }
        let (got_url, got) = submit_pairs(&task);
        assert_eq!(got_url, url, "{task}");
        assert_eq!(got, expected, "{task}");
    }
}

#[test]
fn multipart_upload_carries_the_key_fields_and_the_file() {
    let task = format!(r#"{{"type":"image","image":"{}","upload":"multipart","numeric":1}}"#, image_b64());
    let mut solve = start(&task);
    let request = expect_send(&mut solve, 0);
    let Body::Multipart(bytes) = &request.body else { panic!("expected multipart") };
    let boundary = request.content_type.strip_prefix("multipart/form-data; boundary=").expect("boundary");
    let text = String::from_utf8_lossy(bytes);
    assert!(
        text.starts_with(&format!("--{boundary}\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n{KEY}\r\n"))
    );
    for part in ["name=\"method\"\r\n\r\npost\r\n", "name=\"numeric\"\r\n\r\n1\r\n", "name=\"json\"\r\n\r\n1\r\n"] {
        assert!(text.contains(part), "missing {part:?}");
    }
    assert!(text.contains("name=\"file\"; filename=\"captcha.gif\"\r\nContent-Type: image/gif\r\n\r\nGIF89a"));
    assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    assert_eq!(text.matches(&format!("--{boundary}")).count(), 6, "five parts and the closing boundary");
    assert!(!format!("{request:?}").contains(KEY), "Debug hides the key");
}

#[test]
fn registry_rows_hold_the_documented_timings_and_answers() {
    let row = |name| task_types().find(|t| t.name() == name).unwrap();
    for name in ["recaptcha_v2", "recaptcha_v2_enterprise"] {
        assert_eq!((row(name).first_wait_ms(), row(name).token_ttl_ms()), (26_000, Some(120_000)));
    }
    for name in ["recaptcha_v3", "recaptcha_v3_enterprise"] {
        assert_eq!((row(name).first_wait_ms(), row(name).token_ttl_ms()), (10_000, Some(120_000)));
    }
    assert_eq!(row("turnstile").token_ttl_ms(), Some(300_000));
    assert_eq!(row("cloudflare_challenge").deadline_ms(), 300_000);
    for name in ["cloudflare_challenge", "captchafox"] {
        let proxy = |field| row(name).field(field).is_some_and(|f| f.required());
        assert!(proxy("proxy") && proxy("proxytype"), "{name} requires a proxy");
    }
    assert_eq!(row("grid").answer(), AnswerShape::Cells);
    assert_eq!(row("bls").answer(), AnswerShape::Cells);
    assert_eq!(row("lemin").answer(), AnswerShape::Object(&["answer", "challenge_uuid"]));
    for spec in task_types() {
        assert!(spec.poll_interval_ms() >= min_poll_gap(captchaai_engine::RequestKind::Poll), "{}", spec.name());
        assert!(spec.first_wait_ms() >= min_poll_gap(captchaai_engine::RequestKind::Submit), "{}", spec.name());
        assert!(spec.deadline_ms() > spec.first_wait_ms(), "{}", spec.name());
        assert!(spec.answer_from().eq(["result", "request"]), "{}: `result` before `request`", spec.name());
    }
    let names: Vec<&str> = task_types().map(TaskType::name).collect();
    assert_eq!(names.len(), 14, "{names:?}");
}

#[test]
fn structured_answers_are_normalised_to_compact_json() {
    let solve_with = |task: &str, answer: &str| {
        let mut solve = start(task);
        let (poll, at) = to_first_poll(&mut solve);
        json_reply(&mut solve, at + 100, &poll, answer);
        match solve.poll_output(at + 100).unwrap() {
            Output::Solved(s) => s.answer,
            other => panic!("{other:?}"),
        }
    };
    let grid = format!(r#"{{"type":"grid","image":"{}","instructions":"cars"}}"#, image_b64());
    for (reply, expected) in [
        (r#"{"status":1,"request":"[1, 4, 7]"}"#, "[1,4,7]"),
        (r#"{"status":1,"request":[1,4,7]}"#, "[1,4,7]"),
        (r#"{"status":1,"request":"click:1/4/7"}"#, "[1,4,7]"),
        (r#"{"status":1,"request":"1,4,7"}"#, "[1,4,7]"),
    ] {
        assert_eq!(solve_with(&grid, reply), captchaai_engine::Answer::Json(expected.into()), "{reply}");
    }
    let unreadable = solve_with(&grid, r#"{"status":1,"request":"no cells"}"#);
    assert_eq!(unreadable, captchaai_engine::Answer::Text("no cells".into()), "kept as text, not lost");
    let geetest = format!(r#"{{"type":"geetest_v3","gt":"g","challenge":"c","pageurl":"{PAGE}"}}"#);
    let plain = solve_with(&geetest, r#"{"status":1,"request":"challenge:c1,validate:v1,seccode:s1|jordan"}"#);
    assert_eq!(plain.as_json().unwrap().get("seccode").and_then(|v| v.as_str()), Some("s1|jordan"));
    let object = solve_with(&geetest, r#"{"status":1,"request":{"challenge":"c","validate":"v","seccode":"s"}}"#);
    assert_eq!(object.as_str(), r#"{"challenge":"c","seccode":"s","validate":"v"}"#, "compact, keys sorted");
}

#[test]
fn any_json_object_or_array_answer_of_a_structured_type_is_json() {
    let solve_with = |task: &str, answer: &str| {
        let mut solve = start(task);
        let (poll, at) = to_first_poll(&mut solve);
        json_reply(&mut solve, at + 100, &poll, answer);
        match solve.poll_output(at + 100).unwrap() {
            Output::Solved(s) => s.answer,
            other => panic!("{other:?}"),
        }
    };
    let json = |text: &str| captchaai_engine::Answer::Json(text.into());
    let geetest_v3 = format!(r#"{{"type":"geetest_v3","gt":"g","challenge":"c","pageurl":"{PAGE}"}}"#);
    let geetest_v4 = format!(r#"{{"type":"geetest_v4","captcha_id":"c","pageurl":"{PAGE}"}}"#);
    let lemin = format!(r#"{{"type":"lemin","captcha_id":"c","div_id":"d","pageurl":"{PAGE}"}}"#);
    let grid = format!(r#"{{"type":"grid","image":"{}","instructions":"cars"}}"#, image_b64());
    // The 2captcha-compatible GeeTest v3 form, as an object and as JSON text.
    let compatible = r#"{"geetest_challenge":"c","geetest_seccode":"s","geetest_validate":"v"}"#;
    assert_eq!(solve_with(&geetest_v3, &format!(r#"{{"status":1,"request":{compatible}}}"#)), json(compatible));
    let as_text = serde_json::to_string(compatible).unwrap();
    assert_eq!(solve_with(&geetest_v3, &format!(r#"{{"status":1,"request":{as_text}}}"#)), json(compatible));
    let spaced = r#"{"status":1,"request":"{ \"geetest_challenge\": \"c\", \"geetest_validate\": \"v\" }"}"#;
    assert_eq!(solve_with(&geetest_v3, spaced), json(r#"{"geetest_challenge":"c","geetest_validate":"v"}"#));
    // Other keys, arrays, for every structured type.
    for task in [&geetest_v3, &geetest_v4, &lemin, &grid] {
        assert_eq!(solve_with(task, r#"{"status":1,"request":{"x":1,"a":[2]}}"#), json(r#"{"a":[2],"x":1}"#), "{task}");
        assert_eq!(solve_with(task, r#"{"status":1,"request":["a",{"b":1}]}"#), json(r#"["a",{"b":1}]"#), "{task}");
        assert_eq!(solve_with(task, r#"{"status":1,"request":"[\"a\"]"}"#), json(r#"["a"]"#), "{task}");
    }
    assert_eq!(solve_with(&lemin, r#"{"status":1,"request":{"answer":"a"}}"#), json(r#"{"answer":"a"}"#));
    // Text that is not JSON stays text.
    assert_eq!(solve_with(&geetest_v3, r#"{"status":1,"request":"validate:v"}"#).as_json(), None);
}

#[test]
fn text_fields_refuse_every_control_character_and_count_characters_not_bytes() {
    let task = |sitekey: &str| {
        let json =
            serde_json::json!({"type": "turnstile", "sitekey": sitekey, "pageurl": "https://portal.example.com/"});
        captchaai_engine::Task::from_json(&json.to_string())
    };
    for control in ['\u{0}', '\u{1f}', '\u{7f}', '\u{80}', '\u{85}', '\u{9f}'] {
        let error = task(&format!("0x4AAA{control}B")).unwrap_err();
        assert!(error.to_string().contains("control characters"), "{control:?}: {error}");
    }
    // Neighbours of the C1 range share its lead byte (0xC2) and are text.
    for text in ["0x4AAA\u{a0}B", "0x4AAA\u{bf}é", "0x4AAA🙂"] {
        assert!(task(text).is_ok(), "{text:?}");
    }
    let turnstile = task_types().find(|t| t.name() == "turnstile").unwrap();
    let limit = turnstile.field("sitekey").map(|f| match f.kind() {
        FieldKind::Text { max_chars } => max_chars,
        _ => unreachable!(),
    });
    let max = limit.unwrap();
    assert!(task(&"é".repeat(max)).is_ok(), "{max} two-byte characters fit");
    assert!(task(&"é".repeat(max + 1)).unwrap_err().to_string().contains("longer than"));
}

/// Form names are written without escaping (the writer's contract): every name the registry
/// sends is letters, digits, `_` and `-`, as `extra` names must be.
#[test]
fn every_registry_parameter_name_needs_no_escaping() {
    let plain =
        |name: &str| !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    for spec in task_types() {
        assert!(plain(spec.method()), "{}: method {}", spec.name(), spec.method());
        for param in spec.fields().filter_map(|f| f.param()) {
            assert!(plain(param), "{}: {param}", spec.name());
        }
        for (name, _) in spec.fixed_params() {
            assert!(plain(name), "{}: {name}", spec.name());
        }
    }
}

proptest::proptest! {
    /// Whatever text a value holds (any Unicode, spaces, `%`, `&`, `=`, `+`), the form is plain
    /// ASCII and decodes back to exactly that text.
    #[test]
    fn any_text_value_survives_the_form_encoding(
        value in "[^\\p{Cc}]{0,80}",
        name in "[A-Za-z0-9_-]{1,20}",
    ) {
        let mut extra = serde_json::Map::new();
        extra.insert(format!("x{name}"), value.clone().into());
        let action = format!("a{value}");
        let task = serde_json::json!({"type": "turnstile", "sitekey": "0x4AAA", "pageurl": PAGE, "action": action, "extra": extra});
        let mut solve = Solve::from_json(&task.to_string(), KEY, &Config::default(), 0).unwrap();
        let request = expect_send(&mut solve, 0);
        let wire = |b: &u8| b.is_ascii_alphanumeric() || b"-._*%+&=".contains(b);
        proptest::prop_assert!(request.body.as_bytes().iter().all(wire), "unescaped bytes in {:?}", request.body.as_bytes());
        let pairs = form_pairs(&request.body);
        let extra_name = format!("x{name}");
        proptest::prop_assert!(pairs.contains(&("action".to_owned(), action)), "action in {:?}", pairs);
        proptest::prop_assert!(pairs.contains(&(extra_name, value)), "extra in {:?}", pairs);
    }
}
