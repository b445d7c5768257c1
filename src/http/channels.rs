//! Channel webhooks: verify, journal, acknowledge. No platform parsing beyond the adapter's.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};

use crate::channels::WebhookError;
use crate::http::AppState;

const TELEGRAM_SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// `POST /channels/telegram/webhook`. 200 only once the update is journalled, so Telegram
/// retries anything the daemon could not store; a retried update is recognised and dropped.
pub(crate) async fn telegram_webhook(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let Some(webhook) = state.channels.telegram_webhook() else {
        return StatusCode::NOT_FOUND;
    };
    let secret = headers
        .get(TELEGRAM_SECRET_HEADER)
        .map(|value| value.as_bytes().to_vec());
    let result =
        tokio::task::spawn_blocking(move || webhook.receive(secret.as_deref(), &body)).await;
    match result {
        Ok(Ok(_)) => StatusCode::OK,
        Ok(Err(WebhookError::BadSecret)) => StatusCode::UNAUTHORIZED,
        // Telegram would retry a bad update forever; accept and drop it.
        Ok(Err(WebhookError::BadUpdate(detail))) => {
            tracing::warn!(detail, "Dropping an unreadable Telegram update");
            StatusCode::OK
        }
        Ok(Err(WebhookError::Store(error))) => {
            tracing::error!(%error, "Could not journal a Telegram update; Telegram will retry");
            StatusCode::SERVICE_UNAVAILABLE
        }
        Err(error) => {
            tracing::error!(%error, "Journalling a Telegram update did not finish");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}
