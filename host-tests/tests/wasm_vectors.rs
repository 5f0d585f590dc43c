//! Every golden vector replayed through the engine .wasm in wasmtime gives exactly the native
//! transcript (and the stored one); a vector with a solve-times model is created with it through
//! the component (`solve-times.from-text`, `solve.create-with-times`), and the model after it
//! observed the solution is the native and the stored one, byte for byte.

use std::path::PathBuf;

use captchaai::{self as wit, EngineHost, EngineInstance, ResourceAny};
use captchaai_engine::{ApiKey, Body, Class, Failure, Misuse, Origin, Output, RequestKind, Solution, TransportError};
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

/// The native failure; the WIT's `origin` must be the one the native code table gives.
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
    let failure = Failure {
        code: f.code,
        class,
        message: f.message,
        retry_after_ms: f.retry_after_ms,
        field: f.field,
        task_id: f.task_id.map(Into::into),
    };
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
        let native = Solution {
            answer: match s.answer {
                wit::Answer::Text(t) => captchaai_engine::Answer::Text(t.into()),
                wit::Answer::Json(j) => captchaai_engine::Answer::Json(j.into()),
            },
            user_agent: s.user_agent,
            task_id: s.task_id.map(Into::into),
            submitted_at: s.submitted_at,
            solved_at: s.solved_at,
            elapsed_ms: s.elapsed_ms,
            polls: s.polls,
            attempts: s.attempts,
            expires_at: s.expires_at,
        };
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
