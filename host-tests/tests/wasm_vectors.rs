//! Every golden vector replayed through the engine .wasm in wasmtime gives exactly the native
//! transcript (and the stored one); a vector with a solve-times model is created with it through
//! the component (`solve-times.from-text`, `solve.create-with-times`), and the model after it
//! observed the solution is the native and the stored one, byte for byte. Every endpoint vector
//! case (testdata/vectors/endpoint) gives the native and the stored result through the component.

use std::path::PathBuf;

use captchaai::endpoint as wit_endpoint;
use captchaai::{self as wit, EngineHost, EngineInstance, ResourceAny};
use captchaai_engine::account::ThreadsInfo;
use captchaai_engine::endpoint;
use captchaai_engine::{ApiKey, Body, Class, Failure, Misuse, Origin, Output, RequestKind, Solution, TransportError};
use captchaai_vectors::endpoint as ep;
use captchaai_vectors::{self as vectors, Engine, Native, Vector};

/// The component behind the replayer's engine interface: WIT values converted to native ones.
struct Wasm {
    instance: EngineInstance,
    key: Option<ApiKey>,
}

fn config_to_wit(c: &captchaai_engine::Config) -> wit::Config {
    wit::Config {
        base_url: Some(c.base_url.to_string()),
        request_timeout_ms: Some(c.request_timeout_ms),
        deadline_ms: c.deadline_ms,
        initial_wait_ms: c.initial_wait_ms,
        poll_interval_ms: c.poll_interval_ms,
        max_submit_retries: Some(c.max_submit_retries),
        max_poll_errors: Some(c.max_poll_errors),
        unsolvable_retries: Some(c.unsolvable_retries),
        jitter_seed: c.jitter_seed,
        max_jitter_ms: Some(c.max_jitter_ms),
        poll_cost_ms: Some(c.poll_cost_ms),
    }
}

/// The native failure, read from its JSON form (`Failure` is `#[non_exhaustive]`); the WIT's
/// `origin` must be the one the native code table gives.
fn failure(f: wit::Failure) -> Failure {
    let class = match f.class {
        wit::FailureClass::Permanent => Class::Permanent,
        wit::FailureClass::Transient => Class::Transient,
        wit::FailureClass::Unsolvable => Class::Unsolvable,
    };
    let origin = match f.origin {
        wit::FailureOrigin::Input => Origin::Input,
        wit::FailureOrigin::Service => Origin::Service,
        wit::FailureOrigin::NoAnswer => Origin::NoAnswer,
    };
    let failure: Failure = serde_json::from_value(serde_json::json!({
        "code": f.code,
        "class": class,
        "message": f.message,
        "retry_after_ms": f.retry_after_ms,
        "field": f.field,
        "task_id": f.task_id,
    }))
    .expect("a failure's JSON form");
    assert_eq!(origin, failure.origin(), "origin of {}", failure.code);
    failure
}

fn misuse(m: wit::Misuse) -> Misuse {
    match m {
        wit::Misuse::TimeWentBackwards(last) => Misuse::TimeWentBackwards { last, now: 0 },
        wit::Misuse::UnknownRequest(id) => Misuse::UnknownRequest { request_id: id },
        wit::Misuse::StaleResponse(id) => Misuse::StaleResponse { request_id: id },
        wit::Misuse::NotDue(at) => Misuse::NotDue { request_id: 0, at },
    }
}

impl Wasm {
    /// The native output; a solution's `solution-json` must be the native client JSON.
    fn output(&mut self, output: wit::Output) -> Output {
        match output {
            wit::Output::Send(r) => {
                let kind = match r.kind {
                    wit::RequestKind::Submit => RequestKind::Submit,
                    wit::RequestKind::Poll => RequestKind::Poll,
                    wit::RequestKind::ThreadsInfo => RequestKind::ThreadsInfo,
                    wit::RequestKind::Balance => RequestKind::Balance,
                    wit::RequestKind::Report => RequestKind::Report,
                };
                let body = match r.body {
                    wit::RequestBody::Form(text) => Body::Form(text.into()),
                    wit::RequestBody::Multipart(bytes) => Body::Multipart(bytes),
                };
                let key = self.key.as_ref().expect("a solve exists");
                Output::Send(captchaai_engine::HttpRequest::from_parts(
                    r.id,
                    kind,
                    r.at,
                    r.url,
                    r.content_type,
                    body,
                    r.timeout_ms,
                    key,
                ))
            }
            wit::Output::Solved(s) => Output::Solved(self.solution(s)),
            wit::Output::Failed(f) => Output::Failed(failure(f)),
        }
    }

    fn solution(&mut self, s: wit::Solution) -> Solution {
        let json = self.instance.solution_json(&s).expect("no trap");
        // Read from its JSON form (`Solution` is `#[non_exhaustive]`).
        let answer = match s.answer {
            wit::Answer::Text(t) => serde_json::json!({"text": t}),
            wit::Answer::Json(j) => serde_json::json!({"json": j}),
        };
        let native: Solution = serde_json::from_value(serde_json::json!({
            "answer": answer,
            "user_agent": s.user_agent,
            "task_id": s.task_id,
            "submitted_at": s.submitted_at,
            "solved_at": s.solved_at,
            "elapsed_ms": s.elapsed_ms,
            "polls": s.polls,
            "attempts": s.attempts,
            "expires_at": s.expires_at,
        }))
        .expect("a solution's JSON form");
        assert_eq!(json, native.client_json(), "solution-json differs from the native client JSON");
        native
    }
}

/// The native solution as the WIT record (for `solve-times.observe`).
fn solution_to_wit(s: &Solution) -> wit::Solution {
    wit::Solution {
        answer: match &s.answer {
            captchaai_engine::Answer::Text(t) => wit::Answer::Text(t.to_string()),
            captchaai_engine::Answer::Json(j) => wit::Answer::Json(j.to_string()),
            other => panic!("an answer the WIT has no case for: {other:?}"),
        },
        user_agent: s.user_agent.clone(),
        task_id: s.task_id.as_deref().map(str::to_owned),
        submitted_at: s.submitted_at,
        solved_at: s.solved_at,
        elapsed_ms: s.elapsed_ms,
        polls: s.polls,
        attempts: s.attempts,
        expires_at: s.expires_at,
    }
}

impl Engine for Wasm {
    type Solve = ResourceAny;

    fn create_with_times(
        &mut self,
        task_json: &str,
        key: &str,
        config: &captchaai_engine::Config,
        now: u64,
        solve_times: &str,
    ) -> Result<Result<ResourceAny, Failure>, String> {
        let times = self.instance.times_from_text(solve_times).expect("no trap").map_err(|e| format!("{e:?}"))?;
        self.key = ApiKey::new(key).ok();
        let created = self.instance.create_with_times(task_json, key, &config_to_wit(config), now, times);
        self.instance.drop_times(times).expect("no trap");
        Ok(created.expect("no trap").map_err(failure))
    }

    fn observe(&mut self, solve_times: &str, solution: &Solution) -> Result<String, String> {
        let times = self.instance.times_from_text(solve_times).expect("no trap").map_err(|e| format!("{e:?}"))?;
        self.instance.times_observe(times, &solution_to_wit(solution)).expect("no trap");
        let text = self.instance.times_to_text(times).expect("no trap");
        self.instance.drop_times(times).expect("no trap");
        Ok(text)
    }

    fn create(
        &mut self,
        task_json: &str,
        key: &str,
        config: &captchaai_engine::Config,
        now: u64,
    ) -> Result<ResourceAny, Failure> {
        self.key = ApiKey::new(key).ok();
        self.instance.create(task_json, key, &config_to_wit(config), now).expect("no trap").map_err(failure)
    }

    fn restore(&mut self, snapshot: &str, key: &str) -> Result<ResourceAny, String> {
        self.instance.restore(snapshot, key).expect("no trap").map_err(|e| format!("{e:?}"))
    }

    fn snapshot(&mut self, solve: &ResourceAny) -> String {
        self.instance.snapshot(*solve).expect("no trap")
    }

    fn poll_output(&mut self, solve: &mut ResourceAny, now: u64) -> Result<Output, Misuse> {
        let output = self.instance.poll_output(*solve, now).expect("no trap");
        output.map(|o| self.output(o)).map_err(misuse)
    }

    fn handle_response(
        &mut self,
        solve: &mut ResourceAny,
        now: u64,
        id: u32,
        status: u16,
        body: &[u8],
    ) -> Result<Output, Misuse> {
        // The WIT's rule: reply bytes cross as text, invalid UTF-8 replaced with U+FFFD.
        let response = wit::HttpResponse { status, body: String::from_utf8_lossy(body).into_owned() };
        let output = self.instance.handle_response(*solve, now, id, &response).expect("no trap");
        output.map(|o| self.output(o)).map_err(misuse)
    }

    fn handle_transport_error(
        &mut self,
        solve: &mut ResourceAny,
        now: u64,
        id: u32,
        error: TransportError,
    ) -> Result<Output, Misuse> {
        let error = match error {
            TransportError::Timeout => wit::TransportError::Timeout,
            TransportError::Connect => wit::TransportError::Connect,
            TransportError::Broken => wit::TransportError::Broken,
            other => panic!("a transport error the WIT has no case for: {other:?}"),
        };
        let output = self.instance.handle_transport_error(*solve, now, id, error).expect("no trap");
        output.map(|o| self.output(o)).map_err(misuse)
    }
}

#[test]
fn every_vector_replays_identically_through_the_component() {
    let host = EngineHost::embedded(None).expect("the embedded engine component");
    let mut wasm = Wasm { instance: host.instantiate(1 << 30).unwrap(), key: None };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    assert!(files.len() >= 80, "found {} vectors", files.len());
    for path in files {
        let vector = Vector::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let native = vectors::replay_full(&mut Native, &vector);
        let through_wasm = vectors::replay_full(&mut wasm, &vector);
        assert_eq!(
            through_wasm.solve_times_after, native.solve_times_after,
            "{}: the models after differ",
            vector.name
        );
        assert_eq!(
            through_wasm.solve_times_after, vector.solve_times_after,
            "{}: differs from the stored model",
            vector.name
        );
        let (native, through_wasm) = (native.transcript, through_wasm.transcript);
        let text = |t: &[serde_json::Value]| serde_json::to_string_pretty(t).unwrap();
        assert_eq!(text(&through_wasm), text(&native), "{}: the .wasm and native transcripts differ", vector.name);
        assert_eq!(
            text(&through_wasm),
            text(&vector.transcript),
            "{}: differs from the stored transcript",
            vector.name
        );
    }
}

/// The native failure as the WIT record.
fn failure_to_wit(f: &Failure) -> wit::Failure {
    let class = match f.class {
        Class::Permanent => wit::FailureClass::Permanent,
        Class::Transient => wit::FailureClass::Transient,
        Class::Unsolvable => wit::FailureClass::Unsolvable,
        other => unreachable!("a class the WIT does not have: {other:?}"),
    };
    let origin = match f.origin() {
        Origin::Input => wit::FailureOrigin::Input,
        Origin::Service => wit::FailureOrigin::Service,
        Origin::NoAnswer => wit::FailureOrigin::NoAnswer,
        other => unreachable!("an origin the WIT does not have: {other:?}"),
    };
    wit::Failure {
        code: f.code.clone(),
        class,
        origin,
        message: f.message.clone(),
        retry_after_ms: f.retry_after_ms,
        field: f.field.clone(),
        task_id: f.task_id.as_deref().map(str::to_owned),
    }
}

fn format_to_wit(f: endpoint::ReplyFormat) -> wit_endpoint::ReplyFormat {
    wit_endpoint::ReplyFormat { json: f.json, cors: f.cors }
}

fn reply_from_wit(r: wit_endpoint::EndpointReply) -> ep::Reply {
    ep::Reply {
        status: r.status,
        content_type: r.content_type,
        headers: r.headers.into_iter().map(|h| (h.name, h.value)).collect(),
        body: r.body,
    }
}

fn refusal_from_wit(r: wit_endpoint::Refusal) -> ep::Refusal {
    ep::Refusal { code: r.code, message: r.message, key: r.key, reply: reply_from_wit(r.reply) }
}

fn state_to_wit(state: endpoint::SolveState<'_>) -> wit_endpoint::SolveState {
    match state {
        endpoint::SolveState::Pending => wit_endpoint::SolveState::Pending,
        endpoint::SolveState::Solved(s) => wit_endpoint::SolveState::Solved(solution_to_wit(s)),
        endpoint::SolveState::Failed(f) => wit_endpoint::SolveState::Failed(failure_to_wit(f)),
        endpoint::SolveState::NotFound => wit_endpoint::SolveState::NotFound,
    }
}

/// The component's endpoint interface behind the vectors' host interface.
struct WasmEndpoint(EngineInstance);

impl ep::EndpointHost for WasmEndpoint {
    fn read_format(&mut self, path: endpoint::Path, params: &[(&str, &str)]) -> endpoint::ReplyFormat {
        let path = match path {
            endpoint::Path::InPhp => wit_endpoint::EndpointPath::InPhp,
            endpoint::Path::ResPhp => wit_endpoint::EndpointPath::ResPhp,
        };
        let params: Vec<wit_endpoint::Param> = params
            .iter()
            .map(|(name, value)| wit_endpoint::Param { name: (*name).to_owned(), value: (*value).to_owned() })
            .collect();
        let f = self.0.read_format(path, &params).expect("no trap");
        endpoint::ReplyFormat { json: f.json, cors: f.cors }
    }

    fn read(&mut self, path: endpoint::Path, params: &[(&str, &str)], uploads: &[(&str, &[u8])]) -> ep::Read {
        let path = match path {
            endpoint::Path::InPhp => wit_endpoint::EndpointPath::InPhp,
            endpoint::Path::ResPhp => wit_endpoint::EndpointPath::ResPhp,
        };
        let params: Vec<wit_endpoint::Param> = params
            .iter()
            .map(|(name, value)| wit_endpoint::Param { name: (*name).to_owned(), value: (*value).to_owned() })
            .collect();
        let uploads: Vec<wit_endpoint::Upload> = uploads
            .iter()
            .map(|(name, bytes)| wit_endpoint::Upload { name: (*name).to_owned(), bytes: bytes.to_vec() })
            .collect();
        let format = |f: wit_endpoint::ReplyFormat| endpoint::ReplyFormat { json: f.json, cors: f.cors };
        match self.0.read_request(path, &params, &uploads).expect("no trap") {
            Ok(wit_endpoint::EndpointRequest::Submit(s)) => ep::Read::Submit {
                key: s.key,
                task_json: s.task_json,
                task_type: s.task_type,
                format: format(s.format),
            },
            Ok(wit_endpoint::EndpointRequest::Res(r)) => {
                let action = match r.action {
                    wit_endpoint::ResAction::Get(id) => endpoint::ResAction::Get(id),
                    wit_endpoint::ResAction::GetMany(ids) => endpoint::ResAction::GetMany(ids),
                    wit_endpoint::ResAction::ThreadsInfo => endpoint::ResAction::ThreadsInfo,
                    wit_endpoint::ResAction::Balance => endpoint::ResAction::Balance,
                    wit_endpoint::ResAction::ReportGood(id) => endpoint::ResAction::ReportGood(id),
                    wit_endpoint::ResAction::ReportBad(id) => endpoint::ResAction::ReportBad(id),
                };
                ep::Read::Res { key: r.key, action, format: format(r.format) }
            }
            Err(refusal) => ep::Read::Refused(refusal_from_wit(refusal)),
        }
    }

    fn render_submitted(&mut self, format: endpoint::ReplyFormat, task_type: &str, id: &str) -> ep::Reply {
        reply_from_wit(self.0.render_submitted(format_to_wit(format), task_type, id).expect("no trap"))
    }

    fn render_state(
        &mut self,
        format: endpoint::ReplyFormat,
        task_type: &str,
        state: endpoint::SolveState<'_>,
    ) -> ep::Reply {
        reply_from_wit(self.0.render_state(format_to_wit(format), task_type, &state_to_wit(state)).expect("no trap"))
    }

    fn render_states(&mut self, format: endpoint::ReplyFormat, states: &[endpoint::SolveState<'_>]) -> ep::Reply {
        let states: Vec<wit_endpoint::SolveState> = states.iter().map(|s| state_to_wit(*s)).collect();
        reply_from_wit(self.0.render_states(format_to_wit(format), &states).expect("no trap"))
    }

    fn render_threads(&mut self, format: endpoint::ReplyFormat, info: ThreadsInfo) -> ep::Reply {
        let info = wit::ThreadsInfo { threads: info.threads, working_threads: info.working_threads, free: info.free() };
        reply_from_wit(self.0.render_threads(format_to_wit(format), info).expect("no trap"))
    }

    fn render_balance(&mut self, format: endpoint::ReplyFormat, balance: f64) -> ep::Reply {
        reply_from_wit(self.0.render_balance(format_to_wit(format), balance).expect("no trap"))
    }

    fn render_reported(&mut self, format: endpoint::ReplyFormat) -> ep::Reply {
        reply_from_wit(self.0.render_reported(format_to_wit(format)).expect("no trap"))
    }

    fn render_failure(&mut self, format: endpoint::ReplyFormat, failure: &Failure) -> ep::Reply {
        reply_from_wit(self.0.render_failure(format_to_wit(format), &failure_to_wit(failure)).expect("no trap"))
    }

    fn render_refusal(&mut self, format: Option<endpoint::ReplyFormat>, refusal: endpoint::HostRefusal) -> ep::Refusal {
        let refusal = match refusal {
            endpoint::HostRefusal::UnknownKey => wit_endpoint::HostRefusal::UnknownKey,
            endpoint::HostRefusal::UnknownId => wit_endpoint::HostRefusal::UnknownId,
            endpoint::HostRefusal::Busy => wit_endpoint::HostRefusal::Busy,
            endpoint::HostRefusal::Disabled => wit_endpoint::HostRefusal::Disabled,
            endpoint::HostRefusal::TooLarge => wit_endpoint::HostRefusal::TooLarge,
        };
        refusal_from_wit(self.0.render_refusal(format.map(format_to_wit), refusal).expect("no trap"))
    }

    fn report_request(
        &mut self,
        key: &str,
        config: &captchaai_engine::Config,
        task_id: &str,
        good: bool,
    ) -> Result<captchaai_engine::HttpRequest, Failure> {
        let request = self.0.report_request(key, &config_to_wit(config), task_id, good).expect("no trap");
        let request = request.map_err(failure)?;
        let body = match request.body {
            wit::RequestBody::Form(text) => Body::Form(text.into()),
            wit::RequestBody::Multipart(bytes) => Body::Multipart(bytes),
        };
        assert_eq!(request.kind, wit::RequestKind::Report);
        let key = ApiKey::new(key).expect("a request was built, so the key is well-formed");
        Ok(captchaai_engine::HttpRequest::from_parts(
            request.id,
            RequestKind::Report,
            request.at,
            request.url,
            request.content_type,
            body,
            request.timeout_ms,
            &key,
        ))
    }

    fn parse_report(&mut self, reply: Result<(u16, &[u8]), TransportError>) -> Result<(), Failure> {
        let reply = match reply {
            Ok((status, body)) => Ok(wit::HttpResponse { status, body: String::from_utf8_lossy(body).into_owned() }),
            Err(TransportError::Timeout) => Err(wit::TransportError::Timeout),
            Err(TransportError::Connect) => Err(wit::TransportError::Connect),
            Err(TransportError::Broken) => Err(wit::TransportError::Broken),
            Err(other) => unreachable!("a transport error the WIT does not have: {other:?}"),
        };
        self.0.parse_report(&reply).expect("no trap").map_err(failure)
    }
}

#[test]
fn every_endpoint_case_gives_its_result_through_the_component() {
    let host = EngineHost::embedded(None).expect("the embedded engine component");
    let mut wasm = WasmEndpoint(host.instantiate(1 << 30).unwrap());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors/endpoint");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    assert!(files.len() >= 4, "found {} endpoint vectors", files.len());
    let mut cases = 0;
    for path in files {
        let vector = ep::EndpointVector::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for case in &vector.cases {
            cases += 1;
            let native = ep::run_case(&mut Native, &case.call);
            let through_wasm = ep::run_case(&mut wasm, &case.call);
            assert_eq!(through_wasm, native, "{} / {}: the .wasm and native results differ", vector.name, case.about);
            assert_eq!(through_wasm, case.result, "{} / {}: differs from the stored result", vector.name, case.about);
        }
    }
    assert!(cases >= 100, "found {cases} endpoint cases");
}
