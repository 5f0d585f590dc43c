//! The WebAssembly component: `wit/engine.wit` exported over the native engine. Conversions
//! only; every decision stays in the engine.

use std::cell::RefCell;

use crate::account::{self, Admission, ThreadGate, ThreadsInfo};
use crate::config::ConfigJson;
use crate::endpoint::{self, HostRefusal, Path, ReplyFormat, ResAction, SolveState};
use crate::{
    Answer, ApiKey, Body, Class, Config, Failure, Misuse, Origin, Output, RequestKind, RestoreError, Solution,
};
use crate::{HttpRequest, Solve, SolveTimes, SolveTimesError, Task, TransportError, WithKeyError};

wit_bindgen::generate!({
    world: "engine-component",
    path: "wit",
});

use exports::captchaai::engine::account as wit_account;
use exports::captchaai::engine::endpoint as wit_endpoint;
use exports::captchaai::engine::engine as wit_engine;
use exports::captchaai::engine::keyless as wit_keyless;
use exports::captchaai::engine::types as wit;

struct Component;

export!(Component);

// The component is single-threaded (no `atomics` target feature), which this allocator requires.
#[cfg(not(target_feature = "atomics"))]
#[global_allocator]
static ALLOCATOR: crate::pool::Pool<talc::wasm::WasmDynamicTalc> =
    crate::pool::Pool::new(talc::wasm::new_wasm_dynamic_allocator());

/// A solve behind the resource handle.
struct SolveResource(RefCell<Solve>);

/// A keyless solve behind the resource handle.
struct KeylessSolveResource(RefCell<Solve>);

/// A thread gate behind the resource handle.
struct GateResource(RefCell<ThreadGate>);

/// A solve-times model behind the resource handle.
struct SolveTimesResource(RefCell<SolveTimes>);

impl wit_engine::Guest for Component {
    type Solve = SolveResource;
    type SolveTimes = SolveTimesResource;

    fn is_fresh(solution: wit::Solution, now: u64, max_age_ms: u64) -> bool {
        solution_from_wit(solution).is_fresh(now, max_age_ms)
    }

    fn solution_json(solution: wit::Solution) -> String {
        solution_from_wit(solution).client_json()
    }

    fn check_config(config: wit::Config) -> Result<(), wit::Failure> {
        config_from_wit(config).check().map_err(|e| failure_to_wit(e.into()))
    }
}

impl wit_engine::GuestSolve for SolveResource {
    fn create(
        task_json: String,
        key: String,
        config: wit::Config,
        now: u64,
    ) -> Result<wit_engine::Solve, wit::Failure> {
        let config = config_from_wit(config);
        Solve::from_json(&task_json, &key, &config, now)
            .map(|solve| wit_engine::Solve::new(SolveResource(RefCell::new(solve))))
            .map_err(failure_to_wit)
    }

    fn create_with_times(
        task_json: String,
        key: String,
        config: wit::Config,
        now: u64,
        times: wit_engine::SolveTimesBorrow<'_>,
    ) -> Result<wit_engine::Solve, wit::Failure> {
        let config = config_from_wit(config);
        let times = times.get::<SolveTimesResource>().0.borrow();
        let solve = || -> Result<Solve, Failure> {
            let key = ApiKey::new(key)?;
            let task = Task::from_json(&task_json)?;
            Ok(Solve::with_solve_times(task, key, &config, &times, now)?)
        };
        solve().map(|solve| wit_engine::Solve::new(SolveResource(RefCell::new(solve)))).map_err(failure_to_wit)
    }

    fn restore(snapshot: String, key: String) -> Result<wit_engine::Solve, wit::RestoreError> {
        Solve::restore(&snapshot, &key)
            .map(|solve| wit_engine::Solve::new(SolveResource(RefCell::new(solve))))
            .map_err(restore_error_to_wit)
    }

    fn poll_output(&self, now: u64) -> Result<wit::Output, wit::Misuse> {
        self.0.borrow_mut().poll_output(now).map(output_to_wit).map_err(misuse_to_wit)
    }

    fn handle_response(
        &self,
        now: u64,
        request_id: u32,
        response: wit::HttpResponse,
    ) -> Result<wit::Output, wit::Misuse> {
        let mut solve = self.0.borrow_mut();
        solve
            .handle_response(now, request_id, response.status, response.body.as_bytes())
            .map(output_to_wit)
            .map_err(misuse_to_wit)
    }

    fn handle_transport_error(
        &self,
        now: u64,
        request_id: u32,
        error: wit::TransportError,
    ) -> Result<wit::Output, wit::Misuse> {
        let error = transport_from_wit(error);
        self.0.borrow_mut().handle_transport_error(now, request_id, error).map(output_to_wit).map_err(misuse_to_wit)
    }

    fn snapshot(&self) -> String {
        self.0.borrow().snapshot()
    }

    fn snapshot_base(&self) -> String {
        self.0.borrow().snapshot_base()
    }

    fn snapshot_state(&self) -> String {
        self.0.borrow().snapshot_state()
    }

    fn restore_parts(base: String, state: String, key: String) -> Result<wit_engine::Solve, wit::RestoreError> {
        Solve::restore_parts(&base, &state, &key)
            .map(|solve| wit_engine::Solve::new(SolveResource(RefCell::new(solve))))
            .map_err(restore_error_to_wit)
    }

    fn task_id(&self) -> Option<String> {
        self.0.borrow().task_id().map(str::to_owned)
    }

    fn deadline(&self) -> Option<u64> {
        self.0.borrow().deadline()
    }

    fn ends_by(&self) -> Option<u64> {
        self.0.borrow().ends_by()
    }

    fn task_type(&self) -> String {
        self.0.borrow().task().task_type().name().to_owned()
    }
}

impl wit_engine::GuestSolveTimes for SolveTimesResource {
    fn create(task_type: String) -> Result<wit_engine::SolveTimes, wit::SolveTimesError> {
        SolveTimes::new(&task_type).map(solve_times_to_wit).map_err(solve_times_error_to_wit)
    }

    fn from_text(text: String) -> Result<wit_engine::SolveTimes, wit::SolveTimesError> {
        text.parse::<SolveTimes>().map(solve_times_to_wit).map_err(solve_times_error_to_wit)
    }

    fn to_text(&self) -> String {
        self.0.borrow().to_string()
    }

    fn task_type(&self) -> String {
        self.0.borrow().task_type().to_owned()
    }

    fn observations(&self) -> u32 {
        self.0.borrow().observations()
    }

    fn observe(&self, solution: wit::Solution) -> bool {
        self.0.borrow_mut().observe(&solution_from_wit(solution))
    }

    fn first_wait_ms(&self) -> Option<u64> {
        self.0.borrow().first_wait_ms()
    }

    fn quantile_ms(&self, permille: u32) -> Option<u64> {
        self.0.borrow().quantile_ms(u64::from(permille))
    }

    fn min_observations() -> u32 {
        SolveTimes::min_observations()
    }
}

impl wit_keyless::Guest for Component {
    type KeylessSolve = KeylessSolveResource;

    fn with_key(
        request: wit_keyless::KeylessRequest,
        key: String,
    ) -> Result<wit::HttpRequest, wit_keyless::WithKeyError> {
        let key = ApiKey::new(key).map_err(|e| wit_keyless::WithKeyError::InvalidKey(e.message))?;
        let wit_keyless::KeylessRequest { id, kind, at, url, content_type, body, timeout_ms } = request;
        HttpRequest::keyless_from_parts(id, kind_from_wit(kind), at, url, content_type, body_from_wit(body), timeout_ms)
            .and_then(|keyless| keyless.with_key(&key))
            .map(request_to_wit)
            .map_err(|WithKeyError::NotKeyless| wit_keyless::WithKeyError::NotKeyless)
    }

    fn without_key(response: wit::HttpResponse, key: String) -> wit::HttpResponse {
        // A malformed key cannot have been sent, so it is in no reply: nothing to remove.
        let body = match ApiKey::new(&key) {
            Ok(key) => key.redact(&response.body).into_owned(),
            Err(_) => response.body,
        };
        wit::HttpResponse { status: response.status, body }
    }
}

impl wit_keyless::GuestKeylessSolve for KeylessSolveResource {
    fn create(task_json: String, config: wit::Config, now: u64) -> Result<wit_keyless::KeylessSolve, wit::Failure> {
        Solve::keyless_from_json(&task_json, &config_from_wit(config), now)
            .map(keyless_solve_to_wit)
            .map_err(failure_to_wit)
    }

    fn create_with_times(
        task_json: String,
        config: wit::Config,
        now: u64,
        times: wit_engine::SolveTimesBorrow<'_>,
    ) -> Result<wit_keyless::KeylessSolve, wit::Failure> {
        let config = config_from_wit(config);
        let times = times.get::<SolveTimesResource>().0.borrow();
        let solve = || -> Result<Solve, Failure> {
            let task = Task::from_json(&task_json)?;
            Ok(Solve::keyless_with_solve_times(task, &config, &times, now)?)
        };
        solve().map(keyless_solve_to_wit).map_err(failure_to_wit)
    }

    fn restore(snapshot: String) -> Result<wit_keyless::KeylessSolve, wit::RestoreError> {
        Solve::restore_keyless(&snapshot).map(keyless_solve_to_wit).map_err(restore_error_to_wit)
    }

    fn poll_output(&self, now: u64) -> Result<wit_keyless::KeylessOutput, wit::Misuse> {
        self.0.borrow_mut().poll_output(now).map(keyless_output_to_wit).map_err(misuse_to_wit)
    }

    fn handle_response(
        &self,
        now: u64,
        request_id: u32,
        response: wit::HttpResponse,
    ) -> Result<wit_keyless::KeylessOutput, wit::Misuse> {
        let mut solve = self.0.borrow_mut();
        solve
            .handle_response(now, request_id, response.status, response.body.as_bytes())
            .map(keyless_output_to_wit)
            .map_err(misuse_to_wit)
    }

    fn handle_transport_error(
        &self,
        now: u64,
        request_id: u32,
        error: wit::TransportError,
    ) -> Result<wit_keyless::KeylessOutput, wit::Misuse> {
        let error = transport_from_wit(error);
        self.0
            .borrow_mut()
            .handle_transport_error(now, request_id, error)
            .map(keyless_output_to_wit)
            .map_err(misuse_to_wit)
    }

    fn snapshot(&self) -> String {
        self.0.borrow().snapshot()
    }

    fn task_id(&self) -> Option<String> {
        self.0.borrow().task_id().map(str::to_owned)
    }

    fn deadline(&self) -> Option<u64> {
        self.0.borrow().deadline()
    }

    fn ends_by(&self) -> Option<u64> {
        self.0.borrow().ends_by()
    }

    fn task_type(&self) -> String {
        self.0.borrow().task().task_type().name().to_owned()
    }
}

fn keyless_solve_to_wit(solve: Solve) -> wit_keyless::KeylessSolve {
    wit_keyless::KeylessSolve::new(KeylessSolveResource(RefCell::new(solve)))
}

fn keyless_output_to_wit(o: Output) -> wit_keyless::KeylessOutput {
    match o {
        Output::Send(r) => {
            let wit::HttpRequest { id, kind, at, url, content_type, body, timeout_ms } = request_to_wit(r);
            wit_keyless::KeylessOutput::Send(wit_keyless::KeylessRequest {
                id,
                kind,
                at,
                url,
                content_type,
                body,
                timeout_ms,
            })
        }
        Output::Solved(s) => wit_keyless::KeylessOutput::Solved(solution_to_wit(s)),
        Output::Failed(f) => wit_keyless::KeylessOutput::Failed(failure_to_wit(f)),
    }
}

fn kind_from_wit(kind: wit::RequestKind) -> RequestKind {
    match kind {
        wit::RequestKind::Submit => RequestKind::Submit,
        wit::RequestKind::Poll => RequestKind::Poll,
        wit::RequestKind::ThreadsInfo => RequestKind::ThreadsInfo,
        wit::RequestKind::Balance => RequestKind::Balance,
        wit::RequestKind::Report => RequestKind::Report,
    }
}

fn body_from_wit(body: wit::RequestBody) -> Body {
    match body {
        wit::RequestBody::Form(text) => Body::Form(text.into()),
        wit::RequestBody::Multipart(bytes) => Body::Multipart(bytes),
    }
}

fn solve_times_to_wit(times: SolveTimes) -> wit_engine::SolveTimes {
    wit_engine::SolveTimes::new(SolveTimesResource(RefCell::new(times)))
}

fn solve_times_error_to_wit(e: SolveTimesError) -> wit::SolveTimesError {
    match e {
        SolveTimesError::Malformed(m) => wit::SolveTimesError::Malformed(m),
        SolveTimesError::Foreign => wit::SolveTimesError::Foreign,
        SolveTimesError::UnsupportedVersion(v) => wit::SolveTimesError::UnsupportedVersion(v),
        SolveTimesError::Invalid(m) => wit::SolveTimesError::Invalid(m),
    }
}

impl wit_account::Guest for Component {
    type ThreadGate = GateResource;

    fn threads_info_request(key: String, config: wit::Config) -> Result<wit::HttpRequest, wit::Failure> {
        let key = ApiKey::new(key).map_err(|e| failure_to_wit(e.into()))?;
        account::threads_info_request(&key, &config_from_wit(config))
            .map(request_to_wit)
            .map_err(|e| failure_to_wit(e.into()))
    }

    fn parse_threads_info(reply: wit::Reply) -> Result<wit::ThreadsInfo, wit::Failure> {
        let response = reply.map_err(|e| account::transport_failure(RequestKind::ThreadsInfo, transport_from_wit(e)));
        response
            .and_then(|r| account::parse_threads_info(r.status, r.body.as_bytes()))
            .map(|info| wit::ThreadsInfo {
                threads: info.threads,
                working_threads: info.working_threads,
                free: info.free(),
            })
            .map_err(failure_to_wit)
    }

    fn balance_request(key: String, config: wit::Config) -> Result<wit::HttpRequest, wit::Failure> {
        let key = ApiKey::new(key).map_err(|e| failure_to_wit(e.into()))?;
        account::balance_request(&key, &config_from_wit(config))
            .map(request_to_wit)
            .map_err(|e| failure_to_wit(e.into()))
    }

    fn parse_balance(reply: wit::Reply) -> Result<f64, wit::Failure> {
        let response = reply.map_err(|e| account::transport_failure(RequestKind::Balance, transport_from_wit(e)));
        response.and_then(|r| account::parse_balance(r.status, r.body.as_bytes())).map_err(failure_to_wit)
    }
}

impl wit_account::GuestThreadGate for GateResource {
    fn create(plan_threads: u64, reserve: u64) -> Result<wit_account::ThreadGate, wit::Failure> {
        ThreadGate::new(plan_threads, reserve)
            .map(|gate| wit_account::ThreadGate::new(GateResource(RefCell::new(gate))))
            .map_err(|e| failure_to_wit(e.into()))
    }

    fn enter(&self) -> (u64, wit::Admission) {
        let (ticket, admission) = self.0.borrow_mut().enter();
        (ticket, admission_to_wit(admission))
    }

    fn admission(&self, ticket: u64) -> Option<wit::Admission> {
        self.0.borrow().admission(ticket).ok().map(admission_to_wit)
    }

    fn leave(&self, ticket: u64) -> Option<Vec<u64>> {
        self.0.borrow_mut().leave(ticket).ok()
    }

    fn set_plan(&self, plan_threads: u64) -> Result<Vec<u64>, wit::Failure> {
        self.0.borrow_mut().set_plan(plan_threads).map_err(|e| failure_to_wit(e.into()))
    }

    fn capacity(&self) -> u64 {
        self.0.borrow().capacity()
    }

    fn running(&self) -> u64 {
        self.0.borrow().running() as u64
    }

    fn queued(&self) -> u64 {
        self.0.borrow().queued() as u64
    }
}

impl wit_endpoint::Guest for Component {
    fn read_request(
        path: wit_endpoint::EndpointPath,
        params: Vec<wit_endpoint::Param>,
        uploads: Vec<wit_endpoint::Upload>,
    ) -> Result<wit_endpoint::EndpointRequest, wit_endpoint::Refusal> {
        let path = match path {
            wit_endpoint::EndpointPath::InPhp => Path::InPhp,
            wit_endpoint::EndpointPath::ResPhp => Path::ResPhp,
        };
        let params: Vec<(&str, &str)> = params.iter().map(|p| (p.name.as_str(), p.value.as_str())).collect();
        let uploads: Vec<(&str, &[u8])> = uploads.iter().map(|u| (u.name.as_str(), u.bytes.as_slice())).collect();
        match endpoint::read(path, &params, &uploads) {
            Ok(endpoint::Request::Submit(s)) => {
                Ok(wit_endpoint::EndpointRequest::Submit(wit_endpoint::SubmitRequest {
                    key: s.key,
                    task_json: serde_json::to_string(&s.task).unwrap_or_default(),
                    task_type: s.task.task_type().name().to_owned(),
                    format: format_to_wit(s.format),
                }))
            }
            Ok(endpoint::Request::Res(r)) => Ok(wit_endpoint::EndpointRequest::Res(wit_endpoint::ResRequest {
                key: r.key,
                action: match r.action {
                    ResAction::Get(id) => wit_endpoint::ResAction::Get(id),
                    ResAction::GetMany(ids) => wit_endpoint::ResAction::GetMany(ids),
                    ResAction::ThreadsInfo => wit_endpoint::ResAction::ThreadsInfo,
                    ResAction::Balance => wit_endpoint::ResAction::Balance,
                    ResAction::ReportGood(id) => wit_endpoint::ResAction::ReportGood(id),
                    ResAction::ReportBad(id) => wit_endpoint::ResAction::ReportBad(id),
                },
                format: format_to_wit(r.format),
            })),
            Err(refusal) => Err(refusal_to_wit(refusal)),
        }
    }

    fn read_format(path: wit_endpoint::EndpointPath, params: Vec<wit_endpoint::Param>) -> wit_endpoint::ReplyFormat {
        let path = match path {
            wit_endpoint::EndpointPath::InPhp => Path::InPhp,
            wit_endpoint::EndpointPath::ResPhp => Path::ResPhp,
        };
        let params: Vec<(&str, &str)> = params.iter().map(|p| (p.name.as_str(), p.value.as_str())).collect();
        format_to_wit(endpoint::read_format(path, &params))
    }

    fn render_submitted(
        format: wit_endpoint::ReplyFormat,
        task_type: String,
        id: String,
    ) -> wit_endpoint::EndpointReply {
        reply_to_wit(endpoint::render_submitted(format_from_wit(format), &task_type, &id))
    }

    fn render_state(
        format: wit_endpoint::ReplyFormat,
        task_type: String,
        state: wit_endpoint::SolveState,
    ) -> wit_endpoint::EndpointReply {
        let state = NativeState::from(state);
        reply_to_wit(endpoint::render_state(format_from_wit(format), &task_type, state.borrow()))
    }

    fn render_states(
        format: wit_endpoint::ReplyFormat,
        states: Vec<wit_endpoint::SolveState>,
    ) -> wit_endpoint::EndpointReply {
        let states: Vec<NativeState> = states.into_iter().map(NativeState::from).collect();
        let states: Vec<SolveState<'_>> = states.iter().map(NativeState::borrow).collect();
        reply_to_wit(endpoint::render_states(format_from_wit(format), &states))
    }

    fn render_threads(format: wit_endpoint::ReplyFormat, info: wit::ThreadsInfo) -> wit_endpoint::EndpointReply {
        let info = ThreadsInfo { threads: info.threads, working_threads: info.working_threads };
        reply_to_wit(endpoint::render_threads(format_from_wit(format), &info))
    }

    fn render_balance(format: wit_endpoint::ReplyFormat, balance: f64) -> wit_endpoint::EndpointReply {
        reply_to_wit(endpoint::render_balance(format_from_wit(format), balance))
    }

    fn render_reported(format: wit_endpoint::ReplyFormat) -> wit_endpoint::EndpointReply {
        reply_to_wit(endpoint::render_reported(format_from_wit(format)))
    }

    fn render_failure(format: wit_endpoint::ReplyFormat, failure: wit::Failure) -> wit_endpoint::EndpointReply {
        reply_to_wit(endpoint::render_failure(format_from_wit(format), &failure_from_wit(failure)))
    }

    fn render_refusal(
        format: Option<wit_endpoint::ReplyFormat>,
        refusal: wit_endpoint::HostRefusal,
    ) -> wit_endpoint::Refusal {
        let refusal = match refusal {
            wit_endpoint::HostRefusal::UnknownKey => HostRefusal::UnknownKey,
            wit_endpoint::HostRefusal::UnknownId => HostRefusal::UnknownId,
            wit_endpoint::HostRefusal::Busy => HostRefusal::Busy,
            wit_endpoint::HostRefusal::Disabled => HostRefusal::Disabled,
            wit_endpoint::HostRefusal::TooLarge => HostRefusal::TooLarge,
        };
        refusal_to_wit(endpoint::render_refusal(format.map(format_from_wit), refusal))
    }

    fn report_request(
        key: String,
        config: wit::Config,
        task_id: String,
        good: bool,
    ) -> Result<wit::HttpRequest, wit::Failure> {
        let key = ApiKey::new(key).map_err(|e| failure_to_wit(e.into()))?;
        endpoint::report_request(&key, &config_from_wit(config), &task_id, good)
            .map(request_to_wit)
            .map_err(|e| failure_to_wit(e.into()))
    }

    fn parse_report(reply: wit::Reply) -> Result<(), wit::Failure> {
        let response = reply.map_err(|e| endpoint::report_transport_failure(transport_from_wit(e)));
        response.and_then(|r| endpoint::parse_report(r.status, r.body.as_bytes())).map_err(failure_to_wit)
    }
}

/// A WIT solve state with its solution or failure as native values.
enum NativeState {
    Pending,
    Solved(Solution),
    Failed(Failure),
    NotFound,
}

impl From<wit_endpoint::SolveState> for NativeState {
    fn from(state: wit_endpoint::SolveState) -> NativeState {
        match state {
            wit_endpoint::SolveState::Pending => NativeState::Pending,
            wit_endpoint::SolveState::Solved(s) => NativeState::Solved(solution_from_wit(s)),
            wit_endpoint::SolveState::Failed(f) => NativeState::Failed(failure_from_wit(f)),
            wit_endpoint::SolveState::NotFound => NativeState::NotFound,
        }
    }
}

impl NativeState {
    fn borrow(&self) -> SolveState<'_> {
        match self {
            NativeState::Pending => SolveState::Pending,
            NativeState::Solved(s) => SolveState::Solved(s),
            NativeState::Failed(f) => SolveState::Failed(f),
            NativeState::NotFound => SolveState::NotFound,
        }
    }
}

fn format_to_wit(f: ReplyFormat) -> wit_endpoint::ReplyFormat {
    wit_endpoint::ReplyFormat { json: f.json, cors: f.cors }
}

fn format_from_wit(f: wit_endpoint::ReplyFormat) -> ReplyFormat {
    ReplyFormat { json: f.json, cors: f.cors }
}

fn reply_to_wit(r: endpoint::Reply) -> wit_endpoint::EndpointReply {
    wit_endpoint::EndpointReply {
        status: r.status,
        content_type: r.content_type.to_owned(),
        headers: r
            .headers
            .into_iter()
            .map(|(name, value)| wit_endpoint::Header { name: name.to_owned(), value: value.to_owned() })
            .collect(),
        body: r.body,
    }
}

fn refusal_to_wit(r: endpoint::Refusal) -> wit_endpoint::Refusal {
    let reply = reply_to_wit(r.reply());
    wit_endpoint::Refusal { code: r.code.to_owned(), message: r.message, key: r.key, reply }
}

/// The native failure of a WIT one (its origin follows from its code).
fn failure_from_wit(f: wit::Failure) -> Failure {
    let class = match f.class {
        wit::FailureClass::Permanent => Class::Permanent,
        wit::FailureClass::Transient => Class::Transient,
        wit::FailureClass::Unsolvable => Class::Unsolvable,
    };
    Failure {
        code: f.code,
        class,
        message: f.message,
        retry_after_ms: f.retry_after_ms,
        field: f.field,
        task_id: f.task_id.map(Into::into),
    }
}

fn config_from_wit(c: wit::Config) -> Config {
    ConfigJson {
        base_url: c.base_url,
        request_timeout_ms: c.request_timeout_ms,
        deadline_ms: c.deadline_ms,
        initial_wait_ms: c.initial_wait_ms,
        poll_interval_ms: c.poll_interval_ms,
        max_submit_retries: c.max_submit_retries,
        max_poll_errors: c.max_poll_errors,
        unsolvable_retries: c.unsolvable_retries,
        jitter_seed: c.jitter_seed,
        max_jitter_ms: c.max_jitter_ms,
        poll_cost_ms: c.poll_cost_ms,
    }
    .into()
}

fn class_to_wit(class: Class) -> wit::FailureClass {
    match class {
        Class::Permanent => wit::FailureClass::Permanent,
        Class::Transient => wit::FailureClass::Transient,
        Class::Unsolvable => wit::FailureClass::Unsolvable,
    }
}

fn transport_from_wit(error: wit::TransportError) -> TransportError {
    match error {
        wit::TransportError::Timeout => TransportError::Timeout,
        wit::TransportError::Connect => TransportError::Connect,
        wit::TransportError::Broken => TransportError::Broken,
    }
}

fn failure_to_wit(f: Failure) -> wit::Failure {
    let origin = match f.origin() {
        Origin::Input => wit::FailureOrigin::Input,
        Origin::Service => wit::FailureOrigin::Service,
        Origin::NoAnswer => wit::FailureOrigin::NoAnswer,
    };
    wit::Failure {
        code: f.code,
        class: class_to_wit(f.class),
        origin,
        message: f.message,
        retry_after_ms: f.retry_after_ms,
        field: f.field,
        task_id: f.task_id.map(|id| id.to_string()),
    }
}

fn request_to_wit(r: HttpRequest) -> wit::HttpRequest {
    let kind = match r.kind {
        RequestKind::Submit => wit::RequestKind::Submit,
        RequestKind::Poll => wit::RequestKind::Poll,
        RequestKind::ThreadsInfo => wit::RequestKind::ThreadsInfo,
        RequestKind::Balance => wit::RequestKind::Balance,
        RequestKind::Report => wit::RequestKind::Report,
    };
    let body = match r.body {
        // `String::from(&str)` copies; `to_string()` on an `Arc<str>` goes through `Display`
        // (~250 more guest instructions per request).
        Body::Form(text) => wit::RequestBody::Form(String::from(&*text)),
        Body::Multipart(bytes) => wit::RequestBody::Multipart(bytes),
    };
    wit::HttpRequest {
        id: r.id,
        kind,
        at: r.at,
        url: String::from(&*r.url),
        content_type: r.content_type.into_owned(),
        body,
        timeout_ms: r.timeout_ms,
    }
}

fn answer_to_wit(a: Answer) -> wit::Answer {
    match a {
        Answer::Text(s) => wit::Answer::Text(s.to_string()),
        Answer::Json(s) => wit::Answer::Json(s.to_string()),
    }
}

fn solution_to_wit(s: Solution) -> wit::Solution {
    wit::Solution {
        answer: answer_to_wit(s.answer),
        user_agent: s.user_agent,
        task_id: s.task_id.map(|id| id.to_string()),
        submitted_at: s.submitted_at,
        solved_at: s.solved_at,
        elapsed_ms: s.elapsed_ms,
        polls: s.polls,
        attempts: s.attempts,
        expires_at: s.expires_at,
    }
}

fn solution_from_wit(s: wit::Solution) -> Solution {
    Solution {
        answer: match s.answer {
            wit::Answer::Text(t) => Answer::Text(t.into()),
            wit::Answer::Json(j) => Answer::Json(j.into()),
        },
        user_agent: s.user_agent,
        task_id: s.task_id.map(Into::into),
        submitted_at: s.submitted_at,
        solved_at: s.solved_at,
        elapsed_ms: s.elapsed_ms,
        polls: s.polls,
        attempts: s.attempts,
        expires_at: s.expires_at,
    }
}

fn output_to_wit(o: Output) -> wit::Output {
    match o {
        Output::Send(r) => wit::Output::Send(request_to_wit(r)),
        Output::Solved(s) => wit::Output::Solved(solution_to_wit(s)),
        Output::Failed(f) => wit::Output::Failed(failure_to_wit(f)),
    }
}

fn misuse_to_wit(m: Misuse) -> wit::Misuse {
    match m {
        Misuse::TimeWentBackwards { last, .. } => wit::Misuse::TimeWentBackwards(last),
        Misuse::UnknownRequest { request_id } => wit::Misuse::UnknownRequest(request_id),
        Misuse::StaleResponse { request_id } => wit::Misuse::StaleResponse(request_id),
        Misuse::NotDue { at, .. } => wit::Misuse::NotDue(at),
    }
}

fn restore_error_to_wit(e: RestoreError) -> wit::RestoreError {
    match e {
        RestoreError::Malformed(m) => wit::RestoreError::Malformed(m),
        RestoreError::Truncated => wit::RestoreError::Truncated,
        RestoreError::Foreign => wit::RestoreError::Foreign,
        RestoreError::UnsupportedVersion(v) => wit::RestoreError::UnsupportedVersion(v),
        RestoreError::Invalid(m) => wit::RestoreError::Invalid(m),
        RestoreError::Key(e) => wit::RestoreError::InvalidKey(e.message),
    }
}

fn admission_to_wit(a: Admission) -> wit::Admission {
    match a {
        Admission::Admitted => wit::Admission::Admitted,
        Admission::Queued { position } => wit::Admission::Queued(position),
    }
}
