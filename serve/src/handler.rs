//! One request: limits checked, the guest run in a fresh store under its deadline, the
//! response streamed back; the host's own errors as JSON.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Limits;
use crate::net::{self, Phase};
use crate::state::{App, new_store};

/// Most request headers (431 beyond).
const MAX_HEADERS: usize = 100;

pub(crate) async fn accept_loop(listener: TcpListener, app: Arc<App>, phase: watch::Receiver<Phase>) {
    let stop = phase.clone();
    net::accept_loop(listener, app.limits, phase, move |peer| {
        let (app, phase) = (app.clone(), stop.clone());
        hyper::service::service_fn(move |req| handle(app.clone(), req, peer, phase.clone()))
    })
    .await;
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type FrameResult = Result<Frame<Bytes>, BoxError>;

/// The response body: a fixed message, or the guest's body as the request task streams it.
pub(crate) enum ResponseBody {
    Fixed(Option<Bytes>),
    Streamed(mpsc::Receiver<FrameResult>),
}

impl hyper::body::Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<FrameResult>> {
        match self.get_mut() {
            ResponseBody::Fixed(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Streamed(rx) => rx.poll_recv(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ResponseBody::Fixed(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Fixed(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ResponseBody::Fixed(None) => SizeHint::with_exact(0),
            ResponseBody::Streamed(_) => SizeHint::default(),
        }
    }
}

/// A JSON error from the host itself: `{"code","class":"host","message","retry_after_s"}`
/// (the edge app's error shape), with `Retry-After` when `retry_after_s` is given.
fn host_error(status: StatusCode, code: &str, message: &str, retry_after_s: Option<u32>) -> Response<ResponseBody> {
    let body = serde_json::json!({
        "code": code,
        "class": "host",
        "message": message,
        "retry_after_s": retry_after_s,
    });
    let mut resp = Response::new(ResponseBody::Fixed(Some(Bytes::from(body.to_string()))));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(seconds) = retry_after_s {
        resp.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    resp
}

/// Every pooled instance is busy.
#[derive(Debug, thiserror::Error)]
#[error("every pooled instance is busy")]
struct PoolBusy;

/// How a request's guest task ended without (necessarily) having sent a response head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The guest answered (or its client went away).
    Done,
    /// The guest trapped or returned an error.
    Failed,
    /// Every pooled instance was busy.
    Busy,
    /// [`Limits::request_timeout`] passed.
    Deadline,
    /// The server stopped.
    Stopped,
}

impl Outcome {
    /// The response for a request whose guest never sent a head.
    fn response(self) -> Response<ResponseBody> {
        match self {
            Outcome::Done | Outcome::Failed => host_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "the application failed to answer (see the server log)",
                None,
            ),
            Outcome::Busy => host_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "every instance of the application is busy",
                Some(1),
            ),
            Outcome::Deadline => host_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "deadline_exceeded",
                "the application did not answer within the request deadline",
                Some(1),
            ),
            Outcome::Stopped => {
                host_error(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is shutting down", Some(1))
            }
        }
    }
}

/// The host's checks before a request reaches the guest: target length (414), header count
/// and size (431), declared body size (413).
fn check_limits(limits: &Limits, req: &Request<Incoming>) -> Option<Response<ResponseBody>> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len())
        + req.uri().authority().map_or(0, |a| a.as_str().len());
    if target > limits.max_uri_bytes {
        let message = format!("the request target is longer than {} bytes", limits.max_uri_bytes);
        return Some(host_error(StatusCode::URI_TOO_LONG, "uri_too_long", &message, None));
    }
    let header_bytes: usize = req.headers().iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if req.headers().len() > MAX_HEADERS || header_bytes > limits.max_header_bytes {
        let message = format!("more than {MAX_HEADERS} request headers or {} bytes of them", limits.max_header_bytes);
        return Some(host_error(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large", &message, None));
    }
    let declared = req.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes) {
        let message = format!("the request body is larger than {} bytes", limits.max_body_bytes);
        let mut resp = host_error(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", &message, None);
        // The unread body cannot be skipped cheaply: close the connection after answering.
        resp.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return Some(resp);
    }
    None
}

/// The request body as the guest reads it: fails with `connection-read-timeout` after
/// [`Limits::body_timeout`] without data, and with `http-request-body-size` past
/// [`Limits::max_body_bytes`].
struct GuardedBody {
    inner: Incoming,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    read: u64,
    max: u64,
}

impl GuardedBody {
    fn new(inner: Incoming, limits: &Limits) -> GuardedBody {
        GuardedBody {
            inner,
            idle: limits.body_timeout,
            timer: Box::pin(tokio::time::sleep(limits.body_timeout)),
            read: 0,
            max: limits.max_body_bytes,
        }
    }
}

impl hyper::body::Body for GuardedBody {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, wasmtime_wasi_http::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.read = this.read.saturating_add(data.len() as u64);
                    if this.read > this.max {
                        return Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpRequestBodySize(Some(this.read)))));
                    }
                }
                let next = tokio::time::Instant::now() + this.idle;
                this.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(wasmtime_wasi_http::Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One HTTP request: runs the guest in its own task (which outlives this function while it
/// streams the body) and answers with its response head, or a JSON error from the host.
async fn handle(
    app: Arc<App>,
    req: Request<Incoming>,
    peer: SocketAddr,
    phase: watch::Receiver<Phase>,
) -> Result<Response<ResponseBody>, Infallible> {
    if let Some(resp) = check_limits(&app.limits, &req) {
        return Ok(resp);
    }
    let what = format!("{} {}", req.method(), req.uri().path());
    let limits = app.limits;
    let req = spin_request(req, app.addr, peer).map(|body| GuardedBody::new(body, &limits));
    let deadline = Instant::now() + limits.request_timeout;
    let (head_tx, head_rx) = oneshot::channel();
    let (body_tx, body_rx) = mpsc::channel(8);
    let task_app = app.clone();
    let mut task_phase = phase.clone();
    let guest = tokio::spawn(async move {
        let run = tokio::time::timeout_at(deadline.into(), run_guest(&task_app, req, head_tx, body_tx, deadline));
        tokio::select! {
            result = run => match result {
                Ok(Ok(())) => Outcome::Done,
                Ok(Err(e)) if e.downcast_ref::<PoolBusy>().is_some() => {
                    eprintln!("serve: {what}: all pooled instances are busy; answered 503");
                    Outcome::Busy
                }
                Ok(Err(e)) => {
                    let late = Instant::now() >= deadline;
                    let text = task_app.shared.redactor.redact(&format!("{e:#}"));
                    if late {
                        eprintln!("serve: {what}: interrupted at the request deadline: {text}");
                        Outcome::Deadline
                    } else {
                        eprintln!("serve: {what}: guest failed: {text}");
                        Outcome::Failed
                    }
                }
                Err(_elapsed) => {
                    eprintln!("serve: {what}: the request deadline ({} s) passed; instance dropped", limits.request_timeout.as_secs());
                    Outcome::Deadline
                }
            },
            _ = net::stopped(&mut task_phase) => Outcome::Stopped,
        }
    });
    let mut phase = phase;
    tokio::select! {
        head = head_rx => match head {
            Ok(head) => Ok(Response::from_parts(head, ResponseBody::Streamed(body_rx))),
            Err(_) => Ok(guest.await.unwrap_or(Outcome::Failed).response()),
        },
        _ = net::stopped(&mut phase) => Ok(Outcome::Stopped.response()),
    }
}

/// Gives the guest what Spin gives it: an absolute URI (`http://HOST/path?query`) and the
/// `spin-*` headers of a component mounted at `/...`.
fn spin_request<B>(req: Request<B>, local: SocketAddr, peer: SocketAddr) -> Request<B> {
    let (mut parts, body) = req.into_parts();
    let authority = parts
        .headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<http::uri::Authority>().ok())
        .unwrap_or_else(|| {
            local.to_string().parse().unwrap_or_else(|_| http::uri::Authority::from_static("localhost"))
        });
    let path_and_query =
        parts.uri.path_and_query().cloned().unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    let path = path_and_query.path().to_owned();
    if let Ok(uri) =
        http::Uri::builder().scheme(http::uri::Scheme::HTTP).authority(authority).path_and_query(path_and_query).build()
    {
        let full = uri.to_string();
        parts.uri = uri;
        let headers = &mut parts.headers;
        let mut set = |name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), v);
            }
        };
        set("spin-full-url", &full);
        set("spin-path-info", &path);
        set("spin-matched-route", "/...");
        set("spin-raw-component-route", "/...");
        set("spin-component-route", "");
        set("spin-base-path", "/");
        set("spin-client-addr", &peer.to_string());
    }
    Request::from_parts(parts, body)
}

/// Instantiates the component in a fresh store (interrupted at `deadline`), calls its handler, sends the response head on
/// `head_tx` and streams the body into `body_tx` (all inside `run_concurrent`, which must keep
/// running while the guest writes its body). An `Err` is a guest failure to log.
async fn run_guest(
    app: &App,
    req: Request<GuardedBody>,
    head_tx: oneshot::Sender<http::response::Parts>,
    body_tx: mpsc::Sender<FrameResult>,
    deadline: Instant,
) -> anyhow::Result<()> {
    let mut store = new_store(&app.engine, &app.shared, deadline);
    let service = match app.pre.instantiate_async(&mut store).await {
        Ok(service) => service,
        // Every pooled instance is busy: the caller answers 503 (downcasts this error).
        Err(e) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
            return Err(anyhow::Error::new(PoolBusy));
        }
        Err(e) => return Err(anyhow::Error::from(e).context("instantiating the component")),
    };
    let (request, request_io) = wasmtime_wasi_http::p3::Request::from_http(&mut store.data_mut().hooks, req);
    store
        .run_concurrent(async move |accessor| -> anyhow::Result<()> {
            let response = match service
                .handle(accessor, request)
                .await
                .map_err(anyhow::Error::from)
                .context("the handler trapped")?
            {
                Ok(response) => response,
                Err(code) => bail!("the handler returned error {code:?}"),
            };
            let response = accessor
                .with(|mut access| response.into_http(&mut access, request_io))
                .map_err(anyhow::Error::from)
                .context("converting the response")?;
            let (head, mut body) = response.into_parts();
            if head_tx.send(head).is_err() {
                return Ok(()); // the client went away
            }
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(frame) => {
                        if body_tx.send(Ok(frame)).await.is_err() {
                            return Ok(()); // the client went away
                        }
                    }
                    Err(e) => {
                        let _ = body_tx.send(Err("the guest failed while writing the response body".into())).await;
                        bail!("response body: {e}");
                    }
                }
            }
            Ok(())
        })
        .await
        .map_err(anyhow::Error::from)
        .context("running the component")?
}
