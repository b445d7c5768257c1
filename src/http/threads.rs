//! Thread routes: create (idempotent), list, get, state, delete; the SDK's `Thread` and
//! `ThreadState` shapes (`langgraph::shapes`) beside Antler's documented fields.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use crate::http::langgraph::errors::{body_object, field, unsupported};
use crate::http::langgraph::shapes;
use crate::http::{ApiError, AppState, AuthUser};
use crate::paths::validate_id;
use antler_store::ThreadRecord;
use antler_store::state::ThreadState;

/// Fields a create body may carry: Antler's (`thread_id`, `metadata`) and the SDK's
/// (`if_exists`, `supersteps` when empty); anything else is a 422 naming it.
const CREATE_FIELDS: [&str; 4] = ["thread_id", "metadata", "if_exists", "supersteps"];

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

/// Creates a thread, or answers the caller's existing thread of that id (`if_exists`:
/// `do_nothing`, Antler's behaviour by default; `raise` refuses with 409 as LangGraph does).
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let fields = body_object(&body, &CREATE_FIELDS)?;
    let thread_id: Option<String> = field(&fields, "thread_id", "a string")?;
    let metadata: Map<String, Value> = field(&fields, "metadata", "an object")?.unwrap_or_default();
    let raise =
        match field::<String>(&fields, "if_exists", "\"raise\" or \"do_nothing\"")?.as_deref() {
            None | Some("do_nothing") => false,
            Some("raise") => true,
            Some(other) => {
                return Err(unsupported(
                    "if_exists",
                    format!("{other:?} is not supported; use \"raise\" or \"do_nothing\""),
                ));
            }
        };
    if fields
        .get("supersteps")
        .is_some_and(|steps| steps.as_array().is_none_or(|steps| !steps.is_empty()))
    {
        return Err(unsupported(
            "supersteps",
            "Antler does not replay state updates at creation; create the thread, then POST \
             its state or start a run",
        ));
    }
    if let Some(id) = &thread_id {
        validate_id("thread", id)?;
        if let Some(existing) = state
            .harness
            .threads()
            .get(id)
            .map_err(ApiError::internal)?
        {
            if existing.user_id != user.0 {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "thread_id_taken",
                    "that thread_id cannot be used; omit thread_id to get a fresh one",
                ));
            }
            if raise {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "thread_exists",
                    format!(
                        "thread {id} already exists; omit if_exists (or send \"do_nothing\") \
                         to get it back, or choose another thread_id"
                    ),
                ));
            }
            let (_, values) = shapes::latest(&state, id)?;
            return Ok((
                StatusCode::OK,
                Json(shapes::thread(&state, &existing, Some(&values))),
            ));
        }
    }
    let record = state
        .harness
        .create_thread(&user.0, thread_id, metadata)
        .map_err(ApiError::internal)?;
    Ok((
        StatusCode::OK,
        Json(shapes::thread(
            &state,
            &record,
            Some(&ThreadState::default()),
        )),
    ))
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

/// The thread as the SDK's `Thread` (with its `values`), beside the record's own fields.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = owned_thread(&state, &user, &thread_id)?;
    let (_, values) = shapes::latest(&state, &thread_id)?;
    Ok(Json(shapes::thread(&state, &record, Some(&values))))
}

/// The thread's latest state as the SDK's `ThreadState` (today's `thread_id`, `status` and
/// `values` among its fields).
pub(crate) async fn state(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = owned_thread(&state, &user, &thread_id)?;
    let (head, values) = shapes::latest(&state, &thread_id)?;
    Ok(Json(shapes::state(&state, &record, head.as_ref(), &values)))
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
