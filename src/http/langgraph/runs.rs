//! Runs as records: background runs, list, get, join, joining a run's stream (from the start
//! or from `Last-Event-ID`), cancel, stateless runs. (Lane lgruns; `/runs/stream` and
//! `/runs/wait` on a thread are `http::runs`.)

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;

use crate::http::{ApiError, AppState, AuthUser};

use super::errors::not_built;

pub(crate) async fn create(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_thread_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("POST /threads/{thread_id}/runs"))
}

pub(crate) async fn list(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_thread_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /threads/{thread_id}/runs"))
}

pub(crate) async fn get(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path((_thread_id, _run_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /threads/{thread_id}/runs/{run_id}"))
}

pub(crate) async fn join(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path((_thread_id, _run_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /threads/{thread_id}/runs/{run_id}/join"))
}

pub(crate) async fn join_stream(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path((_thread_id, _run_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /threads/{thread_id}/runs/{run_id}/stream"))
}

/// Cancels a run (`wait`, `action: interrupt|rollback` to come); today's behaviour meanwhile.
pub(crate) async fn cancel(
    state: State<Arc<AppState>>,
    user: AuthUser,
    path: Path<(String, String)>,
) -> Result<Response, ApiError> {
    use axum::response::IntoResponse;
    crate::http::runs::cancel(state, user, path)
        .await
        .map(IntoResponse::into_response)
}

pub(crate) async fn stateless_stream(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
) -> Result<Response, ApiError> {
    Err(not_built("POST /runs/stream"))
}

pub(crate) async fn stateless_wait(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
) -> Result<Response, ApiError> {
    Err(not_built("POST /runs/wait"))
}
