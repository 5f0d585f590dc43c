//! The fuzz targets' bodies, as plain functions: `fuzz_targets/*.rs` call them under libFuzzer,
//! and `sim/tests/fuzz_corpus.rs` runs them natively over the seeds and every regression input
//! (so CI needs neither nightly nor cargo-fuzz for the short form).
//!
//! Any outcome but a panic is fine; the bodies also assert cheap invariants:
//! - the key never appears in a URL, a failure message, or (unless a reply the engine was fed
//!   contained it, so the upstream itself echoed it) a snapshot, a failure or any `Debug` print;
//! - nothing is asked to be sent at or after the deadline but one last poll, whose timeout passes
//!   by `ends_by` (for solves the engine created);
//! - terminal outputs are sticky;
//! - a `Misuse` error changes nothing (the snapshot is the same before and after);
//! - a snapshot restores to a solve with the same snapshot.

pub mod tasks;

/// The edge's request parsing, compiled from the edge's own file.
#[path = "../../edge/src/request.rs"]
pub mod edge_request_parsing;

use arbitrary::Unstructured;
use captchaai_engine::{
    ApiKey, Config, HttpRequest, Misuse, Origin, Output, RequestKind, Solution, Solve, SolveTimes, Task,
    TransportError, account, codes,
};

pub use tasks::TASKS;

/// The API key every target uses (32 letters and digits). It starts with a letter that no JSON
/// escape ends with (`\u00XX`, `\n`, `\f`...): with a key starting `f`, an upstream answer
/// holding U+001F then `uzzKEY...` was a false alarm, because the snapshot writes `\u001fuzzKEY...`.
pub const KEY: &str = "KEYfuzz0123456789abcdefghijklmno";
/// The first `now` (epoch ms).
pub const T0: u64 = 1_700_000_000_000;

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn new_solve(index: usize) -> Solve {
    let (name, task, config) = TASKS[index % TASKS.len()];
    let config = Config::from_json(config).unwrap_or_else(|e| panic!("{name}: {e}"));
    Solve::from_json(task, KEY, &config, T0).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Checks every output of one solve.
struct Checker {
    /// A reply fed to the engine held the key: the upstream echoed it, so copies of reply text
    /// (task ids, answers) may hold it too. Messages must still be redacted.
    tainted: bool,
    /// The solve came from the engine (not from an arbitrary snapshot): its requests must all
    /// be due before the deadline, but the last poll.
    engine_made: bool,
    /// The id of the last poll (the one request due at or after the deadline), once asked for.
    last_poll: Option<u32>,
    terminal: Option<Output>,
    /// The input itself held the key (a snapshot given to `restore`): a restored failure's
    /// message and the config's base URL are the input's text, so even they may hold it.
    key_in_input: bool,
    /// Outputs seen (the costlier checks run on some of them).
    outputs: u32,
}

impl Checker {
    fn new(engine_made: bool) -> Checker {
        Checker { tainted: false, engine_made, last_poll: None, terminal: None, key_in_input: false, outputs: 0 }
    }

    fn fed(&mut self, body: &[u8]) {
        if contains(body, KEY.as_bytes()) {
            self.tainted = true;
        }
    }

    /// Checks an output. The costlier checks (a snapshot, a request's `Debug`) run on the first
    /// output, every fourth one and terminal ones.
    fn output(&mut self, solve: &Solve, output: &Output) {
        if let Some(terminal) = &self.terminal {
            assert_eq!(terminal, output, "a terminal output changed");
        }
        self.outputs += 1;
        let thorough = self.outputs % 4 == 1;
        match output {
            Output::Send(request) => self.request(solve, request, thorough),
            Output::Failed(failure) => {
                if !self.key_in_input {
                    assert!(!failure.message.contains(KEY), "the key is in a failure message: {}", failure.message);
                }
                if !self.tainted {
                    assert!(!format!("{failure:?}").contains(KEY), "the key is in a failure");
                }
                if self.terminal.is_none() {
                    self.snapshot(solve);
                }
                self.terminal = Some(output.clone());
            }
            Output::Solved(_) => {
                if self.terminal.is_none() {
                    self.snapshot(solve);
                }
                self.terminal = Some(output.clone());
            }
        }
        if thorough {
            self.snapshot(solve);
        }
    }

    fn request(&mut self, solve: &Solve, request: &HttpRequest, thorough: bool) {
        if !self.key_in_input {
            assert!(!request.url.contains(KEY), "the key is in a URL");
        }
        if self.engine_made
            && let Some(deadline) = solve.deadline()
            && request.at >= deadline
        {
            // Only the last poll, one request, answered or timed out by `ends_by`.
            assert_eq!(
                request.kind,
                RequestKind::Poll,
                "a request due at {} after the deadline {deadline}",
                request.at
            );
            let ends_by = solve.ends_by().unwrap_or(deadline);
            assert!(request.at + request.timeout_ms <= ends_by, "the last poll at {} ends past {ends_by}", request.at);
            assert!(self.last_poll.is_none_or(|id| id == request.id), "a second request after the deadline");
            self.last_poll = Some(request.id);
        }
        if thorough && !self.tainted {
            assert!(!format!("{request:?}").contains(KEY), "the key is in a request's Debug");
        }
    }

    fn snapshot(&self, solve: &Solve) -> String {
        let snapshot = solve.snapshot();
        if !self.tainted {
            assert!(!snapshot.contains(KEY), "the key is in a snapshot");
        }
        snapshot
    }

    /// The result of a call: outputs are checked; a misuse must leave the solve unchanged.
    fn result(&mut self, solve: &Solve, before: &str, result: &Result<Output, Misuse>) {
        match result {
            Ok(output) => self.output(solve, output),
            Err(misuse) => {
                assert!(!before.is_empty(), "a misuse from a call that follows the contract: {misuse}");
                assert_eq!(before, solve.snapshot(), "a misuse changed the solve");
            }
        }
    }
}

/// Snapshot and restore: the restored solve has the same snapshot.
fn round_trip(solve: Solve) -> Solve {
    let snapshot = solve.snapshot();
    let restored = Solve::restore(&snapshot, KEY).unwrap_or_else(|e| panic!("own snapshot refused: {e}\n{snapshot}"));
    assert_eq!(snapshot, restored.snapshot(), "restore changed the snapshot");
    restored
}

/// A plausible reply to `request` (for driving a solve along).
fn canned(request: &HttpRequest, pick: u8) -> &'static str {
    match (request.kind.as_str(), pick % 4) {
        ("submit", 0) => "ERROR_ZERO_BALANCE",
        ("submit", _) => r#"{"status":1,"request":"73516205"}"#,
        ("threads_info", 0) => r#"{"status":1,"threads":5,"working_threads":2}"#,
        ("threads_info", _) => r#"{"status":1,"threads":5,"working_threads":5}"#,
        (_, 0) => r#"{"status":1,"request":"03AFcWeA-token"}"#,
        (_, 1) => "ERROR_CAPTCHA_UNSOLVABLE",
        _ => "CAPCHA_NOT_READY",
    }
}

/// `reply`: `[task, step, status lo, status hi, body...]`. Drives a solve of the task to the
/// step (0 submit, 1 poll, 2 threadsinfo; others: poll after a not-ready), then feeds the body
/// with the status, and keeps feeding it to every following request (up to 12 times).
/// Also runs the account parsers on it.
pub fn reply(data: &[u8]) {
    let [task, step, lo, hi, body @ ..] = data else { return };
    let status = u16::from_le_bytes([*lo, *hi]);
    let _ = account::parse_threads_info(status, body);
    let _ = account::parse_balance(status, body);
    let mut solve = new_solve(usize::from(*task));
    let mut checker = Checker::new(true);
    let mut output = solve.poll_output(T0).expect("first poll_output");
    let script: &[&str] = match step % 4 {
        0 => &[],
        1 => &[r#"{"status":1,"request":"73516205"}"#],
        2 => &["ERROR_ZERO_BALANCE"],
        _ => &[r#"{"status":1,"request":73516205}"#, "CAPCHA_NOT_READY"],
    };
    for canned in script {
        let Output::Send(request) = output else { return };
        output = solve.handle_response(request.at, request.id, 200, canned.as_bytes()).expect("canned reply");
    }
    checker.output(&solve, &output);
    checker.fed(body);
    for round in 0..12 {
        let Output::Send(request) = output else { break };
        let now = request.at + 250;
        output = solve.handle_response(now, request.id, status, body).expect("reply to the current request");
        checker.output(&solve, &output);
        if round == 0 {
            solve = round_trip(solve);
        }
    }
    if !checker.tainted {
        round_trip(solve);
    }
}

/// `task`: the input as task JSON (lossy UTF-8), through `Task::from_json`, `Config::from_json`
/// and `Solve::from_json`; a valid task must give a submit due now, with the key only in its
/// body, and a snapshot that restores to the same snapshot.
pub fn task(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = Task::from_json(&text);
    let _ = Config::from_json(&text);
    match Solve::from_json(&text, KEY, &Config::default(), T0) {
        Ok(mut solve) => {
            assert!(parsed.is_ok(), "Solve::from_json accepted what Task::from_json refused");
            let mut checker = Checker::new(true);
            checker.fed(data);
            let output = solve.poll_output(T0).expect("first poll_output");
            checker.output(&solve, &output);
            let Output::Send(request) = &output else { panic!("a new solve did not ask to submit: {output:?}") };
            assert_eq!((request.at, request.id), (T0, 1), "the submit is not due at once");
            assert!(contains(request.body.as_bytes(), KEY.as_bytes()), "the submit body has no key");
            if !checker.tainted {
                round_trip(solve);
            }
        }
        Err(failure) => {
            assert_eq!(failure.origin(), Origin::Input, "a refused task with code {}", failure.code);
            assert!(!failure.message.contains(KEY), "the key is in a validation message");
        }
    }
}

/// `restore`: the input as a snapshot (lossy UTF-8). If it restores, the solve must still be
/// drivable: up to 16 steps with plausible replies, checking outputs (not the deadline: the
/// snapshot is not the engine's), and its own snapshot round-trips.
pub fn restore(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(mut solve) = Solve::restore(&text, KEY) else { return };
    let mut checker = Checker::new(false);
    checker.fed(data);
    checker.key_in_input = checker.tainted;
    let mut now = match solve.poll_output(0) {
        Err(Misuse::TimeWentBackwards { last, .. }) => last,
        _ => 0,
    };
    let pick = data.iter().fold(0u8, |a, b| a.wrapping_add(*b));
    for step in 0..16u8 {
        let before = solve.snapshot();
        let result = solve.poll_output(now);
        checker.result(&solve, &before, &result);
        let Ok(Output::Send(request)) = result else { break };
        now = now.max(request.at);
        let reply = canned(&request, pick.wrapping_add(step));
        let result = solve.handle_response(now, request.id, 200, reply.as_bytes());
        checker.result(&solve, &before, &result);
        if step == 1 && !checker.tainted {
            solve = round_trip(solve);
        }
    }
}

/// Every code in the table, for `ops` replies.
fn code(u: &mut Unstructured) -> String {
    let count = codes().len();
    match u.int_in_range(0..=count).unwrap_or(0) {
        i if i < count => codes().nth(i).map(|c| c.code()).unwrap_or_default().to_owned(),
        _ => "ERROR_FUZZ_UNKNOWN".to_owned(),
    }
}

fn byte(u: &mut Unstructured) -> u8 {
    u.arbitrary::<u8>().unwrap_or(0)
}

fn small(u: &mut Unstructured) -> u64 {
    u64::from(u16::from_le_bytes([byte(u), byte(u)]))
}

/// A reply body chosen by the input.
fn body(u: &mut Unstructured) -> Vec<u8> {
    let n = byte(u);
    match n % 9 {
        0 => {
            let len = usize::from(byte(u));
            u.bytes(len.min(u.len())).unwrap_or_default().to_vec()
        }
        1 => format!(r#"{{"status":1,"request":"{}"}}"#, small(u)).into_bytes(),
        2 => format!(r#"{{"status":1,"request":{}}}"#, small(u)).into_bytes(),
        3 => b"CAPCHA_NOT_READY".to_vec(),
        4 => {
            let len = usize::from(byte(u) % 64);
            let raw = u.bytes(len.min(u.len())).unwrap_or_default();
            let mut out = b"{\"status\":1,\"request\":\"".to_vec();
            out.extend_from_slice(raw);
            out.extend_from_slice(b"\"}");
            out
        }
        5 => {
            let code = code(u);
            if n & 0x80 != 0 { code.into_bytes() } else { format!(r#"{{"status":0,"request":"{code}"}}"#).into_bytes() }
        }
        6 => format!(r#"{{"status":1,"threads":{},"working_threads":{}}}"#, byte(u) % 8, byte(u) % 8).into_bytes(),
        7 => b"<html><title>502 Bad Gateway</title></html>".to_vec(),
        _ => {
            let len = usize::from(byte(u) % 64);
            let mut out = b"OK|".to_vec();
            out.extend_from_slice(u.bytes(len.min(u.len())).unwrap_or_default());
            out
        }
    }
}

fn status(u: &mut Unstructured) -> u16 {
    match byte(u) {
        0..=191 => 200,
        192..=199 => 0,
        200..=207 => 204,
        208..=215 => 403,
        216..=223 => 500,
        224..=231 => 502,
        232..=239 => 503,
        _ => u16::from_le_bytes([byte(u), byte(u)]),
    }
}

/// A solution the engine gave (submitted at `T0`), which [`learned`] copies and sets:
/// `Solution` is `#[non_exhaustive]`, made by the engine only.
static SOLUTION: std::sync::LazyLock<Solution> = std::sync::LazyLock::new(|| {
    let task = r#"{"type":"turnstile","sitekey":"0x4AAAAAAAB","pageurl":"https://example.com/login"}"#;
    let mut solve = Solve::from_json(task, KEY, &Config::default(), T0).expect("a turnstile task");
    let mut output = solve.poll_output(T0);
    for reply in [r#"{"status":1,"request":"7412"}"#, r#"{"status":1,"request":"t"}"#] {
        let Ok(Output::Send(request)) = output else { break };
        output = solve.handle_response(request.at, request.id, 200, reply.as_bytes());
    }
    match output {
        Ok(Output::Solved(solution)) => solution,
        other => panic!("the canned solve was not solved: {other:?}"),
    }
});

/// A solve-times model of `task_json`'s type taught up to 95 finished solves, each from the
/// input: its solve time (ms / 16, two bytes) and a byte for its polls (`% 12`; from 240 on, a
/// solve of two attempts, which the model must ignore). Its text form must stay within 1 KiB and
/// read back equal.
fn learned(u: &mut Unstructured, task_json: &str) -> Option<SolveTimes> {
    let mut model = SolveTimes::new(Task::from_json(task_json).ok()?.task_type().name()).ok()?;
    for _ in 0..byte(u) % 96 {
        let (elapsed, polls) = (small(u) * 16, byte(u));
        let mut solution = SOLUTION.clone();
        (solution.solved_at, solution.elapsed_ms) = (T0 + elapsed, elapsed);
        (solution.polls, solution.attempts) = (u32::from(polls % 12), 1 + u32::from(polls >= 240));
        model.observe(&solution);
    }
    let text = model.to_string();
    assert!(text.len() <= 1_024, "a model of {} bytes", text.len());
    assert_eq!(text.parse::<SolveTimes>().as_ref(), Ok(&model), "the model's text reads back");
    Some(model)
}

/// `ops`: a sequence of engine operations decoded with `arbitrary::Unstructured`: a task, a
/// config (flag 16: and a learned solve-times model, [`learned`]), then up to 64 of: poll at a later time, reply to the current request (a chosen body
/// and status, after a delay), a transport error, a reply with a wrong, stale or early id,
/// time going backwards, snapshot/restore. Every output and misuse is checked.
pub fn ops(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let task = usize::from(byte(&mut u));
    let (_, task_json, config_json) = TASKS[task % TASKS.len()];
    let mut config = Config::from_json(config_json).expect("vector config");
    let flags = byte(&mut u);
    if flags & 1 != 0 {
        config.jitter_seed = Some(small(&mut u));
        config.max_jitter_ms = small(&mut u) % 12_000;
    }
    if flags & 2 != 0 {
        config.max_submit_retries = u32::from(byte(&mut u) % 12);
        config.max_poll_errors = u32::from(byte(&mut u) % 102);
        config.unsolvable_retries = u32::from(byte(&mut u) % 7);
    }
    if flags & 4 != 0 {
        config.request_timeout_ms = small(&mut u) * 4;
        config.deadline_ms = Some(small(&mut u) * 100);
    }
    if flags & 8 != 0 {
        config.poll_interval_ms = Some(small(&mut u) * 4);
        config.initial_wait_ms = Some(small(&mut u) * 8);
    }
    let model = if flags & 16 != 0 { learned(&mut u, task_json) } else { None };
    let created = match &model {
        None => Solve::from_json(task_json, KEY, &config, T0).ok(),
        Some(model) => Task::from_json(task_json)
            .ok()
            .zip(ApiKey::new(KEY).ok())
            .and_then(|(task, key)| Solve::with_solve_times(task, key, &config, model, T0).ok()),
    };
    let Some(mut solve) = created else { return };
    let mut checker = Checker::new(true);
    let mut now = T0;
    let mut current: Option<HttpRequest> = None;
    for _ in 0..64 {
        if u.is_empty() {
            break;
        }
        let op = byte(&mut u);
        // Only ops 4-6 can be misuses (ops 0-3 follow the contract): keep the state to compare.
        let before = if matches!(op % 8, 4..=6) { checker.snapshot(&solve) } else { String::new() };
        let dt = small(&mut u) * u64::from(op >> 4).max(1) * 16;
        let result = match op % 8 {
            0 => {
                now += dt;
                solve.poll_output(now)
            }
            1..=3 => {
                let Some(request) = current.clone() else { continue };
                now = now.max(request.at) + dt % (request.timeout_ms + 1);
                if op % 8 == 3 {
                    let error = [TransportError::Timeout, TransportError::Connect, TransportError::Broken]
                        [usize::from(byte(&mut u) % 3)];
                    solve.handle_transport_error(now, request.id, error)
                } else {
                    let status = status(&mut u);
                    let body = body(&mut u);
                    checker.fed(&body);
                    solve.handle_response(now, request.id, status, &body)
                }
            }
            4 => {
                // A reply with an arbitrary id (unknown, stale, or the current one).
                let id = u32::from(byte(&mut u)) % 40;
                let body = body(&mut u);
                checker.fed(&body);
                now += dt % 1_000;
                solve.handle_response(now, id, 200, &body)
            }
            5 => {
                // Time going backwards (a misuse unless dt is 0).
                let then = now.saturating_sub(dt);
                solve.poll_output(then)
            }
            6 => {
                // A reply before the request was due.
                let Some(request) = current.clone() else { continue };
                let early = request.at.saturating_sub(1 + dt % 5_000).max(now);
                let body = body(&mut u);
                checker.fed(&body);
                let result = solve.handle_response(early, request.id, 200, &body);
                if early >= request.at || result.is_ok() {
                    now = early.max(now);
                }
                result
            }
            _ => {
                if !checker.tainted {
                    solve = round_trip(solve);
                }
                continue;
            }
        };
        checker.result(&solve, &before, &result);
        match result {
            Ok(Output::Send(request)) => current = Some(request),
            Ok(_) => current = None,
            Err(_) => {}
        }
    }
}

/// `edge_request`: `[path kind, query kind, auth kind, split, split, split, bytes...]`: a path, a
/// query, an `Authorization` and a `Content-Length` value cut from the bytes (each after a
/// prefix chosen to reach the interesting branches), through the edge's request parsing. Checks
/// each answer against what the API promises, stated independently of the parser:
/// - a route names a solve only for `/v1/solve/` plus 32 lowercase hex characters, and every
///   other `/v1/solve/...` path is an unknown solve; route names are the six templates;
/// - `wait` is the default without a `wait=` pair, else exactly the decimal number it spells,
///   and only from 0 to the maximum;
/// - a bearer token is what follows `Bearer ` (scheme in any case), never empty;
/// - a declared length is exactly the decimal number the header spells.
pub fn edge_request(data: &[u8]) {
    use edge_request_parsing::{Route, SOLVE_PREFIX, bearer_token, declared_length, route, wait_seconds};
    const PATHS: [&str; 6] = ["", "/healthz", "/metrics", "/v1/solve", "/v1/threads", SOLVE_PREFIX];
    const QUERIES: [&str; 4] = ["", "wait=", "x=1&wait=", "wait=5&wait="];
    const SCHEMES: [&[u8]; 4] = [b"", b"Bearer ", b"bEaReR ", b"Basic "];
    let [path_kind, query_kind, auth_kind, a, b, c, rest @ ..] = data else { return };
    let (cut_a, cut_b, cut_c) = (usize::from(*a).min(rest.len()), usize::from(*b), usize::from(*c));
    let (first, rest) = rest.split_at(cut_a);
    let (second, rest) = rest.split_at(cut_b.min(rest.len()));
    let (third, fourth) = rest.split_at(cut_c.min(rest.len()));

    let path = format!("{}{}", PATHS[usize::from(*path_kind) % PATHS.len()], String::from_utf8_lossy(first));
    let routed = route(&path);
    let tail = path.strip_prefix(SOLVE_PREFIX);
    let is_id = |id: &str| id.len() == 32 && id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    match routed {
        Route::Solve(id) => assert!(tail == Some(id) && is_id(id), "{path:?} routed to solve {id:?}"),
        Route::UnknownSolve => assert!(tail.is_some_and(|id| !is_id(id)), "{path:?} routed to an unknown solve"),
        _ => assert!(tail.is_none(), "{path:?}: {routed:?}"),
    }
    let names = ["/healthz", "/metrics", "/v1/solve", "/v1/threads", "/v1/solve/{id}", "(other)"];
    assert!(names.contains(&routed.name()), "{path:?}: {routed:?}");

    let query = format!("{}{}", QUERIES[usize::from(*query_kind) % QUERIES.len()], String::from_utf8_lossy(second));
    let query = (!query.is_empty()).then_some(query.as_str());
    let wait = wait_seconds(query, 4, 25);
    let first_wait = query.and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("wait=")));
    let spelled = |text: &str| {
        let number =
            text.bytes().try_fold(0u64, |n, b| n.checked_mul(10)?.checked_add(u64::from(b.checked_sub(b'0')?)));
        number.filter(|_| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
    };
    match first_wait {
        None => assert_eq!(wait, Some(4), "no wait= in {query:?}"),
        Some(text) => assert_eq!(wait, spelled(text).filter(|s| *s <= 25), "{query:?}"),
    }

    let mut header = SCHEMES[usize::from(*auth_kind) % SCHEMES.len()].to_vec();
    header.extend_from_slice(third);
    let presented = bearer_token(Some(&header));
    let expected = header.get(..7).filter(|s| s.eq_ignore_ascii_case(b"bearer ")).map(|_| &header[7..]);
    assert_eq!(presented, expected.filter(|t| !t.is_empty()), "{header:?}");
    assert_eq!(bearer_token(None), None);

    let length = declared_length(Some(fourth));
    let text = std::str::from_utf8(fourth).unwrap_or("x");
    assert_eq!(length, spelled(text), "{fourth:?}");
}

/// `endpoint_request`: a CaptchaAI request as a host hands it to the endpoint reader:
/// `[path, upload, (upload length lo, hi, upload bytes)?, params...]`, the path `in.php` (even)
/// or `res.php` (odd); with `upload` non-zero, a file part named `file` (bit 2 clear) or `other`
/// (set); the params are `name\0value\0name\0value...` (lossy UTF-8, as a host decodes them).
/// Checks what the reader promises:
/// - an accepted submit has the one `key` parameter's value (32 letters and digits) and a task
///   the engine starts a solve of with that key, whose snapshot round-trips;
/// - an accepted `res.php` question has that key, and ids of 1-20 digits;
/// - a refusal is a wire code of the table, answered with HTTP 200, and neither its message nor
///   its reply holds a well-formed key the request carried (its `key` field does);
/// - a refusal carries a key only when the request had it, well-formed, as `key`.
pub fn endpoint_request(data: &[u8]) {
    use captchaai_engine::endpoint::{self, Path, Request, ResAction};
    let [path, upload, rest @ ..] = data else { return };
    let (file, rest) = match (*upload, rest) {
        (0, rest) => (None, rest),
        (_, [lo, hi, rest @ ..]) => {
            let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(rest.len());
            let name = if upload & 2 == 0 { "file" } else { "other" };
            (Some((name, &rest[..len])), &rest[len..])
        }
        _ => return,
    };
    let texts: Vec<String> = rest.split(|b| *b == 0).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    let params: Vec<(&str, &str)> =
        texts.chunks(2).map(|pair| (pair[0].as_str(), pair.get(1).map_or("", String::as_str))).collect();
    let uploads: Vec<(&str, &[u8])> = file.into_iter().collect();
    let path = if path % 2 == 0 { Path::InPhp } else { Path::ResPhp };
    let keys: Vec<&str> = params.iter().filter(|(n, _)| *n == "key").map(|(_, v)| *v).collect();
    let well_formed = |k: &str| k.len() == 32 && k.bytes().all(|b| b.is_ascii_alphanumeric());
    match endpoint::read(path, &params, &uploads) {
        Ok(Request::Submit(submit)) => {
            assert_eq!(keys, [submit.key.as_str()], "the submit's key is its one `key` parameter");
            let key = ApiKey::new(&submit.key).expect("a well-formed key");
            let solve = Solve::new(submit.task, key, &Config::default(), T0).expect("a task the engine starts");
            round_trip(solve);
        }
        Ok(Request::Res(res)) => {
            assert_eq!(keys, [res.key.as_str()], "the question's key is its one `key` parameter");
            assert!(well_formed(&res.key), "a malformed key was accepted");
            let ids = match &res.action {
                ResAction::Get(id) | ResAction::ReportGood(id) | ResAction::ReportBad(id) => vec![id.as_str()],
                ResAction::GetMany(ids) => ids.iter().map(String::as_str).collect(),
                ResAction::ThreadsInfo | ResAction::Balance => Vec::new(),
            };
            for id in ids {
                assert!((1..=20).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()), "id {id:?}");
            }
        }
        Err(refusal) => {
            let row = codes().find(|c| c.code() == refusal.code).expect("a code of the table");
            assert_ne!(row.source(), captchaai_engine::Source::Engine, "{}", refusal.code);
            assert_eq!(refusal.reply().status, 200);
            for key in keys.iter().filter(|k| well_formed(k)) {
                assert!(!refusal.message.contains(key) && !refusal.reply().body.contains(key), "{refusal:?}");
            }
            if let Some(key) = &refusal.key {
                assert!(keys.contains(&key.as_str()) && well_formed(key), "{refusal:?}");
            }
        }
    }
}
