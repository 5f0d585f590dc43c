//! The serve host's HTTP/1 accept loop: a connection limit, a header-read timeout, and a
//! shutdown in two phases ([`Phase`]).
//!
//! * At most [`Limits::max_connections`] connections are served at once; one more gets a JSON
//!   `503` with `Connection: close` and is closed.
//! * A connection that has not sent a whole request head within
//!   [`Limits::header_read_timeout`] is closed (slowloris).
//! * [`Phase::Draining`]: no new connections; idle keep-alive connections close, in-flight
//!   requests carry on. [`Phase::Stopped`]: requests still waiting for their response head
//!   answer a JSON `503` (see `crate::handler`), connections get [`FLUSH_GRACE`] to write it, then
//!   are dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use crate::config::Limits;

/// Where a server is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Running,
    Draining,
    Stopped,
}

/// How long connections get after [`Phase::Stopped`] to send their last responses.
pub(crate) const FLUSH_GRACE: Duration = Duration::from_secs(2);

/// Completes once the phase is [`Phase::Stopped`] (or the server is gone).
pub(crate) async fn stopped(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|p| *p == Phase::Stopped).await.is_ok();
}

/// The response for a connection over [`Limits::max_connections`].
fn too_many_connections() -> Vec<u8> {
    let body = r#"{"code":"too_many_connections","class":"host","message":"the server is at its connection limit","retry_after_s":1}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Accepts connections until the phase leaves [`Phase::Running`], serves each on its own task,
/// and returns once every connection is closed.
pub(crate) async fn accept_loop<S, B>(
    listener: TcpListener,
    limits: Limits,
    mut phase: watch::Receiver<Phase>,
    service: impl Fn(SocketAddr) -> S,
) where
    S: hyper::service::HttpService<Incoming, ResBody = B> + Send + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            changed = phase.changed() => {
                if changed.is_err() || *phase.borrow() != Phase::Running {
                    break;
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (mut stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(_) => {
                        // e.g. too many open files: back off briefly instead of spinning.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                };
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    conns.spawn(async move {
                        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&too_many_connections())).await;
                        let _ = stream.shutdown().await;
                    });
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let svc = service(peer);
                let mut phase = phase.clone();
                let header_read_timeout = limits.header_read_timeout;
                conns.spawn(async move {
                    let _permit = permit;
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_read_timeout)
                        .keep_alive(true)
                        // Above the limits the service checks itself (which answer in JSON).
                        .max_headers(1_000)
                        .max_buf_size(1 << 20);
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => return,
                        // Draining or stopped (or the server is gone): finish what is in
                        // flight, take no new request on this connection.
                        _ = phase.changed() => conn.as_mut().graceful_shutdown(),
                    }
                    tokio::select! {
                        _ = conn.as_mut() => return,
                        _ = stopped(&mut phase) => {}
                    }
                    let _ = tokio::time::timeout(FLUSH_GRACE, conn.as_mut()).await;
                });
            }
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}
