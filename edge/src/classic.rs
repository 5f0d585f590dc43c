//! CaptchaAI's own API on the edge: `/in.php` and `/res.php` as CaptchaAI serves them, so a
//! client written for CaptchaAI (its SDK, 2captcha-python, the seeds' code, curl) points its
//! base URL here, sends an edge client token as its `key`, and shares the edge's thread
//! budget without holding the CaptchaAI key.
//!
//! The engine reads every request and renders every reply (its `endpoint` interface): this
//! module knows no parameter name and no code. It collects a request's parameters (query
//! string, then a form or multipart body), authenticates the key, and maps the request onto
//! the solve lifecycle: `in.php` starts a solve and answers at once with its id (queued when
//! every thread the client may use is busy, unless `in_php_when_busy = refuse`), `res.php`
//! continues it without waiting (upstream polls follow the engine's schedule, however often the
//! client asks), and answers the client's share of the plan, the balance or a report.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use spin_sdk::http::FullBody;

use crate::budget::{self, Pool};
use crate::clock::{now_ms, sleep_until};
use crate::engine::endpoint::{
    self, EndpointPath, EndpointReply, EndpointRequest, HostRefusal, Param, ReplyFormat, ResAction, SolveState, Upload,
};
use crate::engine::{
    Answer as EngineAnswer, Failure, FailureClass, FailureOrigin, HttpRequest, HttpResponse, ThreadsInfo,
    TransportError, account,
};
use crate::kv::Kv;
use crate::lifecycle::{self, Answer, Ending, Outcome, StoredResult};
use crate::settings::{Client, Settings};
use crate::{auth, ids, metrics, plan, upstream};

type Response = http::Response<FullBody<Bytes>>;

/// The most ids one `res.php?action=get&ids=` may ask for (the engine refuses more).
const MAX_IDS: usize = 100;

/// Answers a request to `path` with this query string, `Content-Type` and body. `Err` only
/// where CaptchaAI itself has no answer: the store failed (the API's JSON 503).
pub async fn handle(
    path: EndpointPath,
    query: &str,
    content_type: Option<&HeaderValue>,
    body: Bytes,
    settings: &Settings,
) -> anyhow::Result<Response> {
    let (params, uploads) = parameters(query, content_type, body).await;
    let request = match endpoint::read_request(path, &params, &uploads) {
        Ok(request) => request,
        Err(refusal) => {
            // CaptchaAI checks the key first: an unknown one is answered as such, in the format
            // the request asked for.
            let known = refusal.key.as_deref().is_none_or(|key| client(settings, key).is_some());
            let refusal = if known {
                refusal
            } else {
                let format = endpoint::read_format(path, &params);
                endpoint::render_refusal(Some(format), HostRefusal::UnknownKey)
            };
            return Ok(reply(refusal.reply));
        }
    };
    let kv = Kv::open()?;
    match request {
        EndpointRequest::Submit(submit) => {
            let Some(client) = client(settings, &submit.key) else {
                return Ok(reply(endpoint::render_refusal(Some(submit.format), HostRefusal::UnknownKey).reply));
            };
            submitted(&kv, settings, client, &submit.task_json, &submit.task_type, submit.format).await
        }
        EndpointRequest::Res(res) => {
            let Some(client) = client(settings, &res.key) else {
                return Ok(reply(endpoint::render_refusal(Some(res.format), HostRefusal::UnknownKey).reply));
            };
            answer(&kv, settings, client, res.action, res.format).await
        }
    }
}

/// The reply to a request whose body is over the edge's limit.
pub fn too_large() -> Response {
    reply(endpoint::render_refusal(None, HostRefusal::TooLarge).reply)
}

/// The client whose token is `key`.
fn client<'a>(settings: &'a Settings, key: &str) -> Option<&'a Client> {
    auth::find(key.as_bytes(), settings.clients.iter().map(|c| c.token.as_str())).map(|i| &settings.clients[i])
}

/// A request's parameters: the query string's, then the body's where it is a form
/// (`application/x-www-form-urlencoded`) or `multipart/form-data` (its parts with a file name
/// as uploads, up to the first part that cannot be read: the engine then refuses what is
/// missing, as CaptchaAI would).
async fn parameters(query: &str, content_type: Option<&HeaderValue>, body: Bytes) -> (Vec<Param>, Vec<Upload>) {
    fn pairs(text: &[u8]) -> impl Iterator<Item = Param> + '_ {
        form_urlencoded::parse(text).map(|(name, value)| Param { name: name.into_owned(), value: value.into_owned() })
    }
    let mut params: Vec<Param> = pairs(query.as_bytes()).collect();
    let mut uploads = Vec::new();
    let content_type = content_type.and_then(|v| v.to_str().ok()).unwrap_or_default();
    let mime = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if mime == "application/x-www-form-urlencoded" {
        params.extend(pairs(&body));
    } else if mime == "multipart/form-data"
        && let Ok(boundary) = multer::parse_boundary(content_type)
    {
        let stream = futures::stream::once(async move { Ok::<Bytes, std::convert::Infallible>(body) });
        let mut multipart = multer::Multipart::new(stream, boundary);
        while let Ok(Some(field)) = multipart.next_field().await {
            let name = field.name().unwrap_or_default().to_owned();
            let is_file = field.file_name().is_some();
            let Ok(bytes) = field.bytes().await else { break };
            if is_file {
                uploads.push(Upload { name, bytes: bytes.to_vec() });
            } else {
                params.push(Param { name, value: String::from_utf8_lossy(&bytes).into_owned() });
            }
        }
    }
    (params, uploads)
}

/// `in.php`: starts the solve and answers its id at once; a task CaptchaAI refuses at submit
/// is answered with CaptchaAI's code.
async fn submitted(
    kv: &Kv,
    settings: &Settings,
    client: &Client,
    task: &str,
    task_type: &str,
    format: ReplyFormat,
) -> anyhow::Result<Response> {
    let start = lifecycle::Start {
        task,
        owner: &client.label,
        new_id: ids::new_numbered_id,
        keyed: None,
        wait_until: now_ms(),
        queue: settings.queue_when_busy,
    };
    let (id, answer) = lifecycle::start(kv, settings, start, &store).await.map_err(|stalled| stalled.error)?;
    let rendered = match answer {
        Answer::Refused(failure) | Answer::Unadmitted(failure) => endpoint::render_failure(format, &failure),
        Answer::Busy => endpoint::render_refusal(Some(format), HostRefusal::Busy).reply,
        Answer::Finished(result) => match Stored::read(&result)? {
            // CaptchaAI refused the task at submit: its code, as in.php answers it.
            Stored::Failed { failure, .. } => endpoint::render_failure(format, &failure.into()),
            Stored::Solved { .. } | Stored::Pending => submitted_id(format, task_type, id)?,
        },
        Answer::Pending { .. } => submitted_id(format, task_type, id)?,
        Answer::Missing | Answer::OtherRequest | Answer::Creating => {
            anyhow::bail!("in.php: a solve without a key answered as a keyed one")
        }
    };
    Ok(reply(rendered))
}

/// The reply naming solve `id` by the number `in.php` hands out.
fn submitted_id(format: ReplyFormat, task_type: &str, id: Option<String>) -> anyhow::Result<EndpointReply> {
    let number =
        id.as_deref().and_then(ids::number_of).ok_or_else(|| anyhow::anyhow!("in.php: a solve without a number"))?;
    Ok(endpoint::render_submitted(format, task_type, &number))
}

/// `res.php`.
async fn answer(
    kv: &Kv,
    settings: &Settings,
    client: &Client,
    action: ResAction,
    format: ReplyFormat,
) -> anyhow::Result<Response> {
    let rendered = match action {
        ResAction::Get(number) => {
            let (task_type, state) = state(kv, settings, client, &number).await?;
            let state = state.as_ref().map_or(SolveState::NotFound, Stored::state);
            endpoint::render_state(format, task_type.as_deref().unwrap_or_default(), &state)
        }
        ResAction::GetMany(numbers) => {
            let mut states = Vec::new();
            for number in numbers.iter().take(MAX_IDS) {
                let (_, state) = state(kv, settings, client, number).await?;
                states.push(state.as_ref().map_or(SolveState::NotFound, Stored::state));
            }
            endpoint::render_states(format, &states)
        }
        ResAction::ThreadsInfo => match threads_share(kv, settings, client).await? {
            Ok(info) => endpoint::render_threads(format, info),
            Err(failure) => endpoint::render_failure(format, &failure),
        },
        ResAction::Balance if !settings.pass_getbalance => {
            endpoint::render_refusal(Some(format), HostRefusal::Disabled).reply
        }
        ResAction::Balance => {
            let request = match account::balance_request(&settings.api_key, &settings.config) {
                Ok(request) => request,
                Err(failure) => return Ok(reply(endpoint::render_failure(format, &failure))),
            };
            match account::parse_balance(&send(kv, &request).await) {
                Ok(balance) => endpoint::render_balance(format, balance),
                Err(failure) => endpoint::render_failure(format, &failure),
            }
        }
        ResAction::ReportGood(number) => report(kv, settings, client, &number, true, format).await?,
        ResAction::ReportBad(number) => report(kv, settings, client, &number, false, format).await?,
    };
    Ok(reply(rendered))
}

/// The state of the client's solve numbered `number`, driven without waiting (a due upstream
/// request is sent; nothing waits for a later one), and its captcha type where known. `None`
/// for a number that is no solve of the client's.
async fn state(
    kv: &Kv,
    settings: &Settings,
    client: &Client,
    number: &str,
) -> anyhow::Result<(Option<String>, Option<Stored>)> {
    let Some(id) = ids::numbered_id(number) else { return Ok((None, None)) };
    let (_, answer) = lifecycle::resume(kv, settings, &id, Some(&client.label), &store, now_ms())
        .await
        .map_err(|stalled| stalled.error)?;
    Ok(match answer {
        Answer::Pending { .. } => (None, Some(Stored::Pending)),
        Answer::Finished(result) => {
            let stored = Stored::read(&result)?;
            (stored.task_type().map(str::to_owned), Some(stored))
        }
        Answer::Unadmitted(failure) => (None, Some(Stored::Failed { task_type: None, failure: (&failure).into() })),
        Answer::Missing | Answer::OtherRequest | Answer::Creating | Answer::Busy | Answer::Refused(_) => (None, None),
    })
}

/// `threadsinfo` as the client may use the plan: its share (`client_threads`) where it has one,
/// with the slots of that share busy; else the plan as CaptchaAI reports it.
async fn threads_share(kv: &Kv, settings: &Settings, client: &Client) -> anyhow::Result<Result<ThreadsInfo, Failure>> {
    let info = match plan::threads_info(kv, settings).await? {
        Ok(info) => info,
        Err(failure) => return Ok(Err(failure)),
    };
    let Some(share) = client.threads else { return Ok(Ok(info)) };
    let threads = share.min(info.threads);
    let working = budget::busy(kv, Pool::Client(&client.label), share)?.min(threads);
    Ok(Ok(ThreadsInfo { threads, working_threads: working, free: threads - working }))
}

/// `reportgood` / `reportbad` of the client's solved solve numbered `number`, forwarded with
/// its CaptchaAI task id.
async fn report(
    kv: &Kv,
    settings: &Settings,
    client: &Client,
    number: &str,
    good: bool,
    format: ReplyFormat,
) -> anyhow::Result<EndpointReply> {
    let (_, stored) = state(kv, settings, client, number).await?;
    let Some(task_id) = stored.as_ref().and_then(Stored::task_id) else {
        return Ok(endpoint::render_refusal(Some(format), HostRefusal::UnknownId).reply);
    };
    let request = match endpoint::report_request(&settings.api_key, &settings.config, &task_id, good) {
        Ok(request) => request,
        Err(failure) => return Ok(endpoint::render_failure(format, &failure)),
    };
    Ok(match endpoint::parse_report(&send(kv, &request).await) {
        Ok(()) => endpoint::render_reported(format),
        Err(failure) => endpoint::render_failure(format, &failure),
    })
}

/// Sends an account or report request (counted in the metrics).
async fn send(kv: &Kv, request: &HttpRequest) -> Result<HttpResponse, TransportError> {
    sleep_until(request.at).await;
    let reply = upstream::send(request).await;
    metrics::upstream(kv, request.kind, reply.is_ok());
    reply
}

/// The engine's reply as the response.
fn reply(rendered: EndpointReply) -> Response {
    let body = Bytes::from(rendered.body);
    let length = HeaderValue::from(body.len());
    let mut response = http::Response::new(FullBody::new(body));
    *response.status_mut() = StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&rendered.content_type) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    for header in rendered.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(header.name), HeaderValue::from_str(&header.value)) {
            headers.append(name, value);
        }
    }
    // One write under Spin: see `api::whole_response`.
    headers.insert(http::header::CONTENT_LENGTH, length);
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// How an `in.php` solve ended, as stored for `res.php` to render each time it is asked (the
/// reply's form is each request's own: `json`, `header_acao`): the engine's solution or
/// failure, and the captcha type.
#[derive(Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Stored {
    /// Not stored: a solve still in flight, as [`state`] reports it.
    #[serde(skip)]
    Pending,
    Solved {
        task_type: Option<String>,
        solution: StoredSolution,
    },
    Failed {
        task_type: Option<String>,
        failure: StoredFailure,
    },
}

impl Stored {
    fn read(result: &StoredResult) -> anyhow::Result<Stored> {
        serde_json::from_value(result.body.clone())
            .map_err(|e| anyhow::anyhow!("a stored in.php result does not read back: {e}"))
    }

    fn task_type(&self) -> Option<&str> {
        match self {
            Stored::Pending => None,
            Stored::Solved { task_type, .. } | Stored::Failed { task_type, .. } => task_type.as_deref(),
        }
    }

    fn state(&self) -> SolveState {
        match self {
            Stored::Pending => SolveState::Pending,
            Stored::Solved { solution, .. } => SolveState::Solved(solution.clone().into()),
            Stored::Failed { failure, .. } => SolveState::Failed(failure.into()),
        }
    }

    /// The CaptchaAI task id of a solved solve.
    fn task_id(&self) -> Option<String> {
        match self {
            Stored::Solved { solution, .. } => solution.task_id.clone(),
            _ => None,
        }
    }
}

/// How an `in.php` solve's ending is stored (the [`lifecycle::Render`] of its solves).
fn store(ending: &Ending) -> anyhow::Result<StoredResult> {
    let task_type = ending.task_type.map(str::to_owned);
    let stored = match ending.outcome {
        Outcome::Solved(solution) => Stored::Solved { task_type, solution: solution.into() },
        Outcome::Failed(failure) => Stored::Failed { task_type, failure: failure.into() },
    };
    Ok(StoredResult { status: 200, body: serde_json::to_value(stored)? })
}

/// The engine's `solution` record as stored.
#[derive(Clone, Serialize, Deserialize)]
struct StoredSolution {
    /// The answer: text, or compact JSON (`json: true`).
    answer: String,
    json: bool,
    user_agent: Option<String>,
    task_id: Option<String>,
    submitted_at: u64,
    solved_at: u64,
    elapsed_ms: u64,
    polls: u32,
    attempts: u32,
    expires_at: Option<u64>,
}

impl From<&crate::engine::Solution> for StoredSolution {
    fn from(s: &crate::engine::Solution) -> StoredSolution {
        let (answer, json) = match &s.answer {
            EngineAnswer::Text(text) => (text.clone(), false),
            EngineAnswer::Json(json) => (json.clone(), true),
        };
        StoredSolution {
            answer,
            json,
            user_agent: s.user_agent.clone(),
            task_id: s.task_id.clone(),
            submitted_at: s.submitted_at,
            solved_at: s.solved_at,
            elapsed_ms: s.elapsed_ms,
            polls: s.polls,
            attempts: s.attempts,
            expires_at: s.expires_at,
        }
    }
}

impl From<StoredSolution> for crate::engine::Solution {
    fn from(s: StoredSolution) -> crate::engine::Solution {
        crate::engine::Solution {
            answer: if s.json { EngineAnswer::Json(s.answer) } else { EngineAnswer::Text(s.answer) },
            user_agent: s.user_agent,
            task_id: s.task_id,
            submitted_at: s.submitted_at,
            solved_at: s.solved_at,
            elapsed_ms: s.elapsed_ms,
            polls: s.polls,
            attempts: s.attempts,
            expires_at: s.expires_at,
        }
    }
}

/// The engine's `failure` record as stored.
#[derive(Clone, Serialize, Deserialize)]
struct StoredFailure {
    code: String,
    class: StoredClass,
    origin: StoredOrigin,
    message: String,
    retry_after_ms: Option<u64>,
    field: Option<String>,
    task_id: Option<String>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredClass {
    Permanent,
    Transient,
    Unsolvable,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StoredOrigin {
    Input,
    Service,
    NoAnswer,
}

impl From<&Failure> for StoredFailure {
    fn from(f: &Failure) -> StoredFailure {
        StoredFailure {
            code: f.code.clone(),
            class: match f.class {
                FailureClass::Permanent => StoredClass::Permanent,
                FailureClass::Transient => StoredClass::Transient,
                FailureClass::Unsolvable => StoredClass::Unsolvable,
            },
            origin: match f.origin {
                FailureOrigin::Input => StoredOrigin::Input,
                FailureOrigin::Service => StoredOrigin::Service,
                FailureOrigin::NoAnswer => StoredOrigin::NoAnswer,
            },
            message: f.message.clone(),
            retry_after_ms: f.retry_after_ms,
            field: f.field.clone(),
            task_id: f.task_id.clone(),
        }
    }
}

impl From<&StoredFailure> for Failure {
    fn from(f: &StoredFailure) -> Failure {
        Failure {
            code: f.code.clone(),
            class: match f.class {
                StoredClass::Permanent => FailureClass::Permanent,
                StoredClass::Transient => FailureClass::Transient,
                StoredClass::Unsolvable => FailureClass::Unsolvable,
            },
            origin: match f.origin {
                StoredOrigin::Input => FailureOrigin::Input,
                StoredOrigin::Service => FailureOrigin::Service,
                StoredOrigin::NoAnswer => FailureOrigin::NoAnswer,
            },
            message: f.message.clone(),
            retry_after_ms: f.retry_after_ms,
            field: f.field.clone(),
            task_id: f.task_id.clone(),
        }
    }
}

impl From<StoredFailure> for Failure {
    fn from(f: StoredFailure) -> Failure {
        (&f).into()
    }
}
