//! The HTTP/1.1 accept loop shared by the emulator and the Spin host.

use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Accepts connections until `shutdown` flips (or its sender is dropped), serving each on its own
/// task with keep-alive; `service` makes the connection's service from the peer address. Open
/// connections are aborted on shutdown.
pub async fn accept_loop<S, B>(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    service: impl Fn(SocketAddr) -> S,
) where
    S: hyper::service::HttpService<Incoming, ResBody = B> + Send + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(_) => {
                        // e.g. too many open files: back off briefly instead of spinning.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let svc = service(peer);
                conns.spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}
