//! The HTTP API: routing, authentication, limits, and rendering the engine's outcomes as
//! responses. Errors are JSON `{code, class, message, retry_after_s}` (plus `field`, `id`):
//!
//! | status | when | class |
//! |---|---|---|
//! | 400 | a body that is not UTF-8, a bad `wait` or `Idempotency-Key`, or any engine failure whose origin is `input` (malformed task JSON, a bad field: `field` names it) | permanent |
//! | 401 | missing or wrong bearer token | permanent |
//! | 404 | unknown route or solve id | permanent |
//! | 405 | wrong method for the route | permanent |
//! | 409 | a POST whose `Idempotency-Key`'s solve could not be created in [`MAX_KEYED_STEPS`] attempts (the store is failing) | transient |
//! | 413 | body over 2 MiB | permanent |
//! | 422 | an engine failure of class `permanent` or `unsolvable` (CaptchaAI refused the task or account, or gave up), or an `Idempotency-Key` used before with another body | permanent / unsolvable |
//! | 503 | an engine failure of class `transient`, or the key-value store unreachable; `Retry-After` | transient |
//! | 500 | a deployment problem (a missing variable) | transient |
//!
//! Every answer about a solve carries its id in `Solve-Id`, and its 200 or 202 also `Location`.
//!
//! The edge reads only an engine failure's `origin`, `class` and `retry-after-ms` (and passes its
//! code, message and field through); it knows no engine code.

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};
use spin_sdk::http::{FullBody, Request};
use subtle::ConstantTimeEq;

use crate::clock::now_ms;
use crate::engine::{self, Failure, FailureClass, FailureOrigin, Solution, Solve};
use crate::ids::{self, new_id};
use crate::kv::{Kv, StoreError};
use crate::lifecycle::{self, Advanced, Found, Held, Joined, Keyed, Outcome, StoredResult};
use crate::request::{self, Route};
use crate::settings::{DEFAULT_WAIT_S, MAX_BODY_BYTES, MAX_WAIT_S, Settings};
use crate::{budget, metrics, plan, times};

type Response = http::Response<FullBody<Bytes>>;

/// `Retry-After` of 500 and of 503 `STORE_UNAVAILABLE`, seconds.
const INTERNAL_RETRY_S: u64 = 5;

/// The header that names the solve an answer is about.
const SOLVE_ID: &str = "solve-id";

/// The `Idempotency-Key` request header (IETF httpapi draft).
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Claims a POST with an `Idempotency-Key` tries before answering 409: each failed creation
/// (or a solve that ended meanwhile) moves it on once.
const MAX_KEYED_STEPS: usize = 8;

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

    /// 503 `STORE_UNAVAILABLE` when the key-value store failed (it may be back soon), else 500.
    fn internal(error: anyhow::Error) -> Reject {
        // Messages of internal errors are logged, not returned: they may describe the deployment.
        eprintln!("edge: internal error: {error:#}");
        let (status, code, message) = if error.downcast_ref::<StoreError>().is_some() {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "STORE_UNAVAILABLE",
                "the gateway's key-value store is unreachable; try again",
            )
        } else {
            (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "the gateway failed; try again")
        };
        Reject { class: "transient", retry_after_s: Some(INTERNAL_RETRY_S), ..Reject::new(status, code, message) }
    }

    /// An engine failure as an error: the status from its origin (`input`: 400) and class
    /// (`permanent`, `unsolvable`: 422; `transient`: 503), the retry hint from its
    /// `retry-after-ms`; code, message and field pass through as the engine wrote them.
    fn from_failure(failure: &Failure) -> Reject {
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
            code: failure.code.clone(),
            class,
            message: failure.message.clone(),
            field: failure.field.clone(),
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
    whole_response(status, Bytes::from(body.to_string()), "application/json")
}

/// An answer whose body is complete, with its `Content-Length`: the host then knows where the
/// body ends from the length, and sends the answer in one write instead of ending a chunked
/// body with a write of its own, which under Spin 4.1 waits out the client's delayed ACK on a
/// kept-alive connection (docs/operating.md, "Keep-alive clients and Nagle's algorithm").
fn whole_response(status: StatusCode, body: Bytes, content_type: &'static str) -> Response {
    let length = HeaderValue::from(body.len());
    let mut response = http::Response::new(FullBody::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response.headers_mut().insert(http::header::CONTENT_LENGTH, length);
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Handles one request; never fails (every problem is a JSON error response).
pub async fn handle(request: Request) -> Response {
    let started = now_ms();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let (mut response, id) = match route(request).await {
        Ok((response, id)) => (response, id),
        Err((reject, id)) => (reject.into_response(id.as_deref()), id),
    };
    if let Some(id) = &id {
        name_solve(&mut response, &method, id);
    }
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

/// Names the solve `id` an answer is about: `Solve-Id` always, `Location` on its 200 and 202
/// (a `DELETE` answers about a solve that is gone).
fn name_solve(response: &mut Response, method: &Method, id: &str) {
    let Ok(value) = HeaderValue::from_str(id) else { return };
    response.headers_mut().insert(SOLVE_ID, value);
    if matches!(response.status(), StatusCode::OK | StatusCode::ACCEPTED)
        && *method != Method::DELETE
        && let Ok(location) = HeaderValue::from_str(&format!("{}{id}", request::SOLVE_PREFIX))
    {
        response.headers_mut().insert(http::header::LOCATION, location);
    }
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
    let token = authenticate(&request, settings.client_tokens.iter()).map_err(|r| (r, None))?;
    let wait = request::wait_seconds(request.uri().query(), DEFAULT_WAIT_S, MAX_WAIT_S).ok_or_else(|| {
        let message = format!("`wait` must be whole seconds from 0 to {MAX_WAIT_S}");
        let reject = Reject::new(StatusCode::BAD_REQUEST, "INVALID_WAIT", message);
        (Reject { field: Some("wait".into()), ..reject }, None)
    })?;
    let kv = Kv::open().map_err(|e| (Reject::internal(e), None))?;
    match (route, method) {
        (Route::Solves, Method::POST) => start(request, &token, &kv, &settings, wait).await,
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

/// Checks `Authorization: Bearer <token>` against every accepted token in constant time;
/// returns the token presented.
fn authenticate<'a>(request: &Request, accepted: impl Iterator<Item = &'a String>) -> Result<Vec<u8>, Reject> {
    let header = request.headers().get(http::header::AUTHORIZATION).map(HeaderValue::as_bytes);
    let mut matched = subtle::Choice::from(0);
    let presented = request::bearer_token(header);
    if let Some(presented) = presented {
        for token in accepted {
            matched |= token.as_bytes().ct_eq(presented);
        }
    }
    if bool::from(matched) {
        Ok(presented.unwrap_or_default().to_vec())
    } else {
        Err(Reject::new(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "a valid `Authorization: Bearer <token>` is required",
        ))
    }
}

/// The `Idempotency-Key` of a request, if it has one: `Err` (400) for a malformed one or more
/// than one.
fn idempotency_key(request: &Request) -> Result<Option<String>, Reject> {
    let mut values = request.headers().get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else { return Ok(None) };
    match request::idempotency_key(value.as_bytes()) {
        Some(key) if values.next().is_none() => Ok(Some(key.to_owned())),
        _ => {
            let message = format!(
                "`Idempotency-Key` must be one key of 1 to {} printable ASCII characters, bare (no spaces, quotes or \\) or as a quoted string",
                request::MAX_IDEMPOTENCY_KEY
            );
            let reject = Reject::new(StatusCode::BAD_REQUEST, "INVALID_IDEMPOTENCY_KEY", message);
            Err(Reject { field: Some("Idempotency-Key".into()), ..reject })
        }
    }
}

/// `POST /v1/solve`: validates the task (nothing is sent for a bad one), stores it once
/// (`snapshot-base`) and drives the solve for up to `wait` seconds.
///
/// With an `Idempotency-Key`, the solve's id is [`ids::keyed_id`] of the client's token and the
/// key, and only the request that wins its claim creates it: any other request with the same
/// token, key and body continues that solve as `GET /v1/solve/{id}` does (its 202, or its stored
/// response once finished), so a client cut off mid-POST retries and gets its solve, submitted
/// once. The same key with another body is a 422. The key lives as long as the solve.
async fn start(request: Request, token: &[u8], kv: &Kv, settings: &Settings, wait: u64) -> Routed {
    let key = idempotency_key(&request).map_err(|r| (r, None))?;
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
    lifecycle::sweep(kv);
    // The shared model of the task's type (`crate::times`): the engine gives the first wait.
    let model = times::for_task(kv, task);
    let created = match &model {
        Some(model) => Solve::create_with_times(task, &settings.api_key, &settings.config, now, model),
        None => Solve::create(task, &settings.api_key, &settings.config, now),
    };
    let task_type = model.as_ref().map(|m| m.task_type());
    let solve = created.map_err(|f| {
        metrics::failed(kv, f.class, f.origin);
        (Reject::from_failure(&f), None)
    })?;
    let wait_until = now + wait * 1_000;
    let Some(key) = key else {
        let id = new_id().map_err(|e| (Reject::internal(e), None))?;
        let held =
            lifecycle::create(kv, settings, &id, &solve, None, task_type, wait_until).map_err(|e| internal(&id, e))?;
        return drive(kv, settings, &id, held, Some(solve), wait_until).await;
    };
    // The first attempt's id, then the next attempt's whenever a claimer stopped before
    // creating its solve (`lifecycle`, keyed solves); back to the first once the solve is gone.
    let first = ids::keyed_id(token, &key);
    let fingerprint = ids::fingerprint(&body);
    let mut chain: Option<lifecycle::Chain> = None;
    for _ in 0..MAX_KEYED_STEPS {
        let id = chain.as_ref().map_or_else(|| first.clone(), |c| ids::nth_attempt(&c.first, c.before));
        let claimed_at = now_ms();
        if lifecycle::claim(kv, &id).map_err(|e| internal(&id, e))? {
            let keyed = Keyed { fingerprint, chain, claimed_at };
            // No id in a failure: the solve may never be driven; the client retries its POST.
            let held = lifecycle::create(kv, settings, &id, &solve, Some(keyed), task_type.clone(), wait_until)
                .map_err(|e| (Reject::internal(e), None))?;
            return drive(kv, settings, &id, held, Some(solve), wait_until).await;
        }
        let joined = lifecycle::join(kv, settings, &id, &fingerprint, now_ms(), wait_until).await;
        match joined.map_err(|e| internal(&id, e))? {
            Joined::Found(Found::Missing) => chain = None,
            Joined::Found(found) => return answer(&id, found, kv, settings, wait_until).await,
            Joined::NextAttempt => {
                let before = chain.as_ref().map_or(1, |c| c.before + 1);
                chain = Some(lifecycle::Chain { first: first.clone(), before });
            }
        }
    }
    Err(creating())
}

/// `GET /v1/solve/{id}`: a finished solve's response again (until it expires), or the solve
/// continued from its state for up to `wait` seconds. Unknown ids never touch the upstream.
async fn resume(id: &str, kv: &Kv, settings: &Settings, wait: u64) -> Routed {
    let wait_until = now_ms() + wait * 1_000;
    let found = lifecycle::lease(kv, settings, id, None, wait_until).await.map_err(|e| internal(id, e))?;
    answer(id, found, kv, settings, wait_until).await
}

/// 409: the solve of an `Idempotency-Key` could not be created in [`MAX_KEYED_STEPS`] attempts.
fn creating() -> (Reject, Option<String>) {
    let message = "requests with this `Idempotency-Key` keep failing to start its solve; try again";
    let reject = Reject::new(StatusCode::CONFLICT, "IDEMPOTENCY_KEY_IN_USE", message);
    (Reject { class: "transient", retry_after_s: Some(1), field: Some("Idempotency-Key".into()), ..reject }, None)
}

/// Answers about solve `id` from what [`lifecycle::lease`] found, driving it if leased.
async fn answer(id: &str, found: Found, kv: &Kv, settings: &Settings, wait_until: u64) -> Routed {
    let owned = Some(id.to_owned());
    match found {
        Found::Missing => Err(not_found(owned)),
        Found::OtherRequest => {
            let message = "this `Idempotency-Key` was used with another body; use a new key for a new task";
            let reject = Reject::new(StatusCode::UNPROCESSABLE_ENTITY, "IDEMPOTENCY_KEY_REUSED", message);
            Err((Reject { field: Some("Idempotency-Key".into()), ..reject }, None))
        }
        Found::Creating => Err(creating()),
        Found::Finished(result) => Ok((stored_response(result), owned)),
        Found::Pending { retry_after_ms } => Ok((pending(id, retry_after_ms), owned)),
        Found::Leased(held) => drive(kv, settings, id, *held, None, wait_until).await,
    }
}

/// `DELETE /v1/solve/{id}`: removes the solve and its stored response (see
/// [`lifecycle::delete`]).
fn delete(id: &str, kv: &Kv) -> Routed {
    let owned = Some(id.to_owned());
    if !lifecycle::delete(kv, id).map_err(|e| internal(id, e))? {
        return Err(not_found(owned));
    }
    Ok((json_response(StatusCode::OK, &json!({"id": id, "status": "deleted"})), owned))
}

/// Drives the solve `held` (created by this request when `solve` is given) for the wait ending
/// at `wait_until` and answers: 202 while it is in flight, else its ending, rendered and stored
/// for later `GET`s to repeat.
async fn drive(kv: &Kv, settings: &Settings, id: &str, held: Held, solve: Option<Solve>, wait_until: u64) -> Routed {
    let owned = Some(id.to_owned());
    let ended = match held.advance(kv, settings, solve, wait_until).await.map_err(|e| internal(id, e))? {
        Advanced::Pending { retry_after_ms } => return Ok((pending(id, retry_after_ms), owned)),
        Advanced::Refused(failure) => return Err((Reject::from_failure(&failure), owned)),
        Advanced::Ended(ended) => ended,
    };
    let (status, body) = match ended.outcome() {
        Outcome::Solved(solution) => (StatusCode::OK, solution_body(id, solution).map_err(|e| internal(id, e))?),
        Outcome::Failed(failure) => Reject::from_failure(failure).render(Some(id)),
    };
    ended.settle(kv, status.as_u16(), &body).await.map_err(|e| internal(id, e))?;
    Ok((rendered_response(status, &body), owned))
}

/// A 500 for an internal error while serving solve `id`.
fn internal(id: &str, error: anyhow::Error) -> (Reject, Option<String>) {
    (Reject::internal(error), Some(id.to_owned()))
}

fn not_found(id: Option<String>) -> (Reject, Option<String>) {
    (Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such solve (never created, deleted, or expired)"), id)
}

/// A finished solve's stored response, repeated.
fn stored_response(result: StoredResult) -> Response {
    let status = StatusCode::from_u16(result.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    rendered_response(status, &result.body)
}

/// A solve's ending as a response: the solution (2xx) or the error body.
fn rendered_response(status: StatusCode, body: &Value) -> Response {
    if status.is_success() { json_response(status, body) } else { error_response(status, body) }
}

fn pending(id: &str, retry_after_ms: u64) -> Response {
    let seconds = retry_after_ms.div_ceil(1_000).max(1);
    let mut response =
        json_response(StatusCode::ACCEPTED, &json!({"id": id, "status": "pending", "retry_after_s": seconds}));
    // `Location` and `Solve-Id` are added by `name_solve`.
    response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
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
    let info =
        plan::threads_info(kv, settings).await.map_err(Reject::internal)?.map_err(|f| Reject::from_failure(&f))?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"threads": info.threads, "working_threads": info.working_threads, "free": info.free}),
    ))
}

/// `GET /metrics`: Prometheus text (see `crate::metrics`).
async fn metrics_page(settings: &Settings) -> Result<Response, Reject> {
    let kv = Kv::open().map_err(Reject::internal)?;
    let plan = plan::threads(&kv, settings).await.map_err(Reject::internal)?.ok();
    let busy = budget::busy(&kv, plan.unwrap_or(0)).map_err(Reject::internal)?;
    let text = metrics::render(&kv, busy, plan).map_err(Reject::internal)?;
    Ok(whole_response(StatusCode::OK, Bytes::from(text), "text/plain; version=0.0.4; charset=utf-8"))
}
