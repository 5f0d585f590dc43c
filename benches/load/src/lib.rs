//! A small closed-loop HTTP/1.1 load generator for benchmarking served components: `concurrency`
//! keep-alive connections, each sending the same request back to back until `requests` are done.
//! Latency is measured per request (send to last body byte).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What to send. (`Debug` omits header values: they may hold tokens.)
#[derive(Clone)]
pub struct LoadSpec {
    /// `http://host:port/path?query` (plain HTTP only).
    pub url: String,
    /// Method of every request.
    pub method: Method,
    /// Extra headers, e.g. `authorization`.
    pub headers: Vec<(String, String)>,
    /// Body of every request.
    pub body: Bytes,
    /// Connections, each with one request in flight.
    pub concurrency: usize,
    /// Measured requests (after the warm-up).
    pub requests: usize,
    /// Requests sent first and not measured.
    pub warmup: usize,
}

impl std::fmt::Debug for LoadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadSpec")
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("body_len", &self.body.len())
            .field("concurrency", &self.concurrency)
            .field("requests", &self.requests)
            .field("warmup", &self.warmup)
            .finish()
    }
}

impl LoadSpec {
    /// `GET url` on 16 connections, 10,000 requests after 500 of warm-up.
    pub fn get(url: impl Into<String>) -> LoadSpec {
        LoadSpec {
            url: url.into(),
            method: Method::GET,
            headers: Vec::new(),
            body: Bytes::new(),
            concurrency: 16,
            requests: 10_000,
            warmup: 500,
        }
    }
}

/// Results of one run.
#[derive(Clone, Debug)]
pub struct LoadReport {
    /// Measured requests completed.
    pub requests: usize,
    /// Of those, how many had a status outside 200–299.
    pub non_2xx: usize,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// `requests / elapsed`.
    pub req_per_s: f64,
    /// Latency percentiles and maximum.
    pub p50: Duration,
    /// 90th percentile latency.
    pub p90: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Slowest request.
    pub max: Duration,
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "{} requests in {:.2} s: {:.0} req/s; latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms; non-2xx {}",
            self.requests,
            self.elapsed.as_secs_f64(),
            self.req_per_s,
            ms(self.p50),
            ms(self.p90),
            ms(self.p99),
            ms(self.max),
            self.non_2xx
        )
    }
}

/// Runs the load. Fails on connection or protocol errors (not on HTTP error statuses, which are
/// counted in [`LoadReport::non_2xx`]).
pub async fn run(spec: &LoadSpec) -> anyhow::Result<LoadReport> {
    if spec.concurrency == 0 || spec.requests == 0 {
        bail!("concurrency and requests must be positive");
    }
    let uri: Uri = spec.url.parse().context("parsing the URL")?;
    if uri.scheme_str() != Some("http") {
        bail!("only http:// URLs are supported");
    }
    let authority = uri.authority().context("the URL has no host")?.clone();
    let addr = format!("{}:{}", authority.host(), authority.port_u16().unwrap_or(80));
    let path = uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".into());

    let build = {
        let spec = spec.clone();
        let authority = authority.to_string();
        move || -> anyhow::Result<Request<Full<Bytes>>> {
            let mut req = Request::builder().method(spec.method.clone()).uri(path.as_str()).header("host", &authority);
            for (k, v) in &spec.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            Ok(req.body(Full::new(spec.body.clone()))?)
        }
    };
    let build = Arc::new(build);

    let issued = Arc::new(AtomicUsize::new(0));
    let total = spec.warmup + spec.requests;
    let warmup = spec.warmup;
    let measure_start = Arc::new(std::sync::OnceLock::<Instant>::new());
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..spec.concurrency {
        let (addr, build, issued, measure_start) = (addr.clone(), build.clone(), issued.clone(), measure_start.clone());
        workers.spawn(async move {
            let stream = TcpStream::connect(&addr).await.with_context(|| format!("connecting to {addr}"))?;
            let _ = stream.set_nodelay(true);
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut samples = Vec::new();
            let mut non_2xx = 0usize;
            loop {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    break;
                }
                if n == warmup {
                    let _ = measure_start.set(Instant::now());
                }
                let req = build()?;
                let started = Instant::now();
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let ok = resp.status().is_success();
                resp.into_body().collect().await?;
                if n >= warmup {
                    samples.push(started.elapsed());
                    non_2xx += usize::from(!ok);
                }
            }
            anyhow::Ok((samples, non_2xx))
        });
    }
    let mut samples = Vec::with_capacity(spec.requests);
    let mut non_2xx = 0;
    while let Some(joined) = workers.join_next().await {
        let (mut s, n) = joined.context("a load worker panicked")??;
        samples.append(&mut s);
        non_2xx += n;
    }
    let elapsed = measure_start.get().map(Instant::elapsed).unwrap_or_default();
    samples.sort_unstable();
    let pct = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1];
    Ok(LoadReport {
        requests: samples.len(),
        non_2xx,
        elapsed,
        req_per_s: samples.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        p50: pct(0.50),
        p90: pct(0.90),
        p99: pct(0.99),
        max: samples.last().copied().unwrap_or_default(),
    })
}
