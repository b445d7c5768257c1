//! One layer that gives every error response the API's `{"error": {"code", "message"}}` shape.
//!
//! Handlers answer with [`ApiError`] already; what is left is produced outside them: axum's
//! extractor rejections (missing `Content-Type`, invalid or mistyped JSON, bad path or query,
//! multipart framing, body limits) as plain text, the method router's empty 405, the timeout
//! layer's empty 408, `ServeFile`'s 416, and bare statuses such as a webhook's 401. Rewriting
//! them in one place covers every route, including ones added later, without a fix per handler.

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;
use crate::http::{JSON_BODY_LIMIT, REQUEST_TIMEOUT, RUN_REQUEST_TIMEOUT};

/// A multipart body over the upload route's limit.
pub(crate) const UPLOAD_TOO_LARGE: &str = "the upload is larger than uploads.max_total_size \
     allows (plus 1 MiB for the form framing); send fewer or smaller files, or raise the limit \
     in the config";

/// Most of a plain-text error body kept as detail (axum's rejections are one short line).
const DETAIL_LIMIT: usize = 4 * 1024;

/// Wraps a whole router so the rewrite sees its final answers.
///
/// `Router::layer` would wrap each route's handlers separately, inside the method router, and
/// miss what it adds afterwards (a 405's `Allow` header); a router behind `fallback_service` is
/// one service whose answers are complete.
pub(crate) fn with_json_errors(routes: Router) -> Router {
    Router::new()
        .fallback_service(routes)
        .layer(axum::middleware::from_fn(json_errors))
}

/// Passes JSON and successful responses through; rewrites any other error response.
async fn json_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(response.headers()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let detail = read_detail(body).await;
    let error = describe(
        parts.status,
        &parts.headers,
        &RequestLine {
            method: &method,
            path: &path,
        },
        &detail,
    );
    let mut rewritten = error.into_response();
    // Keep what the original said in headers (`Allow`, `Content-Range`, `Retry-After`, …).
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().append(name.clone(), value.clone());
        }
    }
    rewritten
}

struct RequestLine<'a> {
    method: &'a Method,
    path: &'a str,
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(str::trim)
        .is_some_and(|essence| {
            essence.eq_ignore_ascii_case("application/json") || essence.ends_with("+json")
        })
}

/// The original body as one line of text, with its first letter lowercased to read as a clause.
async fn read_detail(body: Body) -> String {
    let Ok(bytes) = axum::body::to_bytes(body, DETAIL_LIMIT).await else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = line.trim_end_matches('.');
    let mut chars = line.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `detail; advice`, or just the advice when the original said nothing.
fn with_detail(detail: &str, advice: &str) -> String {
    if detail.is_empty() {
        advice.to_owned()
    } else {
        format!("{detail}; {advice}")
    }
}

fn describe(
    status: StatusCode,
    headers: &HeaderMap,
    request: &RequestLine<'_>,
    detail: &str,
) -> ApiError {
    let path = request.path;
    let (code, message) = match status {
        StatusCode::BAD_REQUEST if path.ends_with("/uploads") => (
            "bad_request",
            with_detail(
                detail,
                "send multipart/form-data with one file field per file \
                 (curl: -F 'files=@report.pdf')",
            ),
        ),
        StatusCode::BAD_REQUEST => (
            "bad_request",
            with_detail(
                detail,
                "fix the request and retry (the HTTP API is described in README.md)",
            ),
        ),
        StatusCode::UNAUTHORIZED => (
            "unauthorized",
            "the request was not authenticated; check the token or secret it carries".to_owned(),
        ),
        StatusCode::NOT_FOUND => (
            "not_found",
            format!("nothing at {path}; check the URL (the HTTP API is described in README.md)"),
        ),
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = headers
                .get(header::ALLOW)
                .and_then(|value| value.to_str().ok())
                .filter(|value| !value.is_empty())
                .unwrap_or("another method");
            (
                "method_not_allowed",
                format!("{} is not allowed on {path}; use {allowed}", request.method),
            )
        }
        StatusCode::REQUEST_TIMEOUT => ("request_timeout", timeout_message(path)),
        StatusCode::PAYLOAD_TOO_LARGE => ("payload_too_large", too_large_message(path)),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            with_detail(
                detail,
                "send the body as JSON with the header 'Content-Type: application/json' \
                 (curl: --json '{...}', or -H 'Content-Type: application/json' -d '{...}')",
            ),
        ),
        StatusCode::RANGE_NOT_SATISFIABLE => ("range_not_satisfiable", range_message(headers)),
        StatusCode::UNPROCESSABLE_ENTITY => (
            "invalid_body",
            with_detail(
                detail,
                "the JSON is well formed but does not fit this endpoint; fix the named field \
                 (the request bodies are described in README.md)",
            ),
        ),
        StatusCode::SERVICE_UNAVAILABLE => (
            "unavailable",
            "the daemon cannot handle this request right now; retry in a moment".to_owned(),
        ),
        status if status.is_server_error() => {
            return ApiError::internal(format_args!("{status} {path}: {detail}"));
        }
        status => (
            "request_failed",
            with_detail(
                detail,
                &format!(
                    "the request failed with {status}; fix it and retry (the HTTP API is \
                     described in README.md)"
                ),
            ),
        ),
    };
    ApiError::new(status, code, message)
}

fn is_run_route(path: &str) -> bool {
    path.ends_with("/runs/stream")
        || path.ends_with("/runs/wait")
        // A decision that resumes a run, directly or typed as `/approve`, waits for it too.
        || path.contains("/approvals/")
        || path == "/api/commands"
}

fn timeout_message(path: &str) -> String {
    if is_run_route(path) {
        format!(
            "the run did not finish within {} minutes, so this request stopped waiting; the run \
             goes on: read its result later with GET /api/threads/{{id}}/state, and follow long \
             runs with POST /api/threads/{{id}}/runs/stream",
            RUN_REQUEST_TIMEOUT.as_secs() / 60
        )
    } else {
        format!(
            "the request did not finish within {} seconds; retry it, and check the daemon log \
             if it keeps happening",
            REQUEST_TIMEOUT.as_secs()
        )
    }
}

fn too_large_message(path: &str) -> String {
    if path.ends_with("/uploads") {
        UPLOAD_TOO_LARGE.to_owned()
    } else {
        format!(
            "the request body is larger than {} MiB, the limit for JSON bodies; send a smaller \
             body, and files through POST /api/threads/{{id}}/uploads",
            JSON_BODY_LIMIT / (1024 * 1024)
        )
    }
}

/// `ServeFile` reports the file's size as `Content-Range: bytes */<size>`.
fn range_message(headers: &HeaderMap) -> String {
    let size = headers
        .get(header::CONTENT_RANGE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("bytes */"))
        .and_then(|size| size.trim().parse::<u64>().ok());
    match size {
        Some(0) => {
            "the file is empty, so no byte range can be served; send no Range header".to_owned()
        }
        Some(size) => format!(
            "the Range header asks for bytes the file does not have, or for several ranges at \
             once; the file is {size} bytes, so ask for one range within bytes=0-{}, or send no \
             Range header for the whole file",
            size - 1
        ),
        None => "the Range header cannot be satisfied; ask for one range within the file, or \
                 send no Range header for the whole file"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests;
