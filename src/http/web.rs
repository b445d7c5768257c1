//! `GET /`: a single-page web chat on the HTTP API, so a fresh install can be used from a
//! browser with no set-up (on loopback without tokens it acts as the local user). It keeps its
//! thread id in the browser and rebuilds the conversation from `/state` after a reload.

use axum::http::header;
use axum::response::IntoResponse;

const CHAT_PAGE: &str = include_str!("assets/chat.html");

pub(crate) async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
            ),
        ],
        CHAT_PAGE,
    )
}
