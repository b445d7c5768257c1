//! Response helpers shared by the fakes: SSE bodies with optional per-frame delays, errors.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;

use crate::reply::Gate;

/// A `text/event-stream` response whose frames are sent `delay` apart; with `hold`, the frame
/// at that index (and every later one) waits until the gate opens.
pub(crate) fn sse_response(
    frames: Vec<String>,
    delay: Duration,
    hold: Option<(usize, Gate)>,
) -> Response {
    let stream =
        futures::stream::iter(frames.into_iter().enumerate()).then(move |(index, frame)| {
            let hold = hold.clone();
            async move {
                if let Some((at, gate)) = hold
                    && index == at
                {
                    gate.opened().await;
                }
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok::<Bytes, Infallible>(Bytes::from(frame))
            }
        });
    let mut response = Body::from_stream(stream).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// An HTTP error answer with optional `Retry-After` / `retry-after-ms` / `Location` headers.
pub(crate) fn status_response(
    status: u16,
    body: String,
    retry_after: Option<u64>,
    retry_after_ms: Option<u64>,
    location: Option<&str>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(seconds) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if let Some(millis) = retry_after_ms {
        headers.insert("retry-after-ms", HeaderValue::from(millis));
    }
    if let Some(value) = location.and_then(|l| HeaderValue::from_str(l).ok()) {
        headers.insert(header::LOCATION, value);
    }
    response
}

/// What a fake answers when its queue is empty: the test called the model more than scripted.
pub(crate) fn unscripted_response() -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, "unscripted call").into_response()
}
