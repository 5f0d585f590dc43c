//! The serve host's front end under abuse, over raw loopback TCP with the `edge-hello`
//! component (built as for tests/serve.rs): slowloris heads, slow bodies, a guest stuck in a
//! loop, oversized requests, too many connections, HTTP/1.0 clients, shutdown with requests in
//! flight. Every wait is bounded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use captchaai_serve::{Allocation, Limits, ServeConfig, Server};

mod support;

/// Upper bound for anything a test waits for.
const TIMEOUT: Duration = Duration::from_secs(30);

fn hello_wasm() -> PathBuf {
    let path = std::env::var_os("EDGE_HELLO_WASM").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("edge-hello/target/wasm32-wasip2/release/edge_hello.wasm")
    });
    assert!(
        path.exists(),
        "{} is missing; build it with cargo build --manifest-path host-tests/edge-hello/Cargo.toml --target wasm32-wasip2 --release",
        path.display()
    );
    path
}

fn config(limits: Limits) -> ServeConfig {
    let mut cfg = ServeConfig::new(hello_wasm());
    cfg.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    cfg.env = BTreeMap::new();
    cfg.cache_dir = Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache"));
    cfg.inherit_stdio = false;
    cfg.limits = limits;
    cfg
}

async fn start(cfg: ServeConfig) -> Server {
    tokio::time::timeout(TIMEOUT, Server::start(cfg)).await.expect("start timed out").expect("server starts")
}

/// A parsed HTTP/1.x response read off a raw connection.
#[derive(Debug)]
struct Raw {
    status_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn status(&self) -> u16 {
        self.status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {:?} {}", self.status_line, String::from_utf8_lossy(&self.body))
        })
    }
}

/// Reads one response: the head, then a body framed by Content-Length, chunked encoding, or
/// the connection closing (HTTP/1.0 style).
async fn read_response(stream: &mut TcpStream) -> Raw {
    let fut = async {
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 8192];
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed before a response head: {:?}", String::from_utf8_lossy(&buf));
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8(buf[..head_end].to_vec()).expect("utf-8 head");
        let mut rest = buf[head_end + 4..].to_vec();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap().to_owned();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(':').expect("header line");
                (n.trim().to_owned(), v.trim().to_owned())
            })
            .collect();
        let find = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
        let body = if let Some(len) = find("content-length") {
            let len: usize = len.parse().unwrap();
            while rest.len() < len {
                let mut chunk = [0u8; 8192];
                let n = stream.read(&mut chunk).await.expect("read body");
                assert!(n > 0, "closed inside a Content-Length body");
                rest.extend_from_slice(&chunk[..n]);
            }
            rest.truncate(len);
            rest
        } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            let mut body = Vec::new();
            loop {
                while !rest.windows(2).any(|w| w == b"\r\n") {
                    let mut chunk = [0u8; 8192];
                    let n = stream.read(&mut chunk).await.expect("read chunk");
                    assert!(n > 0, "closed inside a chunked body");
                    rest.extend_from_slice(&chunk[..n]);
                }
                let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
                let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap().trim(), 16).unwrap();
                while rest.len() < line_end + 2 + size + 2 {
                    let mut chunk = [0u8; 8192];
                    let n = stream.read(&mut chunk).await.expect("read chunk");
                    assert!(n > 0, "closed inside a chunk");
                    rest.extend_from_slice(&chunk[..n]);
                }
                body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
                rest.drain(..line_end + 2 + size + 2);
                if size == 0 {
                    break body;
                }
            }
        } else {
            stream.read_to_end(&mut rest).await.expect("read to close");
            rest
        };
        Raw { status_line, headers, body }
    };
    tokio::time::timeout(TIMEOUT, fut).await.expect("response timed out")
}

async fn request(addr: SocketAddr, raw: &[u8]) -> Raw {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw).await.unwrap();
    read_response(&mut stream).await
}

/// Whether the server closes `stream` (EOF or reset) within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_and_the_server_keeps_answering() {
    const SLOW: usize = 500;
    let limits = Limits { header_read_timeout: Duration::from_secs(2), ..Limits::default() };
    let server = start(config(limits)).await;
    let addr = server.addr();
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::channel::<()>(SLOW);
    let mut slow = tokio::task::JoinSet::new();
    for _ in 0..SLOW {
        let opened = opened_tx.clone();
        slow.spawn(async move {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.expect("first bytes");
            let _ = opened.send(()).await;
            // Trickle a header line every 300 ms, never finishing the head; report whether the
            // server closed the connection within 15 s.
            let mut buf = [0u8; 256];
            let started = tokio::time::Instant::now();
            while started.elapsed() < Duration::from_secs(15) {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => return true,
                        Ok(_) => {}
                    },
                    _ = tokio::time::sleep(Duration::from_millis(300)) => {
                        if stream.write_all(b"X-Slow: 1\r\n").await.is_err() {
                            return true;
                        }
                    }
                }
            }
            false
        });
    }
    drop(opened_tx);
    for _ in 0..SLOW {
        tokio::time::timeout(TIMEOUT, opened_rx.recv()).await.expect("slow connections open").expect("opened");
    }
    // All 500 are open and trickling: the service still answers promptly.
    for _ in 0..3 {
        let reply = request(addr, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert_eq!(reply.status(), 200);
        assert_eq!(reply.json()["hello"], "world");
    }
    let mut closed = 0;
    while let Some(r) = slow.join_next().await {
        closed += usize::from(r.unwrap());
    }
    assert_eq!(closed, SLOW, "every slowloris connection is closed after the header timeout");
    let reply = request(addr, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    assert_eq!(reply.status(), 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_request_body_times_out() {
    let limits = Limits { body_timeout: Duration::from_secs(1), ..Limits::default() };
    let server = start(config(limits)).await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    stream.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789").await.unwrap();
    // The guest's body read fails after 1 s: it errors out, the host answers a JSON 500.
    let reply = read_response(&mut stream).await;
    assert_eq!(reply.status(), 500, "{reply:?}");
    assert_eq!(reply.json()["class"], "host");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_stuck_in_a_loop_is_interrupted_and_its_instance_reused() {
    let limits = Limits { request_timeout: Duration::from_secs(1), ..Limits::default() };
    let mut cfg = config(limits);
    // One instance: every request below needs the slot the stuck guest held.
    cfg.allocation = Allocation::Pooling { max_instances: 1, max_memory_bytes: 64 << 20 };
    let server = start(cfg).await;
    let addr = server.addr();
    for _ in 0..2 {
        let reply = request(addr, b"GET /spin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert_eq!(reply.status(), 503, "{reply:?}");
        assert_eq!(reply.header("content-type"), Some("application/json"));
        assert_eq!(reply.header("retry-after"), Some("1"));
        assert_eq!(reply.json()["code"], "deadline_exceeded");
        let reply = request(addr, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        assert_eq!(reply.status(), 200, "the instance slot is free again: {reply:?}");
        assert_eq!(reply.json()["hello"], "world");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_errors_are_json() {
    let limits = Limits { max_body_bytes: 1 << 20, ..Limits::default() };
    let server = start(config(limits)).await;
    let addr = server.addr();
    let check = |reply: &Raw, status: u16, code: &str| {
        assert_eq!(reply.status(), status, "{reply:?}");
        assert_eq!(reply.header("content-type"), Some("application/json"), "{reply:?}");
        let body = reply.json();
        assert_eq!(body["code"], code);
        assert_eq!(body["class"], "host");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    };

    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(10_000));
    check(&request(addr, long.as_bytes()).await, 414, "uri_too_long");
    let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    check(
        &request(addr, format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes()).await,
        431,
        "headers_too_large",
    );
    let big = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "b".repeat(70_000));
    check(&request(addr, big.as_bytes()).await, 431, "headers_too_large");
    let reply = request(addr, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n").await;
    check(&reply, 413, "payload_too_large");
    assert_eq!(reply.header("connection"), Some("close"));
    // A chunked body past the limit is cut off: the guest fails, the host answers JSON.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").await.unwrap();
    let chunk = vec![b'z'; 64 << 10];
    for _ in 0..20 {
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(&chunk);
        frame.extend_from_slice(b"\r\n");
        if stream.write_all(&frame).await.is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    check(&read_response(&mut stream).await, 500, "internal_error");
    drop(stream);

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_get_json_503() {
    let limits = Limits { max_connections: 3, ..Limits::default() };
    let server = start(config(limits)).await;
    let addr = server.addr();
    // Idle connections count until the header timeout closes them. The server accepts
    // connections in the order they were made (the kernel's accept queue is first in, first
    // out) and takes a connection's slot as it accepts it, so these three hold every slot
    // before the fourth is accepted.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut extra = TcpStream::connect(addr).await.unwrap();
    let reply = read_response(&mut extra).await;
    assert_eq!(reply.status(), 503, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(reply.json()["code"], "too_many_connections");
    assert!(closed_within(&mut extra, Duration::from_secs(5)).await);
    // Each idle client hangs up; the server sees it and closes its end, freeing the slot (just
    // after the close the client sees, so the request below may meet a slot still held).
    for mut stream in idle {
        stream.shutdown().await.unwrap();
        assert!(
            closed_within(&mut stream, Duration::from_secs(5)).await,
            "the server closes a connection whose client left"
        );
    }
    let mut refused = 0;
    support::wait::until("a slot to come back", async || {
        let reply = request(addr, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
        refused += usize::from(reply.status() == 503);
        reply.status() == 200
    })
    .await;
    eprintln!("slots came back after {refused} refused requests");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_0_clients_get_framed_responses() {
    let server = start(config(Limits::default())).await;
    let addr = server.addr();
    // No Host header, no keep-alive: the body ends with Content-Length or the connection.
    for (path, check_body) in [("/", true), ("/big?n=300000", false), ("/nope", true)] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).await.unwrap();
        let reply = read_response(&mut stream).await;
        assert!(reply.status_line.starts_with("HTTP/1."), "{reply:?}");
        assert_ne!(
            reply.header("transfer-encoding").map(str::to_ascii_lowercase).as_deref(),
            Some("chunked"),
            "chunked encoding is not HTTP/1.0"
        );
        if let Some(len) = reply.header("content-length") {
            assert_eq!(len.parse::<usize>().unwrap(), reply.body.len());
        }
        assert!(
            closed_within(&mut stream, Duration::from_secs(5)).await,
            "an HTTP/1.0 connection is closed after the response"
        );
        if check_body {
            reply.json();
        } else {
            assert_eq!(reply.body.len(), 300_000);
        }
    }
    // HTTP/1.0 with keep-alive: only if the length is known may the connection stay open.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").await.unwrap();
    let reply = read_response(&mut stream).await;
    assert_eq!(reply.json()["hello"], "world");
    if reply.header("content-length").is_none() {
        assert!(closed_within(&mut stream, Duration::from_secs(5)).await);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_requests_finish_then_answers_json_503() {
    let limits = Limits { shutdown_grace: Duration::from_secs(2), ..Limits::default() };
    let server = start(config(limits)).await;
    let addr = server.addr();
    let short = tokio::spawn(request(addr, b"GET /sleep?ms=500&mark=short HTTP/1.1\r\nHost: x\r\n\r\n"));
    let long = tokio::spawn(request(addr, b"GET /sleep?ms=10000&mark=long HTTP/1.1\r\nHost: x\r\n\r\n"));
    // Shut down once both requests run in the guest (each marked the store).
    support::wait::until_stored(server.kv(), &["short", "long"]).await;
    let stopping = tokio::spawn(server.shutdown());
    // No new connections once shutting down: a connection made before the server stopped
    // accepting is served (then tried again); from then on each is refused or closed unanswered,
    // and that is so while the grace still runs (the long request not answered yet).
    let (mut served, mut turned_away) = (0, false);
    support::wait::until("new connections to be turned away, or the grace to end", async || {
        if long.is_finished() {
            return true;
        }
        turned_away = match TcpStream::connect(addr).await {
            Err(_) => true,
            Ok(mut s) => {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
                let mut answer = Vec::new();
                let _ = tokio::time::timeout(TIMEOUT, s.read_to_end(&mut answer)).await;
                served += usize::from(!answer.is_empty());
                answer.is_empty()
            }
        };
        turned_away
    })
    .await;
    assert!(turned_away, "new connections were still served when the grace ended ({served} served)");
    eprintln!("{served} connections served after the shutdown began, before the server stopped accepting");
    let short = short.await.unwrap();
    assert_eq!(short.status(), 200, "an in-flight request within the grace finishes");
    assert!(short.json()["slept_ms"].as_u64().unwrap() >= 500);
    let long = long.await.unwrap();
    assert_eq!(long.status(), 503, "{long:?}");
    assert_eq!(long.json()["code"], "shutting_down");
    tokio::time::timeout(TIMEOUT, stopping).await.expect("shutdown finishes").unwrap();
}
