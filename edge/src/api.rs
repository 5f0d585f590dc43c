//! The HTTP API: routing, authentication, limits, and rendering the engine's outcomes as
//! responses. Errors are JSON `{code, class, message, retry_after_s}` (plus `field`, `id`):
//!
//! | status | when | class |
//! |---|---|---|
//! | 400 | a body that is not UTF-8, a bad `wait`, or any engine failure whose origin is `input` (malformed task JSON, a bad field: `field` names it) | permanent |
//! | 401 | missing or wrong bearer token | permanent |
//! | 404 | unknown route or solve id | permanent |
//! | 405 | wrong method for the route | permanent |
//! | 410 | the solve's token was already handed out | permanent |
//! | 413 | body over 2 MiB | permanent |
//! | 422 | an engine failure of class `permanent` or `unsolvable` (CaptchaAI refused the task or account, or gave up) | permanent / unsolvable |
//! | 503 | an engine failure of class `transient`; `Retry-After` from its `retry-after-ms` | transient |
//! | 500 | a deployment problem (a missing variable, the key-value store) | transient |
//!
//! The edge reads only an engine failure's `origin`, `class` and `retry-after-ms` (and passes its
//! code, message and field through); it knows no engine code.

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};
use spin_sdk::http::{FullBody, Request};
use subtle::ConstantTimeEq;

use crate::drive::{self, Progress, now_ms};
use crate::engine::{self, Failure, FailureClass, FailureOrigin, Solution, Solve};
use crate::kv::{Kv, Swapped};
use crate::request::{self, Route};
use crate::settings::{DEFAULT_WAIT_S, MAX_BODY_BYTES, MAX_WAIT_S, RESULT_RETENTION_MS, Settings};
use crate::store::{self, Lease, SolveRecord, StoredResult};
use crate::{budget, metrics, sweep};

type Response = http::Response<FullBody<Bytes>>;

/// An error response.
struct Reject {
    status: StatusCode,
    code: String,
    class: &'static str,
    message: String,
    field: Option<String>,
    retry_after_s: Option<u64>,
    /// `Allow` on 405.
    allow: Option<&'static str>,
}

impl Reject {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Reject {
        Reject {
            status,
            code: code.to_owned(),
            class: "permanent",
            message: message.into(),
            field: None,
            retry_after_s: None,
            allow: None,
        }
    }

    fn internal(error: anyhow::Error) -> Reject {
        // Messages of internal errors are logged, not returned: they may describe the deployment.
        eprintln!("edge: internal error: {error:#}");
        Reject {
            class: "transient",
            retry_after_s: Some(5),
            ..Reject::new(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "the gateway failed; try again")
        }
    }

    /// An engine failure as an error: the status from its origin (`input`: 400) and class
    /// (`permanent`, `unsolvable`: 422; `transient`: 503), the retry hint from its
    /// `retry-after-ms`; code, message and field pass through as the engine wrote them.
    fn from_failure(failure: Failure) -> Reject {
        let status = match (failure.origin, failure.class) {
            (FailureOrigin::Input, _) => StatusCode::BAD_REQUEST,
            (_, FailureClass::Permanent | FailureClass::Unsolvable) => StatusCode::UNPROCESSABLE_ENTITY,
            (_, FailureClass::Transient) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let class = match failure.class {
            FailureClass::Permanent => "permanent",
            FailureClass::Transient => "transient",
            FailureClass::Unsolvable => "unsolvable",
        };
        Reject {
            status,
            code: failure.code,
            class,
            message: failure.message,
            field: failure.field,
            retry_after_s: failure.retry_after_ms.map(|ms| ms.div_ceil(1_000)),
            allow: None,
        }
    }

    /// The status and JSON body of the error response.
    fn render(self, id: Option<&str>) -> (StatusCode, Value) {
        let mut body = json!({
            "code": self.code,
            "class": self.class,
            "message": self.message,
            "retry_after_s": self.retry_after_s,
        });
        if let Some(field) = self.field {
            body["field"] = field.into();
        }
        if let Some(id) = id {
            body["id"] = id.into();
        }
        (self.status, body)
    }

    fn into_response(self, id: Option<&str>) -> Response {
        let allow = self.allow;
        let (status, body) = self.render(id);
        let mut response = error_response(status, &body);
        if let Some(allow) = allow {
            response.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

/// An error response from its status and rendered body: `Retry-After` from `retry_after_s`,
/// `WWW-Authenticate` on 401.
fn error_response(status: StatusCode, body: &Value) -> Response {
    let mut response = json_response(status, body);
    if let Some(seconds) = body["retry_after_s"].as_u64() {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = http::Response::new(FullBody::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Handles one request; never fails (every problem is a JSON error response).
pub async fn handle(request: Request) -> Response {
    let started = now_ms();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let (response, id) = match route(request).await {
        Ok((response, id)) => (response, id),
        Err((reject, id)) => (reject.into_response(id.as_deref()), id),
    };
    // Logs carry no key, token, answer or query string.
    let id = id.map(|id| format!(" id={id}")).unwrap_or_default();
    eprintln!(
        "edge: {method} {} -> {} in {} ms{id}",
        request::route(&path).name(),
        response.status().as_u16(),
        now_ms().saturating_sub(started)
    );
    response
}

type Routed = Result<(Response, Option<String>), (Reject, Option<String>)>;

/// 405 with the methods the route takes in `Allow`.
fn wrong_method(allow: &'static str) -> Routed {
    let mut reject = Reject::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "method not allowed here");
    reject.allow = Some(allow);
    Err((reject, None))
}

async fn route(request: Request) -> Routed {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let not_found = |message| Err((Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", message), None));
    let route = request::route(&path);
    match route {
        Route::Healthz => {
            return match method {
                Method::GET | Method::HEAD => Ok((json_response(StatusCode::OK, &json!({"status": "ok"})), None)),
                _ => wrong_method("GET, HEAD"),
            };
        }
        Route::Other if !path.starts_with("/v1/") => return not_found("no such route"),
        _ => {}
    }
    let settings = Settings::load().await.map_err(|e| (Reject::internal(e), None))?;
    if route == Route::Metrics {
        authenticate(
            &request,
            settings
                .metrics_token
                .as_slice()
                .iter()
                .chain(settings.metrics_token.is_none().then_some(&settings.client_tokens).into_iter().flatten()),
        )
        .map_err(|r| (r, None))?;
        return match method {
            Method::GET | Method::HEAD => metrics_page(&settings).await.map(|r| (r, None)).map_err(|r| (r, None)),
            _ => wrong_method("GET, HEAD"),
        };
    }
    authenticate(&request, settings.client_tokens.iter()).map_err(|r| (r, None))?;
    let wait = request::wait_seconds(request.uri().query(), DEFAULT_WAIT_S, MAX_WAIT_S).ok_or_else(|| {
        let message = format!("`wait` must be whole seconds from 0 to {MAX_WAIT_S}");
        let reject = Reject::new(StatusCode::BAD_REQUEST, "INVALID_WAIT", message);
        (Reject { field: Some("wait".into()), ..reject }, None)
    })?;
    let kv = Kv::open().map_err(|e| (Reject::internal(e), None))?;
    match (route, method) {
        (Route::Solves, Method::POST) => start(request, &kv, &settings, wait).await,
        (Route::Solves, _) => wrong_method("POST"),
        (Route::Threads, Method::GET | Method::HEAD) => {
            threads(&kv, &settings).await.map(|r| (r, None)).map_err(|r| (r, None))
        }
        (Route::Threads, _) => wrong_method("GET, HEAD"),
        (Route::UnknownSolve, _) => not_found("no such solve"),
        (Route::Solve(id), Method::GET | Method::HEAD) => resume(id, &kv, &settings, wait).await,
        (Route::Solve(id), Method::DELETE) => delete(id, &kv),
        (Route::Solve(_), _) => wrong_method("GET, HEAD, DELETE"),
        _ => not_found("no such route"),
    }
}

/// A bounded sweep of what expired: every request that writes or finds nothing runs one (a
/// 202 or a stored result answered from the record alone does not), so every solve created
/// pays for the removal of at least [`sweep::PER_REQUEST`] expired ones.
fn sweep_some(kv: &Kv) {
    if let Err(e) = sweep::run(kv) {
        eprintln!("edge: sweep: {e:#}");
    }
}

/// Checks `Authorization: Bearer <token>` against every accepted token in constant time.
fn authenticate<'a>(request: &Request, accepted: impl Iterator<Item = &'a String>) -> Result<(), Reject> {
    let header = request.headers().get(http::header::AUTHORIZATION).map(HeaderValue::as_bytes);
    let mut matched = subtle::Choice::from(0);
    if let Some(presented) = request::bearer_token(header) {
        for token in accepted {
            matched |= token.as_bytes().ct_eq(presented);
        }
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(Reject::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "a valid `Authorization: Bearer <token>` is required",
        ))
    }
}

/// 128 random bits as 32 lowercase hex characters (solve ids, lease holders, record revisions).
pub fn new_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub fn random_u64() -> anyhow::Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    Ok(u64::from_le_bytes(bytes))
}

/// The lease a request takes for a wait ending at `wait_until`: its last upstream request
/// starts by then (plus [`PREPARE_MS`] for the key-value work and plan lookup before a send, so
/// even `wait=0` sends a request that is due) and ends within the upstream timeout.
fn lease_until(settings: &Settings, wait_until: u64) -> u64 {
    wait_until + PREPARE_MS + settings.upstream_timeout_ms + drive::LEASE_MARGIN_MS
}

/// Time a request may spend before its first upstream send (lease, plan lookup, thread slot), ms.
const PREPARE_MS: u64 = 2_000;

/// `POST /v1/solve`: validates the task (nothing is sent for a bad one), stores it once
/// (`snapshot-base`) and drives the solve for up to `wait` seconds.
async fn start(request: Request, kv: &Kv, settings: &Settings, wait: u64) -> Routed {
    let too_large = || {
        (
            Reject::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("the body is over {MAX_BODY_BYTES} bytes"),
            ),
            None,
        )
    };
    let declared =
        request::declared_length(request.headers().get(http::header::CONTENT_LENGTH).map(HeaderValue::as_bytes));
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    // Read at most the limit, whatever the body claims (chunked bodies have no length).
    let limited = http_body_util::Limited::new(request.into_body(), MAX_BODY_BYTES);
    let body = match http_body_util::BodyExt::collect(limited).await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => return Err(too_large()),
        Err(e) => return Err((Reject::internal(anyhow::anyhow!("reading the body: {e}")), None)),
    };
    let task = std::str::from_utf8(&body)
        .map_err(|_| (Reject::new(StatusCode::BAD_REQUEST, "INVALID_BODY", "the body must be UTF-8 JSON"), None))?;
    let now = now_ms();
    sweep_some(kv);
    let solve = Solve::create(task, &settings.api_key, &settings.config, now).map_err(|f| {
        metrics::failed(kv, f.class, f.origin);
        (Reject::from_failure(f), None)
    })?;
    let id = new_id().map_err(|e| (Reject::internal(e), None))?;
    let internal = |e: anyhow::Error| (Reject::internal(e), Some(id.clone()));
    let holder = new_id().map_err(internal)?;
    let wait_until = now + wait * 1_000;
    let lease_until = lease_until(settings, wait_until);
    let record = SolveRecord {
        exp: lease_until + settings.abandon_after_ms,
        state: Some(solve.snapshot_state()),
        lease: Some(Lease { holder: holder.clone(), until: lease_until }),
        slot: None,
        slot_exp: 0,
        result: None,
        due: None,
        rev: holder.clone(),
    };
    let held = store::create(kv, &id, solve.snapshot_base(), &record).map_err(internal)?;
    sweep::enqueue(kv, &id, record.exp).map_err(internal)?;
    advance(kv, settings, &id, held, Some(solve), wait_until).await
}

/// `GET /v1/solve/{id}`: a finished solve's response again (until it expires), or the solve
/// continued from its state for up to `wait` seconds. Unknown ids never touch the upstream.
async fn resume(id: &str, kv: &Kv, settings: &Settings, wait: u64) -> Routed {
    let owned = Some(id.to_owned());
    let internal = |e: anyhow::Error| (Reject::internal(e), Some(id.to_owned()));
    let holder = new_id().map_err(internal)?;
    let wait_until = now_ms() + wait * 1_000;
    let mut swept = false;
    loop {
        let now = now_ms();
        let Some(mut loaded) = store::load(kv, id).map_err(internal)? else {
            sweep_some(kv);
            return Err(not_found(owned));
        };
        if loaded.record.exp <= now {
            sweep::expire(kv, id, &loaded.record).map_err(internal)?;
            sweep_some(kv);
            return Err(not_found(owned));
        }
        if let Some(result) = &loaded.record.result {
            let status = StatusCode::from_u16(result.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let response = if status.is_success() {
                json_response(status, &result.body)
            } else {
                error_response(status, &result.body)
            };
            return Ok((response, owned));
        }
        let busy = loaded.record.lease.as_ref().is_some_and(|l| l.until > now);
        // Nothing is due before this request's wait ends: the record alone answers.
        if !busy && let Some(due) = loaded.record.due.filter(|due| *due > wait_until) {
            return Ok((pending(id, due - now), owned));
        }
        if !std::mem::replace(&mut swept, true) {
            sweep_some(kv);
        }
        if !busy {
            let lease_until = lease_until(settings, wait_until);
            let mut next = loaded.record.clone();
            next.lease = Some(Lease { holder: holder.clone(), until: lease_until });
            next.exp = next.exp.max(lease_until + settings.abandon_after_ms);
            if let Swapped::Yes = store::swap(kv, id, &mut loaded, next).map_err(internal)? {
                return advance(kv, settings, id, loaded, None, wait_until).await;
            }
            continue;
        }
        // Another request is driving this solve: wait for it within our own wait.
        if now + 250 > wait_until {
            return Ok((pending(id, 1_000), owned));
        }
        spin_sdk::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

fn not_found(id: Option<String>) -> (Reject, Option<String>) {
    (Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such solve (never created, deleted, or expired)"), id)
}

/// `DELETE /v1/solve/{id}`: removes the solve and its stored response. A solve still in
/// flight keeps its thread slot until the slot expires (its CaptchaAI task may still hold a
/// thread); a driver still running loses its next checkpoint and stops.
fn delete(id: &str, kv: &Kv) -> Routed {
    let owned = Some(id.to_owned());
    let internal = |e: anyhow::Error| (Reject::internal(e), Some(id.to_owned()));
    sweep_some(kv);
    let Some(loaded) = store::load(kv, id).map_err(internal)? else { return Err(not_found(owned)) };
    store::remove(kv, id).map_err(internal)?;
    if loaded.record.result.is_some()
        && let Some(n) = loaded.record.slot
    {
        budget::release(kv, n, id).map_err(internal)?;
    }
    Ok((json_response(StatusCode::OK, &json!({"id": id, "status": "deleted"})), owned))
}

/// Drives a solve whose lease `held` holds: takes a thread slot first (or answers 202 while
/// the plan is full), then runs the engine, checkpointing each result, and stores the outcome.
async fn advance(
    kv: &Kv,
    settings: &Settings,
    id: &str,
    mut held: store::Loaded,
    solve: Option<Solve>,
    wait_until: u64,
) -> Routed {
    let owned = Some(id.to_owned());
    let internal = |e: anyhow::Error| (Reject::internal(e), Some(id.to_owned()));
    let lease_until = held.record.lease.as_ref().map_or(0, |l| l.until);
    // 1. A thread slot, unless the solve holds one still.
    if let Some(n) = held.record.slot {
        let exp = held.record.slot_exp.max(lease_until);
        if !budget::renew(kv, n, id, exp).map_err(internal)? {
            let mut next = held.record.clone();
            next.slot = None;
            next.slot_exp = 0;
            if let Swapped::Conflict = store::swap(kv, id, &mut held, next).map_err(internal)? {
                return Ok((pending(id, 1_000), owned));
            }
        }
    }
    if held.record.slot.is_none() {
        let capacity = match budget::plan_threads(kv, settings).await.map_err(internal)? {
            Ok(threads) => threads,
            Err(failure) => {
                release_lease(kv, id, &mut held).map_err(internal)?;
                return Err((Reject::from_failure(failure), owned));
            }
        };
        // A plan of no threads leaves nothing to share: the engine's own failure answers.
        if capacity > 0 {
            loop {
                if let Some(n) = budget::acquire(kv, id, capacity, lease_until).map_err(internal)? {
                    let mut next = held.record.clone();
                    next.slot = Some(n);
                    next.slot_exp = lease_until;
                    if let Swapped::Conflict = store::swap(kv, id, &mut held, next).map_err(internal)? {
                        budget::release(kv, n, id).map_err(internal)?;
                        return Ok((pending(id, 1_000), owned));
                    }
                    break;
                }
                if now_ms() + QUEUE_POLL_MS > wait_until {
                    release_lease(kv, id, &mut held).map_err(internal)?;
                    return Ok((pending(id, QUEUE_POLL_MS * 2), owned));
                }
                spin_sdk::time::sleep(std::time::Duration::from_millis(QUEUE_POLL_MS)).await;
            }
        }
    }
    // 2. The engine, from the stored base and state unless this request created it.
    let solve = match solve {
        Some(solve) => solve,
        None => {
            let base = store::base(kv, id)
                .map_err(internal)?
                .ok_or_else(|| internal(anyhow::anyhow!("solve {id} has no stored base")))?;
            let state = held.record.state.clone().unwrap_or_default();
            Solve::restore_parts(&base, &state, &settings.api_key)
                .map_err(|e| internal(anyhow::anyhow!("restoring solve {id}: {e:?}")))?
        }
    };
    let timeout = settings.upstream_timeout_ms;
    let mut lost_on_slot = false;
    let progress = drive::run(&solve, wait_until, lease_until, kv, |solve| {
        let mut next = held.record.clone();
        next.state = Some(solve.snapshot_state());
        next.due = None;
        if let Some(deadline) = solve.deadline() {
            // The solve is at CaptchaAI now: keep it (and its thread slot) until its task can
            // no longer hold a thread, plus a grace to collect the outcome.
            let slot_exp = deadline + timeout + drive::LEASE_MARGIN_MS;
            next.exp = next.exp.max(slot_exp + settings.abandon_after_ms);
            if let Some(n) = next.slot
                && next.slot_exp < slot_exp
            {
                if !budget::renew(kv, n, id, slot_exp)? {
                    lost_on_slot = true;
                }
                next.slot_exp = slot_exp;
            }
        }
        // The sweep queue's entry re-reads the record's `exp`, so a later expiry needs no entry.
        Ok(matches!(store::swap(kv, id, &mut held, next)?, Swapped::Yes))
    })
    .await
    .map_err(internal)?;
    if lost_on_slot {
        eprintln!("edge: solve {id} lost its thread slot while in flight");
    }
    settle(kv, id, held, &solve, progress)
}

/// How often a request waiting for a thread slot tries again, ms.
const QUEUE_POLL_MS: u64 = 500;

/// Ends this request's lease, keeping the solve's state.
fn release_lease(kv: &Kv, id: &str, held: &mut store::Loaded) -> anyhow::Result<()> {
    let mut next = held.record.clone();
    next.lease = None;
    store::swap(kv, id, held, next).map(drop)
}

/// Answers from a solve's progress and stores it: the state for a pending solve; for a
/// finished one the response itself (repeated by later `GET`s until it expires), the task and
/// thread slot given back.
fn settle(kv: &Kv, id: &str, mut held: store::Loaded, solve: &Solve, progress: Progress) -> Routed {
    let owned = Some(id.to_owned());
    let internal = |e: anyhow::Error| (Reject::internal(e), Some(id.to_owned()));
    let now = now_ms();
    let (status, body) = match progress {
        Progress::Lost => return Ok((pending(id, 1_000), owned)),
        Progress::Pending { retry_after_ms, due } => {
            let mut next = held.record.clone();
            next.state = Some(solve.snapshot_state());
            next.lease = None;
            next.due = due;
            store::swap(kv, id, &mut held, next).map_err(internal)?;
            return Ok((pending(id, retry_after_ms), owned));
        }
        Progress::Solved(solution) => {
            let body = solution_body(id, &solution).map_err(internal)?;
            let keep_until = solution.solved_at + RESULT_RETENTION_MS;
            let exp = solution.expires_at.map_or(keep_until, |expires| expires.min(keep_until));
            if let Swapped::Yes = finish(kv, id, &mut held, StatusCode::OK, &body, exp).map_err(internal)? {
                metrics::solved(kv, solution.elapsed_ms);
            }
            (StatusCode::OK, body)
        }
        Progress::Failed(failure) => {
            let (class, origin) = (failure.class, failure.origin);
            let (status, body) = Reject::from_failure(failure).render(Some(id));
            let exp = now + RESULT_RETENTION_MS;
            if let Swapped::Yes = finish(kv, id, &mut held, status, &body, exp).map_err(internal)? {
                metrics::failed(kv, class, origin);
            }
            (status, body)
        }
    };
    let response = if status.is_success() { json_response(status, &body) } else { error_response(status, &body) };
    Ok((response, owned))
}

/// Stores a finished solve's response until `exp` and gives back the task and the slot.
fn finish(
    kv: &Kv,
    id: &str,
    held: &mut store::Loaded,
    status: StatusCode,
    body: &Value,
    exp: u64,
) -> anyhow::Result<Swapped> {
    let slot = held.record.slot;
    let next = SolveRecord {
        exp,
        state: None,
        lease: None,
        slot: None,
        slot_exp: 0,
        result: Some(StoredResult { status: status.as_u16(), body: body.clone() }),
        due: None,
        rev: String::new(),
    };
    let swapped = store::swap(kv, id, held, next)?;
    if let Swapped::Yes = swapped {
        store::drop_base(kv, id)?;
        if let Some(n) = slot {
            budget::release(kv, n, id)?;
        }
    }
    Ok(swapped)
}

fn pending(id: &str, retry_after_ms: u64) -> Response {
    let seconds = retry_after_ms.div_ceil(1_000).max(1);
    let mut response =
        json_response(StatusCode::ACCEPTED, &json!({"id": id, "status": "pending", "retry_after_s": seconds}));
    response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    let location = HeaderValue::from_str(&format!("/v1/solve/{id}")).unwrap_or(HeaderValue::from_static("/v1/solve"));
    response.headers_mut().insert(http::header::LOCATION, location);
    response
}

/// The solution as the engine renders it (`solution-json`), with the solve's `id` and
/// `"status": "solved"` added.
fn solution_body(id: &str, solution: &Solution) -> anyhow::Result<Value> {
    let mut body: Value = serde_json::from_str(&engine::solution_json(solution))
        .map_err(|e| anyhow::anyhow!("the engine's solution JSON does not parse: {e}"))?;
    let object = body.as_object_mut().ok_or_else(|| anyhow::anyhow!("the engine's solution JSON is not an object"))?;
    object.insert("id".into(), id.into());
    object.insert("status".into(), "solved".into());
    Ok(body)
}

/// `GET /v1/threads`: the plan's threads through the engine's account calls; a transport error
/// is the engine's failure like any other.
async fn threads(kv: &Kv, settings: &Settings) -> Result<Response, Reject> {
    let info = budget::threads_info(kv, settings).await.map_err(Reject::internal)?.map_err(Reject::from_failure)?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"threads": info.threads, "working_threads": info.working_threads, "free": info.free}),
    ))
}

/// `GET /metrics`: Prometheus text (see `crate::metrics`).
async fn metrics_page(settings: &Settings) -> Result<Response, Reject> {
    let kv = Kv::open().map_err(Reject::internal)?;
    let plan = budget::plan_threads(&kv, settings).await.map_err(Reject::internal)?.ok();
    let busy = budget::busy(&kv, plan.unwrap_or(0)).map_err(Reject::internal)?;
    let text = metrics::render(&kv, busy, plan).map_err(Reject::internal)?;
    let mut response = http::Response::new(FullBody::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}
