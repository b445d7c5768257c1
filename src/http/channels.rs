//! `POST /channels/{name}/webhook`: one route for every adapter in webhook mode. The adapter
//! verifies and parses; the channel layer journals; the platform gets its answer only after.

use std::sync::Arc;

use antler_channel::WebhookError;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::channels::WebhookAnswer;
use crate::http::{ApiError, AppState};

pub(crate) async fn webhook(
    State(state): State<Arc<AppState>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(endpoint) = state.channels.webhook(&channel) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "channel_not_listening",
            format!(
                "no channel {channel:?} is receiving webhooks; enable channels.{channel} with a webhook mode and check `antler status`"
            ),
        )
        .into_response();
    };
    let answer = tokio::task::spawn_blocking(move || endpoint.receive(&headers, &body)).await;
    match answer {
        Ok(WebhookAnswer::Respond(response)) => {
            let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::OK);
            let mut answer = (status, Body::from(response.body)).into_response();
            if let Some(content_type) = response.content_type {
                answer
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            }
            answer
        }
        Ok(WebhookAnswer::Refused(error)) => {
            let (status, code) = match error {
                WebhookError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "webhook_unauthorized"),
                WebhookError::Malformed(_) => (StatusCode::BAD_REQUEST, "webhook_malformed"),
                WebhookError::Concealed { .. } => (StatusCode::BAD_REQUEST, "webhook_refused"),
            };
            ApiError::new(status, code, error.public_message()).into_response()
        }
        Ok(WebhookAnswer::Unavailable(detail)) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "journal_unavailable",
            format!("could not store the delivery ({detail}); retry later"),
        )
        .into_response(),
        Err(error) => ApiError::internal(error).into_response(),
    }
}
