//! Thread routes: list, delete, and the ownership check every thread route makes. (Create,
//! get and the state read answer the SDK's shapes too: `langgraph::threads`.)

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::{ApiError, AppState, AuthUser};
use crate::paths::validate_id;
use antler_store::ThreadRecord;

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
