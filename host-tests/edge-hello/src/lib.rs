//! `edge-hello`: the smallest useful spin-sdk 7 HTTP component.
//!
//! `GET /` answers `{"hello":"world"}`: the baseline for benchmarking `captchaai-serve`. The other
//! routes each exercise one host feature so the host's tests can prove it works; every answer is
//! JSON. Query values are URL-decoded.
//!
//! | Route | Does | Answers |
//! |---|---|---|
//! | `GET /` | nothing | `{"hello":"world"}` |
//! | `GET /var?name=N` | `spin_sdk::variables::get(N)` | `{"value":V}` or `{"error":"undefined","detail":…}` (404) |
//! | `GET /var-strict?name=N` | same, but an error propagates out of the handler (host → 500) | `{"value":V}` |
//! | `GET /kv-open?label=L` | `Store::open(L)` | `{"ok":true}` or `{"error":…}` (404) |
//! | `PUT /kv/{key}` | `set(key, body)` | `{"ok":true}` |
//! | `GET /kv/{key}` | `get(key)` | `{"value":"<utf-8 lossy>","len":n}` or `{"value":null}` |
//! | `GET /wkv/{key}` | `wasi:keyvalue/store` `open("default")` + `get(key)`, as the edge reads a record | `{"len":n}` or `{"len":null}` |
//! | `DELETE /kv/{key}` | `delete(key)` | `{"ok":true}` |
//! | `GET /kv-exists/{key}` | `exists(key)` | `{"exists":bool}` |
//! | `GET /kv-keys` | `get_keys().collect()` (sorted) | `{"keys":[…]}` |
//! | `GET /fetch?url=U` | outbound `GET U` | `{"status":s,"body":"…"}` or `{"error":"<ErrorCode debug>"}` (502) |
//! | `GET /sleep?ms=N[&mark=K][&until=U]` | sets `K` in the default store (a test sees the request running), then `spin_sdk::time::sleep(N ms)` (capped at 10 s), ending early once `U` is in the store (looked up every 10 ms) | `{"slept_ms":…,"from_ms":…,"to_ms":…}` (wall clock, epoch ms) |
//! | `POST /echo` | reads the whole body | `{"len":n,"fnv1a":"<hex>"}` |
//! | `GET /big?n=N` | nothing | `N` bytes of `a` (capped at 16 MiB), `text/plain` |
//! | `GET /probe?url=U&var=N&ms=M` | variable + KV counter + outbound GET + sleep, in one request | `{"var_len":…,"counter":…,"status":…,"slept_ms":…}` |
//! | `GET /trap` | panics (the instance traps; host → 500) | — |
//! | `GET /spin` | loops forever without calling the host (host: deadline → interrupt, 503) | — |
//!
//! Anything else: 404 `{"error":"not found"}`.

use std::time::{Duration, Instant};

use bytes::Bytes;

use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::http::{FullBody, IntoResponse, Method, Request, Response, StatusCode};
use spin_sdk::key_value::Store;

type Answer = Response<FullBody<Bytes>>;

/// `wasi:keyvalue/store` 0.2.0-draft2 (wit/hello.wit), the edge app's key-value interface.
mod wasi_kv {
    wit_bindgen::generate!({ path: "wit", world: "captchaai:edge-hello/hello", generate_all });
    pub use wasi::keyvalue::store;
}

#[spin_sdk::http_service]
async fn handle(req: Request) -> anyhow::Result<impl IntoResponse> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let param =
        |name: &str| form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned());

    if let Some(key) = path.strip_prefix("/kv/") {
        let key = percent_decode(key);
        return kv_item(&method, &key, req).await;
    }
    if let (&Method::GET, Some(key)) = (&method, path.strip_prefix("/wkv/")) {
        let bucket = wasi_kv::store::open("default").map_err(|e| anyhow::anyhow!("open default: {e:?}"))?;
        let value = bucket.get(&percent_decode(key)).map_err(|e| anyhow::anyhow!("get: {e:?}"))?;
        return Ok(json(StatusCode::OK, serde_json::json!({ "len": value.map(|v| v.len()) })));
    }
    if let Some(key) = path.strip_prefix("/kv-exists/") {
        let store = Store::open_default().await?;
        let exists = store.exists(percent_decode(key)).await?;
        return Ok(json(StatusCode::OK, serde_json::json!({ "exists": exists })));
    }

    match (&method, path.as_str()) {
        (&Method::GET, "/") => Ok(json(StatusCode::OK, serde_json::json!({ "hello": "world" }))),
        (&Method::GET, "/var") => {
            let name = param("name").unwrap_or_default();
            Ok(match spin_sdk::variables::get(&name).await {
                Ok(value) => json(StatusCode::OK, serde_json::json!({ "value": value })),
                Err(e) => {
                    let kind = match &e {
                        spin_sdk::variables::Error::InvalidName(_) => "invalid-name",
                        spin_sdk::variables::Error::Undefined(_) => "undefined",
                        spin_sdk::variables::Error::Provider(_) => "provider",
                        spin_sdk::variables::Error::Other(_) => "other",
                    };
                    json(StatusCode::NOT_FOUND, serde_json::json!({ "error": kind, "detail": format!("{e:?}") }))
                }
            })
        }
        (&Method::GET, "/var-strict") => {
            let value = spin_sdk::variables::get(param("name").unwrap_or_default()).await?;
            Ok(json(StatusCode::OK, serde_json::json!({ "value": value })))
        }
        (&Method::GET, "/kv-open") => {
            let label = param("label").unwrap_or_default();
            Ok(match Store::open(&label).await {
                Ok(_) => json(StatusCode::OK, serde_json::json!({ "ok": true })),
                Err(e) => json(StatusCode::NOT_FOUND, serde_json::json!({ "error": format!("{e:?}") })),
            })
        }
        (&Method::GET, "/kv-keys") => {
            let store = Store::open_default().await?;
            let mut keys = store.get_keys().await.collect().await?;
            keys.sort();
            Ok(json(StatusCode::OK, serde_json::json!({ "keys": keys })))
        }
        (&Method::GET, "/fetch") => {
            let url = param("url").unwrap_or_default();
            Ok(match fetch(&url).await {
                Ok((status, body)) => json(StatusCode::OK, serde_json::json!({ "status": status, "body": body })),
                Err(e) => json(StatusCode::BAD_GATEWAY, serde_json::json!({ "error": e })),
            })
        }
        (&Method::GET, "/sleep") => {
            let ms = param("ms").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0).min(10_000);
            let (mark, until) = (param("mark"), param("until"));
            let store = if mark.is_some() || until.is_some() { Some(Store::open_default().await?) } else { None };
            if let (Some(store), Some(mark)) = (&store, mark) {
                store.set(&mark, b"1").await?;
            }
            let from_ms = epoch_ms();
            let slept = match (&store, until) {
                (Some(store), Some(until)) => sleep_until_set(store, &until, ms).await?,
                _ => sleep_ms(ms).await,
            };
            let to_ms = epoch_ms();
            Ok(json(StatusCode::OK, serde_json::json!({ "slept_ms": slept, "from_ms": from_ms, "to_ms": to_ms })))
        }
        (&Method::POST, "/echo") => {
            let body = req.into_body().bytes().await?;
            Ok(json(
                StatusCode::OK,
                serde_json::json!({ "len": body.len(), "fnv1a": format!("{:016x}", fnv1a(&body)) }),
            ))
        }
        (&Method::GET, "/big") => {
            let n = param("n").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0).min(16 << 20);
            let mut resp = Response::new(FullBody::new(Bytes::from(vec![b'a'; n])));
            resp.headers_mut().insert("content-type", "text/plain".parse()?);
            Ok(resp)
        }
        (&Method::GET, "/probe") => {
            let var_len = match param("var") {
                Some(name) => Some(spin_sdk::variables::get(name).await?.len()),
                None => None,
            };
            let store = Store::open_default().await?;
            let counter = store.get("probe-counter").await?.and_then(|v| String::from_utf8(v).ok());
            let counter = counter.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + 1;
            store.set("probe-counter", counter.to_string().as_bytes()).await?;
            let status = match param("url") {
                Some(url) => Some(fetch(&url).await.map_err(anyhow::Error::msg)?.0),
                None => None,
            };
            let ms = param("ms").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0).min(10_000);
            let slept = sleep_ms(ms).await;
            Ok(json(
                StatusCode::OK,
                serde_json::json!({ "var_len": var_len, "counter": counter, "status": status, "slept_ms": slept }),
            ))
        }
        (&Method::GET, "/trap") => panic!("edge-hello: /trap requested"),
        (&Method::GET, "/spin") => {
            // Busy forever without calling the host: only epoch interruption can stop it.
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        _ => Ok(json(StatusCode::NOT_FOUND, serde_json::json!({ "error": "not found" }))),
    }
}

/// `PUT|GET|DELETE /kv/{key}` on the default store.
async fn kv_item(method: &Method, key: &str, req: Request) -> anyhow::Result<Answer> {
    let store = Store::open_default().await?;
    match *method {
        Method::PUT | Method::POST => {
            let body = req.into_body().bytes().await?;
            store.set(key, &body).await?;
            Ok(json(StatusCode::OK, serde_json::json!({ "ok": true })))
        }
        Method::GET => Ok(match store.get(key).await? {
            Some(v) => {
                json(StatusCode::OK, serde_json::json!({ "value": String::from_utf8_lossy(&v), "len": v.len() }))
            }
            None => json(StatusCode::OK, serde_json::json!({ "value": null })),
        }),
        Method::DELETE => {
            store.delete(key).await?;
            Ok(json(StatusCode::OK, serde_json::json!({ "ok": true })))
        }
        _ => Ok(json(StatusCode::METHOD_NOT_ALLOWED, serde_json::json!({ "error": "method not allowed" }))),
    }
}

/// Outbound GET: `(status, body as lossy UTF-8)` or the error code's debug text.
async fn fetch(url: &str) -> Result<(u16, String), String> {
    let resp = spin_sdk::http::get(url).await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    let body = resp.into_body().bytes().await.map_err(|e| format!("{e:?}"))?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Sleeps `ms` with the WASI p3 clock; answers the measured milliseconds.
async fn sleep_ms(ms: u64) -> u64 {
    let started = Instant::now();
    if ms > 0 {
        spin_sdk::time::sleep(Duration::from_millis(ms)).await;
    }
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Sleeps until `key` is in `store` (looked up every 10 ms) or `ms` have passed; answers the
/// measured milliseconds.
async fn sleep_until_set(store: &Store, key: &str, ms: u64) -> anyhow::Result<u64> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(ms) && !store.exists(key).await? {
        spin_sdk::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX))
}

/// The wall clock in ms since the epoch (0 if it reads earlier).
fn epoch_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

fn json(status: StatusCode, value: serde_json::Value) -> Answer {
    let mut resp = Response::new(FullBody::new(Bytes::from(value.to_string())));
    *resp.status_mut() = status;
    resp.headers_mut().insert("content-type", spin_sdk::http::HeaderValue::from_static("application/json"));
    resp
}

fn percent_decode(s: &str) -> String {
    form_urlencoded::parse(format!("k={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
