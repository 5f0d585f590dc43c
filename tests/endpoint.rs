//! The endpoint (`captchaai_engine::endpoint`) against the rest of the engine, for every type:
//!
//! - reading the `in.php` request the engine builds for any valid task gives back that task, and
//!   the engine builds the same request again from it (form and multipart bodies);
//! - rendering a reply, then reading it with the engine's own reply parsers, gives back what was
//!   rendered (answers, user agents, task ids, failures' client codes, threads, balances);
//! - any parameters at all give a request or a refusal, never a panic, and no refusal holds the
//!   key outside its `key` field.

use captchaai_engine::account::{self, ThreadsInfo};
use captchaai_engine::endpoint::{self, Path, ReplyFormat, Request, SolveState};
use captchaai_engine::{
    Answer, AnswerShape, ApiKey, Body, Class, Config, Failure, FieldKind, HttpRequest, ImageLimits, Output, Solution,
    Solve, Task, TaskType, codes, task_types,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEY: &str = "0123456789abcdef0123456789ABCDEF";

/// A valid image of `len` bytes (at least 100), of the format `format` (0 png, 1 gif, 2 jpg),
/// whose header says `side` px per side.
fn image(format: u8, side: u16, len: usize, fill: u8) -> Vec<u8> {
    let mut bytes = match format {
        0 => {
            let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
            b.extend_from_slice(&u32::from(side).to_be_bytes());
            b.extend_from_slice(&u32::from(side).to_be_bytes());
            b
        }
        1 => {
            let mut b = b"GIF89a".to_vec();
            b.extend_from_slice(&side.to_le_bytes());
            b.extend_from_slice(&side.to_le_bytes());
            b
        }
        _ => vec![0xFF, 0xD8, 0xFF, 0xE0],
    };
    bytes.resize(len.max(100), fill);
    bytes
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Text a text field may hold: no control characters, not blank; `&`, `=`, `+`, `%`, `|`,
/// spaces and non-ASCII included (they must survive form encoding).
fn text(max: usize) -> BoxedStrategy<String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9 &=+%|/:.,;é漢-]{{0,{}}}[a-zA-Z0-9é漢]", max.min(40) - 1))
        .unwrap()
        .boxed()
}

fn image_value(limits: ImageLimits) -> BoxedStrategy<Value> {
    let side = limits.max_side_px.map_or(4000, |max| max.min(u32::from(u16::MAX)) as u16);
    (0u8..3, 1..=side, 100usize..400, any::<u8>())
        .prop_map(|(format, side, len, fill)| Value::from(base64(&image(format, side, len, fill))))
        .boxed()
}

/// A valid value of a field, as task JSON.
fn value(kind: FieldKind) -> BoxedStrategy<Value> {
    match kind {
        FieldKind::Text { max_chars } => text(max_chars).prop_map(Value::from).boxed(),
        FieldKind::Url { .. } => ("(http|https)", "[a-z]{1,10}", "[a-zA-Z0-9/?=&%._-]{0,20}")
            .prop_map(|(s, h, p)| Value::from(format!("{s}://{h}.example/{p}")))
            .boxed(),
        FieldKind::Flag => any::<bool>().prop_map(Value::from).boxed(),
        FieldKind::Score { min_tenths, max_tenths } => {
            (min_tenths..=max_tenths).prop_map(|t| Value::from(format!("0.{t}"))).boxed()
        }
        FieldKind::Choice { values } => proptest::sample::select(values).prop_map(Value::from).boxed(),
        FieldKind::Int { min, max } => (min..=max).prop_map(Value::from).boxed(),
        FieldKind::Proxy { .. } => ("[a-z]{1,8}", "[a-z0-9.]{0,10}[a-z0-9]", 1u16..)
            .prop_map(|(user, host, port)| Value::from(format!("{user}:pw@{host}:{port}")))
            .boxed(),
        FieldKind::Image(limits) => image_value(limits),
        FieldKind::Images { count, each } => {
            proptest::collection::vec(image_value(each), count).prop_map(Value::Array).boxed()
        }
        FieldKind::Upload { modes } => proptest::sample::select(modes).prop_map(Value::from).boxed(),
        // Synchronous tasks go to solve.php, never through in.php.
        FieldKind::Sync => Just(Value::from(false)).boxed(),
        other => panic!("a field kind this test does not generate: {other:?}"),
    }
}

/// A valid task of type `t`: each field given or not (required ones always), a proxy always with
/// its type, and pass-through parameters the endpoint has no role for.
fn task_of(t: TaskType) -> BoxedStrategy<Value> {
    let fields: Vec<BoxedStrategy<Option<(String, Value)>>> = t
        .fields()
        .map(|f| {
            let name = f.name().to_owned();
            let given = value(f.kind()).prop_map(move |v| Some((name.clone(), v)));
            if f.required() { given.boxed() } else { prop_oneof![Just(None), given].boxed() }
        })
        .collect();
    let extra = proptest::collection::btree_map("x_[a-z0-9_-]{0,12}", text(30), 0..3);
    (fields, extra, any::<bool>())
        .prop_map(move |(fields, extra, proxied)| {
            let mut task = Map::new();
            task.insert("type".into(), t.name().into());
            for (name, value) in fields.into_iter().flatten() {
                task.insert(name, value);
            }
            let has = |n: &str| t.field(n).is_some();
            if has("proxy") && (task.contains_key("proxy") || task.contains_key("proxytype") || proxied) {
                task.entry("proxy").or_insert_with(|| "user:pw@203.0.113.7:3128".into());
                task.entry("proxytype").or_insert_with(|| "HTTP".into());
            }
            if let (Some(min), Some(max)) = (task.get("min_len").cloned(), task.get("max_len").cloned()) {
                task.insert("min_len".into(), min.as_i64().min(max.as_i64()).into());
            }
            if !extra.is_empty() {
                task.insert("extra".into(), json!(extra));
            }
            Value::Object(task)
        })
        .boxed()
}

fn any_task() -> BoxedStrategy<Value> {
    let types: Vec<TaskType> = task_types().collect();
    proptest::sample::select(types).prop_flat_map(task_of).boxed()
}

/// The submit request the engine builds for `task`.
fn submit_request(task: &Task) -> HttpRequest {
    let mut solve = Solve::new(task.clone(), ApiKey::new(KEY).unwrap(), &Config::default(), 0).unwrap();
    match solve.poll_output(0).unwrap() {
        Output::Send(request) => request,
        other => panic!("{other:?}"),
    }
}

/// A request's text parameters and file parts, as a host collects them.
type Collected = (Vec<(String, String)>, Vec<(String, Vec<u8>)>);

/// The text parameters and file parts of a request the engine built.
fn params_of(request: &HttpRequest) -> Collected {
    match &request.body {
        Body::Form(text) => (form_urlencoded::parse(text.as_bytes()).into_owned().collect(), Vec::new()),
        Body::Multipart(bytes) => {
            let boundary = request.content_type.split("boundary=").nth(1).unwrap();
            let delimiter = format!("--{boundary}");
            let (mut params, mut files) = (Vec::new(), Vec::new());
            let mut rest = &bytes[..];
            while let Some(at) = find(rest, delimiter.as_bytes()) {
                rest = &rest[at + delimiter.len()..];
                if rest.starts_with(b"--") {
                    break;
                }
                let head_end = find(rest, b"\r\n\r\n").unwrap();
                let head = String::from_utf8_lossy(&rest[..head_end]).into_owned();
                let body_start = head_end + 4;
                let body_end = body_start + find(&rest[body_start..], format!("\r\n{delimiter}").as_bytes()).unwrap();
                let body = rest[body_start..body_end].to_vec();
                let name = head.split("name=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
                if head.contains("filename=") {
                    files.push((name, body));
                } else {
                    params.push((name, String::from_utf8(body).unwrap()));
                }
                rest = &rest[body_end..];
            }
            (params, files)
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn read_submit(params: &[(String, String)], files: &[(String, Vec<u8>)]) -> Result<Request, endpoint::Refusal> {
    let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    endpoint::read(Path::InPhp, &params, &files)
}

/// A task's canonical JSON without the flags that are false (never sent, so never read back).
fn without_false_flags(task: &Task) -> Value {
    let mut value = serde_json::to_value(task).unwrap();
    value.as_object_mut().unwrap().retain(|_, v| *v != Value::Bool(false));
    value
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// read(build(task)) is the task (as sent: flags that are false are not), and building again
    /// from it gives the same request.
    #[test]
    fn reading_the_request_the_engine_builds_gives_back_the_task(task in any_task()) {
        let task = Task::from_value(&task).unwrap_or_else(|e| panic!("the generator made an invalid task: {e}: {task}"));
        let request = submit_request(&task);
        let (params, files) = params_of(&request);
        let read = match read_submit(&params, &files) {
            Ok(Request::Submit(read)) => read,
            other => panic!("{other:?}\n  request: {request:?}"),
        };
        prop_assert_eq!(&read.key, KEY);
        prop_assert!(read.format.json, "the engine asks for JSON");
        prop_assert_eq!(without_false_flags(&read.task), without_false_flags(&task));
        let again = submit_request(&read.task);
        prop_assert_eq!(again.body.as_bytes(), request.body.as_bytes());
        prop_assert_eq!(&again.content_type, &request.content_type);
    }
}

/// An answer of the shape a type's answers have, as the engine keeps it.
fn answer(shape: AnswerShape) -> BoxedStrategy<Answer> {
    match shape {
        AnswerShape::Text => "[A-Za-z0-9._|:/+=-]{1,200}".prop_map(|t| Answer::Text(t.into())).boxed(),
        AnswerShape::Cells => proptest::collection::vec(1u64..=16, 1..6)
            .prop_map(|cells| Answer::Json(serde_json::to_string(&cells).unwrap().into()))
            .boxed(),
        AnswerShape::Object(keys) => {
            let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
            proptest::collection::btree_map("[a-z_]{1,12}", "[A-Za-z0-9|_-]{0,40}", 0..4)
                .prop_map(move |mut object| {
                    for key in &keys {
                        object.entry(key.clone()).or_insert_with(|| "v".to_owned());
                    }
                    if object.is_empty() {
                        object.insert("lot_number".into(), "7".into());
                    }
                    Answer::Json(serde_json::to_string(&object).unwrap().into())
                })
                .boxed()
        }
        other => panic!("an answer shape this test does not generate: {other:?}"),
    }
}

/// A minimal valid task of type `t` (every required field, a proxy where required).
fn minimal_task(t: TaskType) -> Task {
    let mut task = json!({"type": t.name()});
    for field in t.fields().filter(|f| f.required()) {
        let value = match field.kind() {
            FieldKind::Url { .. } => json!("https://portal.example/login"),
            FieldKind::Proxy { .. } => json!("203.0.113.7:3128"),
            FieldKind::Choice { values } => json!(values[0]),
            FieldKind::Image(_) => json!(base64(&image(0, 50, 200, 1))),
            FieldKind::Images { count, .. } => json!(vec![base64(&image(0, 50, 200, 1)); count]),
            _ => json!("664"),
        };
        task[field.name()] = value;
    }
    Task::from_value(&task).unwrap()
}

/// A solve of `t` whose submit was accepted, sitting at its first poll, and its time.
fn polling(t: TaskType) -> (Solve, u64) {
    let config = Config::from_json(r#"{"unsolvable_retries":0}"#).unwrap();
    let mut solve = Solve::new(minimal_task(t), ApiKey::new(KEY).unwrap(), &config, 0).unwrap();
    let Ok(Output::Send(submit)) = solve.poll_output(0) else { panic!("no submit") };
    let accepted = br#"{"status":1,"request":"7"}"#;
    let Ok(Output::Send(poll)) = solve.handle_response(submit.at, submit.id, 200, accepted) else { panic!("no poll") };
    (solve, poll.at)
}

/// The output of the solve fed `body` as the reply to its next poll.
fn poll_with((solve, now): &mut (Solve, u64), body: &str) -> Output {
    let Ok(Output::Send(poll)) = solve.poll_output(*now) else { panic!("not polling") };
    *now = poll.at;
    solve.handle_response(poll.at, poll.id, 200, body.as_bytes()).unwrap()
}

/// A solution with `answer` (`Solution` is `#[non_exhaustive]`: read from its JSON form, then set).
fn solved(answer: Answer, user_agent: Option<String>) -> Solution {
    let mut solution: Solution = serde_json::from_value(serde_json::json!({
        "answer": {"text": "t"}, "user_agent": null, "task_id": "7", "submitted_at": 0, "solved_at": 1,
        "elapsed_ms": 1, "polls": 1, "attempts": 1, "expires_at": null,
    }))
    .expect("a solution's JSON form");
    (solution.answer, solution.user_agent) = (answer, user_agent);
    solution
}

fn type_and_answer() -> impl Strategy<Value = (TaskType, Answer)> {
    let types: Vec<TaskType> = task_types().collect();
    proptest::sample::select(types).prop_flat_map(|t| (Just(t), answer(t.answer())))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// An answer rendered as CaptchaAI sends it (JSON or plain text) is the answer the engine
    /// reads from it, with the solver's user agent where JSON carries one.
    #[test]
    fn a_rendered_answer_reads_back_as_the_same_answer(
        (t, answer) in type_and_answer(),
        user_agent in proptest::option::of("[A-Za-z0-9/ .();]{1,60}"),
        json in any::<bool>(),
    ) {
        let format = ReplyFormat { json, cors: false };
        let solution = solved(answer, user_agent);
        let reply = endpoint::render_state(format, t.name(), SolveState::Solved(&solution));
        let mut solve = polling(t);
        match poll_with(&mut solve, &reply.body) {
            Output::Solved(read) => {
                prop_assert_eq!(&read.answer, &solution.answer, "{}", reply.body);
                let user_agent = if json { solution.user_agent.clone() } else { None };
                prop_assert_eq!(read.user_agent, user_agent, "{}", reply.body);
            }
            other => prop_assert!(false, "{other:?} from {}", reply.body),
        }
        let pending = endpoint::render_state(format, t.name(), SolveState::Pending);
        prop_assert!(matches!(poll_with(&mut polling(t), &pending.body), Output::Send(_)), "not ready polls on");
    }

    /// A task id rendered for an accepted submit is the id the engine then polls for.
    #[test]
    fn a_rendered_task_id_is_the_id_the_engine_polls(id in "[1-9][0-9]{0,18}", json in any::<bool>(), t in proptest::sample::select(task_types().collect::<Vec<_>>())) {
        let reply = endpoint::render_submitted(ReplyFormat { json, cors: false }, t.name(), &id);
        let mut solve = Solve::new(minimal_task(t), ApiKey::new(KEY).unwrap(), &Config::default(), 0).unwrap();
        let Ok(Output::Send(submit)) = solve.poll_output(0) else { panic!() };
        let next = solve.handle_response(submit.at, submit.id, 200, reply.body.as_bytes()).unwrap();
        prop_assert!(matches!(next, Output::Send(_)), "{next:?}");
        prop_assert_eq!(solve.task_id(), Some(id.as_str()), "{}", reply.body);
    }

    /// A failure rendered for a client reads back (with the engine's report reply parser) as
    /// the code a client of CaptchaAI sees for it, which is never "not ready".
    #[test]
    fn a_rendered_failure_reads_back_as_its_client_code(
        code in proptest::sample::select(codes().map(|c| c.code()).filter(|c| !c.contains(' ')).collect::<Vec<_>>()),
        message in "[ -~]{0,80}",
        json in any::<bool>(),
    ) {
        let format = ReplyFormat { json, cors: false };
        let failure = Failure::new(code, Class::Permanent, message);
        let reply = endpoint::render_state(format, "turnstile", SolveState::Failed(&failure));
        let client = if json {
            serde_json::from_str::<Value>(&reply.body).unwrap()["request"].as_str().unwrap().to_owned()
        } else {
            reply.body.clone()
        };
        prop_assert!(!client.contains("NOT_READY"), "{code} -> {client}");
        let read = endpoint::parse_report(200, reply.body.as_bytes()).expect_err("a failure");
        prop_assert_eq!(read.code, client);
    }

    /// `threadsinfo` and `getbalance` rendered read back the same with the engine's account
    /// parsers.
    #[test]
    fn rendered_threads_and_balances_read_back(threads in 0u64..10_000, working in 0u64..10_000, cents in -100_000_000_000i64..100_000_000_000, json in any::<bool>()) {
        let format = ReplyFormat { json, cors: false };
        let balance = cents as f64 / 100.0;
        let info = ThreadsInfo::new(threads, working);
        let reply = endpoint::render_threads(format, &info);
        prop_assert_eq!(account::parse_threads_info(200, reply.body.as_bytes()), Ok(info));
        let reply = endpoint::render_balance(format, balance);
        prop_assert_eq!(account::parse_balance(200, reply.body.as_bytes()), Ok(balance));
        prop_assert_eq!(endpoint::parse_report(200, endpoint::render_reported(format).body.as_bytes()), Ok(()));
    }

    /// Any parameters at all (names and values from a small alphabet that hits every rule, the
    /// key among them or not): a request or a refusal, and a refusal never quotes the key
    /// outside its `key` field.
    #[test]
    fn any_parameters_give_a_request_or_a_refusal_without_the_key(
        params in proptest::collection::vec(
            (prop_oneof![
                Just("key".to_owned()), Just("KEY".to_owned()), Just("method".to_owned()),
                Just("json".to_owned()), Just("action".to_owned()), Just("id".to_owned()),
                Just("ids".to_owned()), Just("pageurl".to_owned()), Just("sitekey".to_owned()),
                Just("googlekey".to_owned()), Just("body".to_owned()), Just(KEY.to_owned()),
                "[a-zA-Z_\\[\\]. \u{FFFD}-]{0,12}",
            ],
             prop_oneof![
                Just(KEY.to_owned()), Just("userrecaptcha".to_owned()), Just("turnstile".to_owned()),
                Just("get".to_owned()), Just("1".to_owned()), Just("https://a.example/".to_owned()),
                "[ -~\u{FFFD}]{0,40}",
            ]),
            0..12,
        ),
        files in proptest::collection::vec(("(file|other)", proptest::collection::vec(any::<u8>(), 0..300)), 0..2),
        res in any::<bool>(),
    ) {
        let params: Vec<(&str, &str)> = params.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
        let path = if res { Path::ResPhp } else { Path::InPhp };
        if let Err(refusal) = endpoint::read(path, &params, &files) {
            prop_assert!(!refusal.message.contains(KEY), "{refusal:?}");
            prop_assert!(!refusal.reply().body.contains(KEY), "{refusal:?}");
            prop_assert!(codes().any(|c| c.code() == refusal.code), "{} is a code of the table", refusal.code);
            prop_assert_eq!(refusal.reply().status, 200);
        }
    }
}

/// Every code the endpoint answers is a wire code of the table (so clients know it).
#[test]
fn every_code_the_endpoint_answers_is_a_wire_code() {
    for refusal in [
        endpoint::HostRefusal::UnknownKey,
        endpoint::HostRefusal::UnknownId,
        endpoint::HostRefusal::Busy,
        endpoint::HostRefusal::Disabled,
        endpoint::HostRefusal::TooLarge,
    ] {
        let code = endpoint::render_refusal(None, refusal).code;
        let row = codes().find(|c| c.code() == code).unwrap_or_else(|| panic!("{code}"));
        assert_ne!(row.source(), captchaai_engine::Source::Engine, "{code}");
    }
    for code in codes() {
        let failure = Failure::new(code.code(), code.class(), "");
        let client = endpoint::render_failure(ReplyFormat::default(), &failure).body;
        let row = codes().find(|c| c.code() == client).unwrap_or_else(|| panic!("{} -> {client}", code.code()));
        assert_ne!(row.source(), captchaai_engine::Source::Engine, "{} -> {client}", code.code());
        assert!(!client.contains("NOT_READY"), "a failure never reads as not ready: {} -> {client}", code.code());
    }
}
