//! Thread routes: create (idempotent), list, get, state, delete.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::http::{ApiError, AppState, AuthUser};
use crate::paths::validate_id;
use antler_store::ThreadRecord;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CreateThread {
    thread_id: Option<String>,
    metadata: Map<String, Value>,
    /// LangGraph clients send this; only the default behaviour (return existing) is supported.
    if_exists: Option<String>,
}

/// The caller's thread, or 404 (also for threads of other users: existence is not revealed).
pub(crate) fn owned_thread(
    state: &AppState,
    user: &AuthUser,
    thread_id: &str,
) -> Result<ThreadRecord, ApiError> {
    validate_id("thread", thread_id)?;
    state
        .harness
        .get_thread(&user.0, thread_id)
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::thread_not_found(thread_id))
}

pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    body: Option<Json<CreateThread>>,
) -> Result<(StatusCode, Json<ThreadRecord>), ApiError> {
    let Json(body) = body.unwrap_or_default();
    if let Some(mode) = body.if_exists.as_deref()
        && mode != "do_nothing"
    {
        return Err(ApiError::bad_request(
            "if_exists supports only \"do_nothing\" (return the existing thread)",
        ));
    }
    if let Some(id) = &body.thread_id {
        validate_id("thread", id)?;
        if let Some(existing) = state
            .harness
            .threads()
            .get(id)
            .map_err(ApiError::internal)?
        {
            if existing.user_id == user.0 {
                return Ok((StatusCode::OK, Json(existing)));
            }
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "thread_id_taken",
                "that thread_id cannot be used; omit thread_id to get a fresh one",
            ));
        }
    }
    let record = state
        .harness
        .create_thread(&user.0, body.thread_id, body.metadata)
        .map_err(ApiError::internal)?;
    Ok((StatusCode::OK, Json(record)))
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
) -> Result<Json<Value>, ApiError> {
    let threads = state
        .harness
        .list_threads(&user.0)
        .map_err(ApiError::internal)?;
    Ok(Json(json!({"threads": threads})))
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<ThreadRecord>, ApiError> {
    owned_thread(&state, &user, &thread_id).map(Json)
}

pub(crate) async fn state(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = owned_thread(&state, &user, &thread_id)?;
    let values = state
        .harness
        .thread_state(&thread_id)
        .await
        .map_err(ApiError::internal)?
        .unwrap_or_default();
    Ok(Json(json!({
        "thread_id": thread_id,
        "status": record.status,
        "values": values,
    })))
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    owned_thread(&state, &user, &thread_id)?;
    state
        .harness
        .delete_thread(&user.0, &thread_id)
        .map_err(|e| match e {
            crate::harness::RunError::Busy { .. } => ApiError::new(
                StatusCode::CONFLICT,
                "thread_busy",
                "the thread is running; cancel the run first, then delete it",
            ),
            crate::harness::RunError::NotFound { .. } => ApiError::thread_not_found(&thread_id),
            other => ApiError::internal(other),
        })?;
    // The thread's files go with it (uploads, outputs, workspace).
    let paths =
        crate::paths::ThreadPaths::new(&state.config.current().data_dir(), &user.0, &thread_id)?;
    if let Some(thread_dir) = paths.user_data().parent() {
        match std::fs::remove_dir_all(thread_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ApiError::internal(e)),
        }
    }
    Ok(Json(json!({"success": true, "thread_id": thread_id})))
}
