//! `POST /hooks/{endpoint}`: a delivery from another system. No API token: the signature is
//! the auth. In order: the endpoint (404), the size (413, by `Content-Length` and while
//! reading, never buffering more), the signature (401), the JSON (400), then 202 with the
//! run's ids once the delivery is recorded (and, for a chat, journalled).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::hooks::{HookError, Hooks};
use crate::http::{ApiError, AppState};

pub(crate) async fn deliver(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let hooks = state.hooks.clone();
    let endpoint = match hooks.endpoint(&name) {
        Ok(endpoint) => endpoint,
        Err(error) => return refused(&name, error),
    };
    let limit = usize::try_from(endpoint.max_body_kb)
        .unwrap_or(usize::MAX)
        .saturating_mul(1024);
    let too_large = || HookError::TooLarge {
        endpoint: name.clone(),
        limit_kb: endpoint.max_body_kb,
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return refused(&name, too_large());
    }
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, limit).await {
        Ok(body) => body,
        Err(_) => return refused(&name, too_large()),
    };
    let headers = parts.headers;
    let received = tokio::task::spawn_blocking(move || {
        let lookup = |wanted: &str| header_value(&headers, wanted);
        hooks_receive(&hooks, &name, &lookup, &body).map_err(|error| (name, error))
    })
    .await;
    match received {
        Ok(Ok(response)) => response,
        Ok(Err((name, error))) => refused(&name, error),
        Err(error) => ApiError::internal(error).into_response(),
    }
}

fn hooks_receive(
    hooks: &Hooks,
    name: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> Result<Response, HookError> {
    let received = hooks.receive(name, lookup, body)?;
    let outcome = if received.duplicate {
        "duplicate"
    } else {
        "accepted"
    };
    crate::metrics::webhook_delivery(name, outcome);
    Ok((StatusCode::ACCEPTED, Json(received.accepted)).into_response())
}

fn header_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// The error answer of a refused delivery, counted for a configured endpoint.
fn refused(name: &str, error: HookError) -> Response {
    let (status, code, outcome) = match &error {
        HookError::UnknownEndpoint(_) => (StatusCode::NOT_FOUND, "webhook_not_found", None),
        HookError::TooLarge { .. } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            Some("too_large"),
        ),
        HookError::Signature { .. } => (
            StatusCode::UNAUTHORIZED,
            "webhook_unauthorized",
            Some("unauthorized"),
        ),
        HookError::NotJson(_) => (StatusCode::BAD_REQUEST, "webhook_invalid", Some("invalid")),
        HookError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "webhook_unavailable", None),
    };
    if let Some(outcome) = outcome {
        crate::metrics::webhook_delivery(name, outcome);
    }
    if status == StatusCode::UNAUTHORIZED {
        tracing::info!(endpoint = name, %error, "Refused a webhook delivery");
    } else if status == StatusCode::SERVICE_UNAVAILABLE {
        tracing::warn!(endpoint = name, %error, "Could not accept a webhook delivery");
    }
    ApiError::new(status, code, error.to_string()).into_response()
}
