//! API errors: every failure is `{"error": {"code", "message"}, "detail": message}` with a
//! message saying what to do: `error` is Antler's documented shape, `detail` where FastAPI
//! servers put it and so where the LangGraph SDKs read it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to an HTTP client. Conversion from domain errors happens here only.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or invalid API token; send 'Authorization: Bearer <token>' with a token from gateway.api_tokens (or the ANTLER_API_TOKEN the daemon started with)",
        )
    }

    /// A listener other hosts can reach without any API token: nobody may use the API yet.
    /// The advice works in a container too, where the daemon must listen on 0.0.0.0.
    pub fn api_locked() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "api_locked",
            "the API is locked: the daemon listens on an address other hosts can reach and \
             gateway.api_tokens is empty. Set ANTLER_API_TOKEN to a long random string and \
             restart (it becomes the token of the user `local`; with Docker Compose put it in \
             .env beside docker-compose.yml, with docker run pass -e ANTLER_API_TOKEN=…), or add \
             tokens to gateway.api_tokens (re-read without a restart); then send \
             'Authorization: Bearer <token>' (the web chat asks for it once). For this machine \
             only, listen on 127.0.0.1 instead (gateway.listen, ANTLER_LISTEN)",
        )
    }

    /// Used for ids the caller may not see too, so foreign ids are indistinguishable from absent.
    pub fn thread_not_found(thread_id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "thread_not_found",
            format!(
                "no thread {thread_id}; create it with POST /api/threads or list yours with GET /api/threads"
            ),
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(%detail, "Request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle this request; check the daemon log and retry",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": {"code": self.code, "message": &self.message},
            "detail": self.message,
        });
        (self.status, Json(body)).into_response()
    }
}

impl From<crate::paths::PathError> for ApiError {
    fn from(e: crate::paths::PathError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

impl From<crate::files::uploads::UploadError> for ApiError {
    fn from(e: crate::files::uploads::UploadError) -> Self {
        use crate::files::uploads::UploadError as E;
        match e {
            E::NotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "upload_not_found", e.to_string())
            }
            E::Io(_) => ApiError::internal(e),
            E::NotDeletable(_) => {
                ApiError::new(StatusCode::CONFLICT, "upload_not_a_file", e.to_string())
            }
            E::UnusableDirectory => {
                ApiError::new(StatusCode::CONFLICT, "uploads_dir_unusable", e.to_string())
            }
            _ => ApiError::new(StatusCode::BAD_REQUEST, "invalid_filename", e.to_string()),
        }
    }
}

impl From<crate::files::artifacts::ArtifactError> for ApiError {
    fn from(e: crate::files::artifacts::ArtifactError) -> Self {
        use crate::files::artifacts::ArtifactError as E;
        match e {
            E::Forbidden => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_artifact_path",
                e.to_string(),
            ),
            E::OutsideThread(_) => ApiError::new(
                StatusCode::FORBIDDEN,
                "artifact_outside_thread",
                e.to_string(),
            ),
            E::NotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "artifact_not_found", e.to_string())
            }
        }
    }
}

/// Answers paths no route matches.
pub(crate) async fn fallback_not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such endpoint; see README.md for the HTTP API",
    )
}
