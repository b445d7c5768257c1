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

/// A request body as a JSON object, refusing (422) the first field outside `known` by name.
///
/// An empty body reads as `{}` (the SDKs send none for some calls), and a field sent as
/// `null` counts as absent: the JS SDK serializes unset options that way in some versions, and
/// refusing them would refuse calls that ask nothing Antler lacks.
pub(crate) fn body_object(body: &[u8], known: &[&str]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            format!("the request body is not valid JSON ({e}); send a JSON object"),
        )
    })?;
    let Value::Object(mut fields) = value else {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "the request body must be a JSON object",
        ));
    };
    fields.retain(|_, value| !value.is_null());
    if let Some(field) = fields.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(unsupported(
            field,
            format!(
                "Antler does not support this field; known fields: {}",
                known.join(", ")
            ),
        ));
    }
    Ok(fields)
}

/// Reads one field of a body object as `T`, or 422 naming the field and the expected type.
pub(crate) fn field<T: DeserializeOwned>(
    fields: &Map<String, Value>,
    name: &str,
    expected: &str,
) -> Result<Option<T>, ApiError> {
    match fields.get(name) {
        None => Ok(None),
        Some(value) => T::deserialize(value)
            .map(Some)
            .map_err(|_| unsupported(name, format!("must be {expected}"))),
    }
}

/// The paging fields every search body shares: `limit`, `offset`, `sort_order`, `select`.
pub(crate) struct Paging {
    pub limit: usize,
    pub offset: usize,
    pub descending: bool,
    pub select: Option<Vec<String>>,
}

impl Paging {
    /// Reads them (422 naming a wrong one); `newest_first`: the order without `sort_order`,
    /// `max_limit`: the largest page served.
    pub(crate) fn read(
        fields: &Map<String, Value>,
        newest_first: bool,
        max_limit: usize,
    ) -> Result<Self, ApiError> {
        let limit = field::<usize>(fields, "limit", "a non-negative integer")?
            .unwrap_or(10)
            .min(max_limit);
        let offset = field::<usize>(fields, "offset", "a non-negative integer")?.unwrap_or(0);
        let descending =
            match field::<String>(fields, "sort_order", "\"asc\" or \"desc\"")?.as_deref() {
                None => newest_first,
                Some("asc") => false,
                Some("desc") => true,
                Some(_) => return Err(unsupported("sort_order", "must be \"asc\" or \"desc\"")),
            };
        let select = field(fields, "select", "a list of field names")?;
        Ok(Self {
            limit,
            offset,
            descending,
            select,
        })
    }
}

/// 404 for a checkpoint Antler cannot give back, saying which one it can.
pub(crate) fn checkpoint_not_found(checkpoint_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "checkpoint_not_found",
        format!(
            "no checkpoint {checkpoint_id} on this thread; Antler keeps the thread's latest \
             checkpoint only: read it with GET /threads/{{thread_id}}/state"
        ),
    )
}
