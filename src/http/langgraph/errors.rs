//! What the SDKs read of a refusal.
//!
//! Every `ApiError` body carries `detail` (the message, where FastAPI and so the SDKs look)
//! beside Antler's own `{"error": {code, message}}`; see `http::error`. A request shape Antler
//! does not support answers 422 naming the field, so a client learns which argument to drop.

use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::http::ApiError;

/// 422 for a field Antler does not support (or a value of it), naming the field and why.
pub(crate) fn unsupported(field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unsupported_field",
        format!("{field}: {why}"),
    )
}
