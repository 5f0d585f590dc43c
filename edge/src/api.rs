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
use crate::settings::{DEFAULT_WAIT_S, MAX_BODY_BYTES, MAX_WAIT_S, Settings};
use crate::store::{Acquired, Finished, Record, Records};
use crate::upstream;

type Response = http::Response<FullBody<Bytes>>;

/// An error response.
struct Reject {
    status: StatusCode,
    code: String,
    class: &'static str,
    message: String,
    field: Option<String>,
    retry_after_s: Option<u64>,
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
        let (status, body) = self.render(id);
        error_response(status, &body)
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
        route_name(&path),
        response.status().as_u16(),
        now_ms().saturating_sub(started)
    );
    response
}

type Routed = Result<(Response, Option<String>), (Reject, Option<String>)>;

/// The route's shape for logs (ids elided).
fn route_name(path: &str) -> &'static str {
    match path {
        "/healthz" => "/healthz",
        "/v1/solve" => "/v1/solve",
        "/v1/threads" => "/v1/threads",
        p if p.starts_with("/v1/solve/") => "/v1/solve/{id}",
        _ => "(other)",
    }
}

async fn route(request: Request) -> Routed {
    let path = request.uri().path().to_owned();
    let wrong_method =
        || Err((Reject::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "method not allowed here"), None));
    if path == "/healthz" {
        return match *request.method() {
            Method::GET => Ok((json_response(StatusCode::OK, &json!({"status": "ok"})), None)),
            _ => wrong_method(),
        };
    }
    if !path.starts_with("/v1/") {
        return Err((Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route"), None));
    }
    let settings = Settings::load().await.map_err(|e| (Reject::internal(e), None))?;
    authenticate(&request, &settings).map_err(|r| (r, None))?;
    let wait = wait_seconds(request.uri().query()).map_err(|r| (r, None))?;
    match (request.method().clone(), path.as_str()) {
        (Method::POST, "/v1/solve") => start(request, &settings, wait).await,
        (_, "/v1/solve") => wrong_method(),
        (Method::GET, "/v1/threads") => threads(&settings).await.map(|r| (r, None)).map_err(|r| (r, None)),
        (_, "/v1/threads") => wrong_method(),
        (Method::GET, p) if p.starts_with("/v1/solve/") => {
            let id = &p["/v1/solve/".len()..];
            if !valid_id(id) {
                return Err((Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such solve"), None));
            }
            resume(id, &settings, wait).await
        }
        (_, p) if p.starts_with("/v1/solve/") => wrong_method(),
        _ => Err((Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route"), None)),
    }
}

/// Checks `Authorization: Bearer <token>` against every configured token in constant time.
fn authenticate(request: &Request, settings: &Settings) -> Result<(), Reject> {
    let unauthorized =
        || Reject::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "a valid `Authorization: Bearer <token>` is required");
    let header = request.headers().get(http::header::AUTHORIZATION).ok_or_else(unauthorized)?;
    let presented = header.as_bytes().strip_prefix(b"Bearer ").ok_or_else(unauthorized)?;
    let mut matched = subtle::Choice::from(0);
    for token in &settings.client_tokens {
        matched |= token.as_bytes().ct_eq(presented);
    }
    if bool::from(matched) && !presented.is_empty() { Ok(()) } else { Err(unauthorized()) }
}

/// `?wait=S` (default and cap in [`crate::settings`]).
fn wait_seconds(query: Option<&str>) -> Result<u64, Reject> {
    let Some(value) = query.into_iter().flat_map(|q| q.split('&')).find_map(|pair| pair.strip_prefix("wait=")) else {
        return Ok(DEFAULT_WAIT_S);
    };
    match value.parse::<u64>() {
        Ok(seconds) if seconds <= MAX_WAIT_S => Ok(seconds),
        _ => Err(Reject {
            field: Some("wait".into()),
            ..Reject::new(
                StatusCode::BAD_REQUEST,
                "INVALID_WAIT",
                format!("`wait` must be whole seconds from 0 to {MAX_WAIT_S}"),
            )
        }),
    }
}

/// Solve ids are 32 lowercase hex characters.
fn valid_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn new_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `POST /v1/solve`: validates the task (nothing is sent for a bad one), starts the solve and
/// drives it for up to `wait` seconds.
async fn start(request: Request, settings: &Settings, wait: u64) -> Routed {
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
        request.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
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
    let solve =
        Solve::create(task, &settings.api_key, &settings.config, now).map_err(|f| (Reject::from_failure(f), None))?;
    let id = new_id().map_err(|e| (Reject::internal(e), None))?;
    let records = Records::open().await.map_err(|e| (Reject::internal(e), Some(id.clone())))?;
    let holder = new_id().map_err(|e| (Reject::internal(e), Some(id.clone())))?;
    let wait_until = now + wait * 1_000;
    let lease =
        crate::store::Lease { holder: holder.clone(), until: wait_until + settings.upstream_timeout_ms + 1_000 };
    records
        .put(&id, &Record { snapshot: solve.snapshot(), lease: Some(lease) })
        .await
        .map_err(|e| (Reject::internal(e), Some(id.clone())))?;
    let progress = drive::run(&solve, wait_until, || records.still_holds(&id, &holder))
        .await
        .map_err(|e| (Reject::internal(e), Some(id.clone())))?;
    settle(&records, &id, progress).await
}

/// `GET /v1/solve/{id}`: continues the solve from its snapshot for up to `wait` seconds. Unknown
/// ids never touch the upstream.
async fn resume(id: &str, settings: &Settings, wait: u64) -> Routed {
    let owned = Some(id.to_owned());
    let records = Records::open().await.map_err(|e| (Reject::internal(e), owned.clone()))?;
    let holder = new_id().map_err(|e| (Reject::internal(e), owned.clone()))?;
    let wait_until = now_ms() + wait * 1_000;
    loop {
        let now = now_ms();
        let lease_until = wait_until + settings.upstream_timeout_ms + 1_000;
        match records.acquire(id, &holder, now, lease_until).await.map_err(|e| (Reject::internal(e), owned.clone()))? {
            Acquired::Held(record) => {
                let solve = Solve::restore(&record.snapshot, &settings.api_key)
                    .map_err(|e| (Reject::internal(anyhow::anyhow!("restoring solve {id}: {e:?}")), owned.clone()))?;
                let progress = drive::run(&solve, wait_until, || records.still_holds(id, &holder))
                    .await
                    .map_err(|e| (Reject::internal(e), owned.clone()))?;
                return settle(&records, id, progress).await;
            }
            Acquired::Missing => {
                return match records.finished(id).await.map_err(|e| (Reject::internal(e), owned.clone()))? {
                    Some(Finished::Delivered) => Err((
                        Reject::new(
                            StatusCode::GONE,
                            "ALREADY_DELIVERED",
                            "this solve's token was already handed out; tokens are single-use",
                        ),
                        owned,
                    )),
                    Some(Finished::Failed { status, body }) => {
                        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                        Ok((error_response(status, &body), owned))
                    }
                    None => Err((Reject::new(StatusCode::NOT_FOUND, "NOT_FOUND", "no such solve"), owned)),
                };
            }
            // Another request is driving this solve: wait for it within our own wait.
            Acquired::Busy if now + 250 <= wait_until => {
                spin_sdk::time::sleep(std::time::Duration::from_millis(250)).await
            }
            Acquired::Busy => return Ok((pending(id, 1_000), owned)),
        }
    }
}

/// Answers from a solve's progress and updates its record.
async fn settle(records: &Records, id: &str, progress: Progress) -> Routed {
    let owned = Some(id.to_owned());
    let internal = |e: anyhow::Error| (Reject::internal(e), Some(id.to_owned()));
    match progress {
        Progress::Pending { snapshot, retry_after_ms } => {
            records.put(id, &Record { snapshot, lease: None }).await.map_err(internal)?;
            Ok((pending(id, retry_after_ms), owned))
        }
        Progress::Solved(solution) => {
            let body = solution_body(id, &solution).map_err(internal)?;
            records.finish(id, now_ms(), None).await.map_err(internal)?;
            Ok((json_response(StatusCode::OK, &body), owned))
        }
        Progress::Failed(failure) => {
            // Kept as rendered, so later calls for this id repeat exactly this response.
            let (status, body) = Reject::from_failure(failure).render(Some(id));
            records.finish(id, now_ms(), Some((status.as_u16(), body.clone()))).await.map_err(internal)?;
            Ok((error_response(status, &body), owned))
        }
    }
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
async fn threads(settings: &Settings) -> Result<Response, Reject> {
    let request =
        engine::account::threads_info_request(&settings.api_key, &settings.config).map_err(Reject::from_failure)?;
    drive::sleep_until(request.at).await;
    let reply = upstream::send(&request).await;
    let info = engine::account::parse_threads_info(&reply).map_err(Reject::from_failure)?;
    Ok(json_response(
        StatusCode::OK,
        &json!({"threads": info.threads, "working_threads": info.working_threads, "free": info.free}),
    ))
}
