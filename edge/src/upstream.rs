//! Sends the engine's requests to CaptchaAI through Spin's outbound HTTP, with the engine's timeout.

use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{Either, select};
use spin_sdk::http::FullBody;
use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::wasip3::http::types::ErrorCode;

use crate::engine::{HttpRequest, HttpResponse, RequestBody, TransportError};

/// Sends `request` exactly as the engine built it (always a POST) and returns the reply with its
/// body as text (`String::from_utf8_lossy`), or the transport error.
pub async fn send(request: &HttpRequest) -> Result<HttpResponse, TransportError> {
    let body = Bytes::copy_from_slice(match &request.body {
        RequestBody::Form(text) => text.as_bytes(),
        RequestBody::Multipart(bytes) => bytes,
    });
    let outbound = http::Request::builder()
        .method(http::Method::POST)
        .uri(&request.url)
        .header(http::header::CONTENT_TYPE, &request.content_type)
        .body(FullBody::new(body))
        .map_err(|_| TransportError::Connect)?;
    let exchange = pin!(async {
        let response = spin_sdk::http::send(outbound).await.map_err(|code| {
            // The runtime's own error (it names no URL, no body: never the key).
            eprintln!("edge: upstream request failed: {code:?}");
            classify(code)
        })?;
        let status = response.status().as_u16();
        let body = response.into_body().bytes().await.map_err(|_| TransportError::Broken)?;
        Ok(engine_reply(status, &body))
    });
    let timeout = pin!(spin_sdk::time::sleep(Duration::from_millis(request.timeout_ms)));
    match select(exchange, timeout).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => {
            eprintln!("edge: upstream request timed out after {} ms", request.timeout_ms);
            Err(TransportError::Timeout)
        }
    }
}

/// Maps wasi-http errors to the engine's transport errors: nothing sent vs maybe sent.
fn classify(code: ErrorCode) -> TransportError {
    match code {
        ErrorCode::DnsTimeout
        | ErrorCode::DnsError(_)
        | ErrorCode::DestinationNotFound
        | ErrorCode::DestinationUnavailable
        | ErrorCode::DestinationIpProhibited
        | ErrorCode::DestinationIpUnroutable
        | ErrorCode::ConnectionRefused
        | ErrorCode::ConnectionTimeout
        | ErrorCode::TlsProtocolError
        | ErrorCode::TlsCertificateError
        | ErrorCode::HttpRequestDenied
        | ErrorCode::HttpRequestUriInvalid => TransportError::Connect,
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => TransportError::Timeout,
        _ => TransportError::Broken,
    }
}

/// A reply body as the engine takes it: text, each invalid UTF-8 sequence replaced by U+FFFD
/// (the WIT's rule for every host).
fn engine_reply(status: u16, body: &[u8]) -> HttpResponse {
    HttpResponse { status, body: String::from_utf8_lossy(body).into_owned() }
}
