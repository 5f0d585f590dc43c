//! The hyper server: request parsing (query, urlencoded, multipart), fault injection, the
//! request log and the `/_emulator/*` control endpoints.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};

use hyper::header::{CONTENT_TYPE, HeaderValue, SERVER};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::captcha::{Params, Value, codes};
use super::config::{Account, Fault, Faults};
use super::log::{RecordedRequest, Redactor};
use super::protocol::{self, Reply, SyncSolve};
use super::state::State;
use super::vocab::key_well_formed;

/// Largest request body accepted (larger gets nginx's 413 page).
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

pub(crate) struct Shared {
    pub state: Mutex<State>,
    pub start: Instant,
    pub time_scale: f64,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Virtual milliseconds since start.
    pub(crate) fn now_ms(&self) -> u64 {
        (self.start.elapsed().as_secs_f64() * 1000.0 * self.time_scale) as u64
    }

    pub(crate) fn real_delay(&self, virtual_ms: u64) -> Duration {
        Duration::from_secs_f64(virtual_ms as f64 / 1000.0 / self.time_scale)
    }
}

/// Returned from the service to make hyper close the connection without a response.
#[derive(Debug)]
struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}
impl std::error::Error for DropConnection {}

type Resp = Response<Full<Bytes>>;

fn nginx_page(status: u16, reason: &str) -> String {
    format!(
        "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    )
}

fn response(status: u16, content_type: &str, body: String) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(SERVER, HeaderValue::from_static("nginx"));
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

/// Accepts connections until `shutdown` flips (or its sender is dropped).
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    crate::net::accept_loop(listener, shutdown, move |peer| {
        let shared = shared.clone();
        hyper::service::service_fn(move |req| handle(req, peer, shared.clone()))
    })
    .await;
}

async fn parse_multipart(content_type: &str, body: Bytes) -> Option<Vec<(String, Value)>> {
    let boundary = multer::parse_boundary(content_type).ok()?;
    let stream = futures_util::stream::iter([Ok::<Bytes, Infallible>(body)]);
    let mut mp = multer::Multipart::new(stream, boundary);
    let mut out = Vec::new();
    while let Some(field) = mp.next_field().await.ok()? {
        let name = field.name().unwrap_or("").to_owned();
        let filename = field.file_name().map(str::to_owned);
        let data = field.bytes().await.ok()?;
        let value = match filename {
            Some(f) => Value::File { filename: Some(f), data },
            None => Value::Text(String::from_utf8_lossy(&data).into_owned()),
        };
        out.push((name, value));
    }
    Some(out)
}

/// Releases a `/solve.php` thread even when the client goes away mid-solve.
struct SyncGuard {
    shared: Arc<Shared>,
    acct: usize,
}

impl Drop for SyncGuard {
    fn drop(&mut self) {
        let now = self.shared.now_ms();
        self.shared.lock().sync_release(self.acct, now);
    }
}

/// The reply decided under the state lock (`None` = drop the connection).
struct Decided {
    status: u16,
    ctype: &'static str,
    text: String,
    delay_ms: u64,
    sync: Option<(usize, u64)>,
}

struct RequestView<'a> {
    method: &'a Method,
    headers: &'a hyper::HeaderMap,
    path: &'a str,
    query: &'a str,
    content_type: Option<&'a str>,
    params: &'a Params,
    body_fields: &'a [(String, Value)],
    query_key: bool,
    body_key: bool,
    json: bool,
    too_large: bool,
    malformed_body: bool,
    ip: std::net::IpAddr,
}

fn decide(shared: &Shared, r: RequestView<'_>) -> Option<Decided> {
    let RequestView {
        method,
        headers,
        path,
        query,
        content_type,
        params,
        body_fields,
        query_key,
        body_key,
        json,
        too_large,
        malformed_body,
        ip,
    } = r;
    let mut st = shared.lock();
    let now = shared.now_ms();
    st.advance(now);
    let seq = st.next_seq();
    st.stats.requests += 1;

    // The log entry, redacted.
    let redactor = Redactor::new(st.known_keys(), params.text("key"));
    let mut rec = RecordedRequest {
        seq,
        at_ms: now,
        real_ms: shared.start.elapsed().as_secs_f64() * 1000.0,
        peer: ip.to_string(),
        method: method.to_string(),
        path: redactor.redact(path),
        query: redactor.redact_query(query),
        form: body_fields
            .iter()
            .map(|(n, v)| {
                let shown = match v {
                    Value::Text(s) => redactor.form_value(n, s),
                    Value::File { filename, data } => {
                        format!(
                            "[file name={} bytes={}]",
                            redactor.redact(filename.as_deref().unwrap_or("")),
                            data.len()
                        )
                    }
                };
                (redactor.redact(n), shown)
            })
            .collect(),
        headers: headers
            .iter()
            .map(|(n, v)| (redactor.redact(n.as_str()), redactor.redact(&String::from_utf8_lossy(v.as_bytes()))))
            .collect(),
        content_type: content_type.map(|c| redactor.redact(c)),
        json,
        action: params.text("action").map(|s| redactor.redact(s)),
        captcha_method: params.text("method").map(|s| redactor.redact(s)),
        key_in_url: query_key || redactor.contains_secret(query) || redactor.contains_secret(path),
        key_in_headers: headers.iter().any(|(n, v)| {
            redactor.contains_secret(n.as_str()) || redactor.contains_secret(&String::from_utf8_lossy(v.as_bytes()))
        }),
        key_in_body: body_key
            || body_fields.iter().any(|(n, v)| {
                redactor.contains_secret(n) || matches!(v, Value::Text(s) if redactor.contains_secret(s))
            }),
        polled_id: if path == "/res.php" { params.text("id").map(|s| redactor.redact(s)) } else { None },
        task_id: None,
        status: None,
        reply_code: None,
        fault: None,
    };

    let fault = st.next_fault();
    if fault.is_some() {
        st.stats.faults += 1;
    }
    let mut delay_ms: u64 = 0;
    let mut sync: Option<(usize, u64)> = None;
    let (status, ctype, text, code): (u16, &str, String, String);
    match fault {
        Some(Fault::Drop) => {
            rec.fault = Some("drop".into());
            st.record(rec);
            return None;
        }
        Some(Fault::Html502) => {
            rec.fault = Some("html_502".into());
            (status, ctype, text, code) = (502, "text/html", nginx_page(502, "Bad Gateway"), "HTTP_502".into());
        }
        Some(Fault::Code(c)) => {
            rec.fault = Some(format!("code:{c}"));
            let (ct, body) = Reply::error(&c).render(json);
            (status, ctype, text, code) = (200, ct, body, c);
        }
        Some(Fault::PlainText(t)) => {
            rec.fault = Some("plain_text".into());
            let t = if !t.is_empty() {
                t
            } else if path == "/res.php" && params.text("action").map(str::trim) == Some("get") {
                codes::NOT_READY.to_owned()
            } else {
                codes::SERVER_ERROR.to_owned()
            };
            (status, ctype, text, code) = (200, "text/html", t.clone(), t);
        }
        Some(Fault::Status(s, b)) => {
            rec.fault = Some(format!("status:{s}"));
            let s = if (100..=999).contains(&s) { s } else { 500 };
            (status, ctype, text, code) = (s, "text/html", b, format!("HTTP_{s}"));
        }
        other => {
            if let Some(Fault::Slow(ms)) = other {
                rec.fault = Some(format!("slow:{ms}"));
                delay_ms = ms;
            }
            let reply = if too_large {
                None
            } else if malformed_body {
                Some(match st.check_ban(ip, now) {
                    Err(c) => Reply::error(c),
                    Ok(()) => Reply::error(codes::UPLOAD),
                })
            } else {
                match path {
                    "/in.php" => Some(protocol::in_php(&mut st, ip, params, now)),
                    "/res.php" => Some(protocol::res_php(&mut st, ip, params, now)),
                    "/solve.php" => Some(match protocol::solve_php(&mut st, ip, params, now) {
                        SyncSolve::Now(r) => r,
                        SyncSolve::After { acct, delay_ms: d, reply } => {
                            sync = Some((acct, d));
                            reply
                        }
                    }),
                    _ => None,
                }
            };
            match reply {
                Some(r) => {
                    rec.task_id = r.task_id;
                    let (ct, body) = r.render(json);
                    (status, ctype, text, code) = (200, ct, body, r.code);
                }
                None if too_large => {
                    (status, ctype, text, code) =
                        (413, "text/html", nginx_page(413, "Request Entity Too Large"), "HTTP_413".into())
                }
                None => {
                    (status, ctype, text, code) = (404, "text/html", nginx_page(404, "Not Found"), "HTTP_404".into())
                }
            }
        }
    }
    rec.status = Some(status);
    rec.reply_code = Some(code);
    st.record(rec);
    Some(Decided { status, ctype, text, delay_ms, sync })
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    peer: SocketAddr,
    shared: Arc<Shared>,
) -> Result<Resp, DropConnection> {
    let (parts, body) = req.into_parts();
    let mut too_large = false;
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => {
            too_large = true;
            Bytes::new()
        }
        Err(_) => return Err(DropConnection),
    };
    let path = parts.uri.path().to_owned();
    if path == "/_emulator" || path.starts_with("/_emulator/") {
        return Ok(control(&shared, &parts.method, &path, parts.uri.query().unwrap_or(""), &body));
    }

    let query = parts.uri.query().unwrap_or("").to_owned();
    let content_type = parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let ct_lower = content_type.as_deref().unwrap_or("").to_ascii_lowercase();
    let mut params = Params::default();
    for (n, v) in form_urlencoded::parse(query.as_bytes()) {
        params.pairs.push((n.into_owned(), Value::Text(v.into_owned())));
    }
    let mut body_fields: Vec<(String, Value)> = Vec::new();
    let mut malformed_body = false;
    if !too_large && !body.is_empty() {
        if ct_lower.starts_with("multipart/form-data") {
            match parse_multipart(content_type.as_deref().unwrap_or(""), body.clone()).await {
                Some(f) => {
                    body_fields = f;
                    params.multipart = true;
                }
                None => malformed_body = true,
            }
        } else if ct_lower.starts_with("application/x-www-form-urlencoded") {
            body_fields =
                form_urlencoded::parse(&body).map(|(n, v)| (n.into_owned(), Value::Text(v.into_owned()))).collect();
        }
    }
    let query_key = form_urlencoded::parse(query.as_bytes()).any(|(n, v)| n == "key" && !v.is_empty());
    let body_key = body_fields.iter().any(|(n, v)| n == "key" && matches!(v, Value::Text(s) if !s.is_empty()));
    params.pairs.extend(body_fields.iter().cloned());

    let json = matches!(params.text("json").map(str::trim), Some("1") | Some("true"));
    let decided = decide(
        &shared,
        RequestView {
            method: &parts.method,
            headers: &parts.headers,
            path: &path,
            query: &query,
            content_type: content_type.as_deref(),
            params: &params,
            body_fields: &body_fields,
            query_key,
            body_key,
            json,
            too_large,
            malformed_body,
            ip: peer.ip(),
        },
    );
    let Some(Decided { status, ctype, text, mut delay_ms, sync }) = decided else {
        return Err(DropConnection);
    };

    let guard = sync.map(|(acct, d)| {
        delay_ms += d;
        SyncGuard { shared: shared.clone(), acct }
    });
    if delay_ms > 0 {
        tokio::time::sleep(shared.real_delay(delay_ms)).await;
    }
    drop(guard);
    Ok(response(status, ctype, text))
}

fn json_response(status: u16, v: serde_json::Value) -> Resp {
    response(status, "application/json", v.to_string())
}

fn bad_json(e: serde_json::Error) -> Resp {
    // serde messages can quote the offending value (possibly a key): report position only.
    json_response(
        400,
        serde_json::json!({"error": format!("invalid JSON body ({:?} error at line {} column {})", e.classify(), e.line(), e.column())}),
    )
}

#[derive(Deserialize)]
struct ForceBody {
    #[serde(default = "one")]
    n: usize,
    fault: Fault,
}

fn one() -> usize {
    1
}

#[derive(Deserialize)]
struct ThreadsBody {
    key: String,
    threads: Option<u32>,
    occupy: Option<u32>,
    release: Option<u32>,
    plan_active: Option<bool>,
    balance: Option<f64>,
    no_plan: Option<crate::config::NoPlan>,
}

/// `/_emulator/*`: inspection and scripting for tests in any language. Never faulted, never logged.
fn control(shared: &Shared, method: &Method, path: &str, query: &str, body: &[u8]) -> Resp {
    let now = shared.now_ms();
    let mut st = shared.lock();
    st.advance(now);
    match (method.as_str(), path) {
        ("GET", "/_emulator/health") => {
            json_response(200, serde_json::json!({"status": "ok", "virtual_ms": now, "time_scale": shared.time_scale}))
        }
        ("GET", "/_emulator/requests") => {
            let since = form_urlencoded::parse(query.as_bytes())
                .find(|(n, _)| n == "since")
                .and_then(|(_, v)| v.parse::<u64>().ok())
                .unwrap_or(0);
            json_response(200, serde_json::to_value(st.requests_since(since)).unwrap_or_default())
        }
        ("DELETE", "/_emulator/requests") => {
            st.clear_log();
            json_response(200, serde_json::json!({"status": "ok"}))
        }
        ("GET", "/_emulator/faults") => json_response(200, serde_json::to_value(st.faults).unwrap_or_default()),
        ("POST", "/_emulator/faults") => match serde_json::from_slice::<Faults>(body) {
            Ok(f) => match f.validate() {
                Ok(()) => {
                    st.faults = f;
                    json_response(200, serde_json::to_value(f).unwrap_or_default())
                }
                Err(msg) => json_response(400, serde_json::json!({"error": msg})),
            },
            Err(e) => bad_json(e),
        },
        ("POST", "/_emulator/force") => match serde_json::from_slice::<ForceBody>(body) {
            Ok(b) => {
                for _ in 0..b.n.min(1_000_000) {
                    st.forced.push_back(b.fault.clone());
                }
                json_response(200, serde_json::json!({"status": "ok", "queued": st.forced.len()}))
            }
            Err(e) => bad_json(e),
        },
        ("DELETE", "/_emulator/force") => {
            st.forced.clear();
            json_response(200, serde_json::json!({"status": "ok", "queued": 0}))
        }
        ("POST", "/_emulator/threads") => match serde_json::from_slice::<ThreadsBody>(body) {
            Ok(b) => {
                let idx = match (st.account_index(&b.key), b.threads) {
                    (Some(i), _) => i,
                    (None, Some(t)) if key_well_formed(&b.key) => {
                        st.upsert_account(Account::new(b.key.clone(), t));
                        match st.account_index(&b.key) {
                            Some(i) => i,
                            None => return json_response(500, serde_json::json!({"error": "account not created"})),
                        }
                    }
                    (None, Some(_)) => {
                        return json_response(400, serde_json::json!({"error": "key must be 32 ASCII letters/digits"}));
                    }
                    (None, None) => return json_response(404, serde_json::json!({"error": "unknown key"})),
                };
                let a = st.account_mut(idx);
                if let Some(t) = b.threads {
                    a.account.threads = t;
                }
                if let Some(p) = b.plan_active {
                    a.account.plan_active = p;
                }
                if let Some(bal) = b.balance.filter(|v| v.is_finite()) {
                    a.account.balance = bal;
                }
                if let Some(n) = b.occupy {
                    a.external_busy = a.external_busy.saturating_add(n);
                }
                if let Some(n) = b.release {
                    a.external_busy = a.external_busy.saturating_sub(n);
                }
                if let Some(v) = b.no_plan {
                    a.account.no_plan = v;
                }
                st.start_queued(idx, now);
                json_response(200, serde_json::to_value(st.threads_info(idx)).unwrap_or_default())
            }
            Err(e) => bad_json(e),
        },
        ("GET", "/_emulator/stats") => json_response(200, serde_json::to_value(st.stats).unwrap_or_default()),
        ("GET", p) if p.starts_with("/_emulator/tasks/") => {
            let info = p["/_emulator/tasks/".len()..].parse::<u64>().ok().and_then(|id| st.task_info(id, now));
            match info {
                Some(t) => json_response(200, serde_json::to_value(t).unwrap_or_default()),
                None => json_response(404, serde_json::json!({"error": "unknown task"})),
            }
        }
        _ => json_response(404, serde_json::json!({"error": "no such control endpoint"})),
    }
}
