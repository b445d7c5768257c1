//! Threads as the SDK sees them: search, metadata patch, state update, history. (Lane
//! lgthreads; create, get, list, delete and the state read are `http::threads`.)

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;

use crate::http::{ApiError, AppState, AuthUser};

use super::errors::not_built;

pub(crate) async fn search(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
) -> Result<Response, ApiError> {
    Err(not_built("POST /threads/search"))
}

pub(crate) async fn patch(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_thread_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("PATCH /threads/{thread_id}"))
}

pub(crate) async fn update_state(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_thread_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("POST /threads/{thread_id}/state"))
}

pub(crate) async fn history(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_thread_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("POST /threads/{thread_id}/history"))
}
