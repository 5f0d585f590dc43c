//! The HTTP API: routing, authentication, limits, and rendering the engine's outcomes as
//! responses. Errors are JSON `{code, class, message, retry_after_s}` (plus `field`, `id`):
//!
//! | status | when | class |
//! |---|---|---|
//! | 400 | a body that is not UTF-8 or ends before its declared length, a bad `wait` or `Idempotency-Key`, or any engine failure whose origin is `input` (malformed task JSON, a bad field: `field` names it) | permanent |
//! | 401 | missing or wrong bearer token | permanent |
//! | 404 | unknown route or solve id | permanent |
//! | 405 | wrong method for the route | permanent |
//! | 409 | a POST whose `Idempotency-Key`'s solve could not be created in 8 attempts (the store is failing) | transient |
//! | 413 | body over 2 MiB | permanent |
//! | 422 | an engine failure of class `permanent` or `unsolvable` (CaptchaAI refused the task or account, or gave up), or an `Idempotency-Key` used before with another body | permanent / unsolvable |
//! | 503 | an engine failure of class `transient`, or the key-value store unreachable; `Retry-After` | transient |
//! | 500 | `MISCONFIGURED`: a variable is missing or cannot be used (named, never its value) | transient |
//!
//! Every answer about a solve carries its id in `Solve-Id`, and its 200 or 202 also `Location`.
//!
//! The edge reads only an engine failure's `origin`, `class` and `retry-after-ms` (and passes its
//! code, message and field through); it knows no engine code.

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};
use spin_sdk::http::{FullBody, Request};

use crate::budget::{self, Pool};
use crate::clock::now_ms;
use crate::engine::endpoint::EndpointPath;
use crate::engine::{self, Failure, FailureClass, FailureOrigin, Solution};
use crate::kv::{Kv, StoreError};
use crate::lifecycle::{self, Answer, Ending, Outcome, StoredResult};
use crate::request::{self, Route};
use crate::settings::{self, Client, DEFAULT_WAIT_S, MAX_BODY_BYTES, MAX_WAIT_S, Settings, SettingsError};
use crate::{auth, classic, ids, metrics, plan};

type Response = http::Response<FullBody<Bytes>>;

/// `Retry-After` of 500 and of 503 `STORE_UNAVAILABLE`, seconds.
const INTERNAL_RETRY_S: u64 = 5;

/// The header that names the solve an answer is about.
const SOLVE_ID: &str = "solve-id";

/// The `Idempotency-Key` request header (IETF httpapi draft).
const IDEMPOTENCY_KEY: &str = "idempotency-key";

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

    /// 500 `MISCONFIGURED`: a variable cannot be used (the message names it, never its value).
    fn misconfigured(error: &SettingsError) -> Reject {
        eprintln!("edge: misconfigured: {error}");
        let reject = Reject::new(StatusCode::INTERNAL_SERVER_ERROR, "MISCONFIGURED", error.to_string());
        Reject { class: "transient", retry_after_s: Some(INTERNAL_RETRY_S), ..reject }
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
    if let Route::Other = route
        && !path.starts_with("/v1/")
    {
        return not_found("no such route");
    }
    let settings = settings::get().await.map_err(|e| (Reject::misconfigured(&e), None));
    match route {
        Route::Healthz | Route::Readyz if !matches!(method, Method::GET | Method::HEAD) => {
            return wrong_method("GET, HEAD");
        }
        Route::Healthz => {
            settings?;
            return Ok((json_response(StatusCode::OK, &json!({"status": "ok"})), None));
        }
        Route::Readyz => {
            settings?;
            return ready().map(|r| (r, None)).map_err(|r| (r, None));
        }
        _ => {}
    }
    let settings = settings?;
    if let Route::InPhp | Route::ResPhp = route {
        return classic(route, request, &settings).await.map(|r| (r, None)).map_err(|r| (r, None));
    }
    if route == Route::Metrics {
        let clients = settings.clients.iter().map(|c| c.token.as_str());
        match &settings.metrics_token {
            Some(token) => authenticate(&request, std::iter::once(token.as_str())),
            None => authenticate(&request, clients),
        }
        .map_err(|r| (r, None))?;
        return match method {
            Method::GET | Method::HEAD => metrics_page(&settings).await.map(|r| (r, None)).map_err(|r| (r, None)),
            _ => wrong_method("GET, HEAD"),
        };
    }
    let client = authenticate(&request, settings.clients.iter().map(|c| c.token.as_str())).map_err(|r| (r, None))?;
    let client = &settings.clients[client];
    let wait = request::wait_seconds(request.uri().query(), DEFAULT_WAIT_S, MAX_WAIT_S).ok_or_else(|| {
        let message = format!("`wait` must be whole seconds from 0 to {MAX_WAIT_S}");
        let reject = Reject::new(StatusCode::BAD_REQUEST, "INVALID_WAIT", message);
        (Reject { field: Some("wait".into()), ..reject }, None)
    })?;
    let kv = Kv::open().map_err(|e| (Reject::internal(e), None))?;
    match (route, method) {
        (Route::Solves, Method::POST) => start(request, client, &kv, &settings, wait).await,
        (Route::Solves, _) => wrong_method("POST"),
        (Route::Threads, Method::GET | Method::HEAD) => {
            threads(&kv, &settings).await.map(|r| (r, None)).map_err(|r| (r, None))
        }
        (Route::Threads, _) => wrong_method("GET, HEAD"),
        (Route::UnknownSolve, Method::GET | Method::HEAD | Method::DELETE) => not_found("no such solve"),
        (Route::Solve(id), Method::GET | Method::HEAD) => resume(id, &kv, &settings, wait).await,
        (Route::Solve(id), Method::DELETE) => delete(id, &kv),
        (Route::Solve(_) | Route::UnknownSolve, _) => wrong_method("GET, HEAD, DELETE"),
        _ => not_found("no such route"),
    }
}

/// `/in.php` and `/res.php` (`crate::classic`), by `GET` or `POST`: a body over the limit is
/// answered as CaptchaAI answers an oversized upload.
async fn classic(route: Route<'_>, request: Request, settings: &Settings) -> Result<Response, Reject> {
    let path = match route {
        Route::InPhp => EndpointPath::InPhp,
        _ => EndpointPath::ResPhp,
    };
    if !matches!(*request.method(), Method::GET | Method::POST) {
        let mut reject = Reject::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "method not allowed here");
        reject.allow = Some("GET, POST");
        return Err(reject);
    }
    let query = request.uri().query().unwrap_or_default().to_owned();
    let content_type = request.headers().get(http::header::CONTENT_TYPE).cloned();
    // A GET's body is not read (PHP reads none either): under real Spin, waiting for an empty
    // body's end cost a not-ready `res.php` poll 965 req/s against 3,448 for `GET /v1/solve/{id}`
    // (benches/dropin-poll.sh sqlite spin, 16 connections).
    let body = if request.method() == Method::GET {
        Bytes::new()
    } else {
        match read_body(request).await {
            Ok(body) => body,
            Err(reject) if reject.status == StatusCode::PAYLOAD_TOO_LARGE => return Ok(classic::too_large()),
            Err(reject) => return Err(reject),
        }
    };
    classic::handle(path, &query, content_type.as_ref(), body, settings).await.map_err(Reject::internal)
}

/// `GET /readyz`: whether this instance can use its store: one read of a small key. A store
/// that fails answers 503; one that hangs (Spin's Redis store after Redis went away) leaves
/// the request hanging, so a load balancer's probe times out and takes the instance out.
fn ready() -> Result<Response, Reject> {
    let kv = Kv::open().map_err(Reject::internal)?;
    kv.get(plan::PLAN_KEY).map_err(Reject::internal)?;
    Ok(json_response(StatusCode::OK, &json!({"status": "ready"})))
}

/// Checks `Authorization: Bearer <token>` against every accepted token in constant time;
/// returns the index of the token presented.
fn authenticate<'a>(request: &Request, accepted: impl Iterator<Item = &'a str>) -> Result<usize, Reject> {
    let header = request.headers().get(http::header::AUTHORIZATION).map(HeaderValue::as_bytes);
    request::bearer_token(header).and_then(|presented| auth::find(presented, accepted)).ok_or_else(|| {
        Reject::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "a valid `Authorization: Bearer <token>` is required")
    })
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

/// `POST /v1/solve`: reads the task and starts its solve ([`lifecycle::start`]: nothing is sent
/// for a task the engine refuses), driven for up to `wait` seconds.
async fn start(request: Request, client: &Client, kv: &Kv, settings: &Settings, wait: u64) -> Routed {
    let key = idempotency_key(&request).map_err(|r| (r, None))?;
    let body = read_body(request).await.map_err(|r| (r, None))?;
    let task = std::str::from_utf8(&body)
        .map_err(|_| (Reject::new(StatusCode::BAD_REQUEST, "INVALID_BODY", "the body must be UTF-8 JSON"), None))?;
    let keyed = key.as_deref().map(|key| lifecycle::KeyedStart { token: client.token.as_bytes(), key, body: &body });
    let start = lifecycle::Start {
        task,
        owner: &client.label,
        new_id: ids::new_id,
        keyed,
        wait_until: now_ms() + wait * 1_000,
        queue: true,
    };
    reply(lifecycle::start(kv, settings, start, &render).await)
}

/// The request's body, at most [`MAX_BODY_BYTES`] whatever it claims (chunked bodies have no
/// length): 413 past that, 400 when it ends before its declared length (the client's fault,
/// or a client gone: never a server error).
async fn read_body(request: Request) -> Result<Bytes, Reject> {
    let too_large = || {
        Reject::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared =
        request::declared_length(request.headers().get(http::header::CONTENT_LENGTH).map(HeaderValue::as_bytes));
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let limited = http_body_util::Limited::new(request.into_body(), MAX_BODY_BYTES);
    match http_body_util::BodyExt::collect(limited).await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => {
            eprintln!("edge: the request body was cut off: {e}");
            Err(Reject::new(StatusCode::BAD_REQUEST, "INCOMPLETE_BODY", "the body ended before its declared length"))
        }
    }
}

/// `GET /v1/solve/{id}`: the solve continued for up to `wait` seconds ([`lifecycle::resume`]).
async fn resume(id: &str, kv: &Kv, settings: &Settings, wait: u64) -> Routed {
    reply(lifecycle::resume(kv, settings, id, None, &render, now_ms() + wait * 1_000).await)
}

/// A lifecycle answer as the response: 202 while in flight, the stored response once ended.
fn reply(reply: lifecycle::Reply) -> Routed {
    let (id, answer) = reply.map_err(|stalled| (Reject::internal(stalled.error), stalled.id))?;
    match answer {
        Answer::Refused(failure) | Answer::Unadmitted(failure) => Err((Reject::from_failure(&failure), id)),
        Answer::Missing => Err(not_found(id)),
        Answer::OtherRequest => {
            let message = "this `Idempotency-Key` was used with another body; use a new key for a new task";
            let reject = Reject::new(StatusCode::UNPROCESSABLE_ENTITY, "IDEMPOTENCY_KEY_REUSED", message);
            Err((Reject { field: Some("Idempotency-Key".into()), ..reject }, None))
        }
        Answer::Creating => {
            let message = "requests with this `Idempotency-Key` keep failing to start its solve; try again";
            let reject = Reject::new(StatusCode::CONFLICT, "IDEMPOTENCY_KEY_IN_USE", message);
            let field = Some("Idempotency-Key".into());
            Err((Reject { class: "transient", retry_after_s: Some(1), field, ..reject }, None))
        }
        Answer::Pending { retry_after_ms } => {
            let id = id.ok_or_else(|| (Reject::internal(anyhow::anyhow!("a pending solve without an id")), None))?;
            Ok((pending(&id, retry_after_ms), Some(id)))
        }
        Answer::Finished(result) => Ok((stored_response(result), id)),
        Answer::Busy => Err((Reject::internal(anyhow::anyhow!("a /v1 solve refused to queue")), None)),
    }
}

/// How a solve ended, as its stored response: the solution (200) or the error body.
fn render(ending: &Ending) -> anyhow::Result<StoredResult> {
    let (status, body) = match ending.outcome {
        Outcome::Solved(solution) => (StatusCode::OK, solution_body(ending.id, solution)?),
        Outcome::Failed(failure) => Reject::from_failure(failure).render(Some(ending.id)),
    };
    Ok(StoredResult { status: status.as_u16(), body })
}

/// `DELETE /v1/solve/{id}`: removes the solve and its stored response (see
/// [`lifecycle::delete`]).
fn delete(id: &str, kv: &Kv) -> Routed {
    let owned = Some(id.to_owned());
    if !lifecycle::delete(kv, id).map_err(|e| (Reject::internal(e), owned.clone()))? {
        return Err(not_found(owned));
    }
    Ok((json_response(StatusCode::OK, &json!({"id": id, "status": "deleted"})), owned))
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
    let busy = budget::busy(&kv, Pool::Plan, plan.unwrap_or(0)).map_err(Reject::internal)?;
    let mut clients = Vec::new();
    for client in &settings.clients {
        let share = match client.threads {
            Some(share) => {
                Some((budget::busy(&kv, Pool::Client(&client.label), share).map_err(Reject::internal)?, share))
            }
            None => None,
        };
        clients.push((client.label.as_str(), share));
    }
    let text = metrics::render(&kv, busy, plan, &clients).map_err(Reject::internal)?;
    Ok(whole_response(StatusCode::OK, Bytes::from(text), "text/plain; version=0.0.4; charset=utf-8"))
}
