//! Sends the engine's requests over real HTTP (HTTP/1.1, HTTPS via rustls, pooled connections)
//! and reports replies or transport errors. It knows nothing about the protocol.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;

use crate::clock::Clock;
use crate::component::{HttpRequest, HttpResponse, RequestBody, TransportError};

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A pooled HTTP client with a cap on requests in flight.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
    clock: Clock,
    in_flight: Arc<Semaphore>,
}

impl HttpClient {
    /// A client whose timeouts run on `clock` (a scaled clock shortens them in real time) and
    /// that keeps at most `max_in_flight` requests open at once.
    pub fn new(clock: Clock, max_in_flight: usize) -> HttpClient {
        let connector =
            hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(max_in_flight).build(connector);
        HttpClient { client, clock, in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))) }
    }

    /// Sends `request` exactly as given; the body of the reply is read as text (invalid UTF-8
    /// becomes U+FFFD, as the WIT contract says).
    pub async fn send(&self, request: &HttpRequest) -> Result<HttpResponse, TransportError> {
        let _permit = self.in_flight.acquire().await.map_err(|_| TransportError::Connect)?;
        let body = match &request.body {
            RequestBody::Form(text) => Bytes::copy_from_slice(text.as_bytes()),
            RequestBody::Multipart(bytes) => Bytes::copy_from_slice(bytes),
        };
        let http_request = hyper::Request::builder()
            .method(hyper::Method::POST) // the WIT: every request is a POST
            .uri(&request.url)
            .header(hyper::header::CONTENT_TYPE, &request.content_type)
            .body(Full::new(body))
            .map_err(|_| TransportError::Connect)?;
        let exchange = async {
            let response = self
                .client
                .request(http_request)
                .await
                .map_err(|e| if e.is_connect() { TransportError::Connect } else { TransportError::Broken })?;
            let status = response.status().as_u16();
            let bytes = response.into_body().collect().await.map_err(|_| TransportError::Broken)?.to_bytes();
            Ok(HttpResponse { status, body: String::from_utf8_lossy(&bytes).into_owned() })
        };
        match tokio::time::timeout(self.clock.real_duration(request.timeout_ms), exchange).await {
            Ok(result) => result,
            Err(_) => Err(TransportError::Timeout),
        }
    }
}
