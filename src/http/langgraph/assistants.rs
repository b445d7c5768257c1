//! Assistants: `lead_agent` (the default agent) and each of the caller's custom agents, its
//! name as `assistant_id`. (Lane lgthreads.)

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;

use crate::http::{ApiError, AppState, AuthUser};

use super::errors::not_built;

/// The default agent's assistant id (DeerFlow's graph name).
#[allow(dead_code)]
pub(crate) const LEAD_AGENT: &str = "lead_agent";

/// The agent an `assistant_id` selects, as `context.agent_name` does: `None` for the default
/// agent, else the custom agent of that name.
pub(crate) fn agent_of(assistant_id: &str) -> Option<&str> {
    (assistant_id != LEAD_AGENT).then_some(assistant_id)
}

pub(crate) async fn search(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
) -> Result<Response, ApiError> {
    Err(not_built("POST /assistants/search"))
}

pub(crate) async fn get(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_assistant_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /assistants/{assistant_id}"))
}

pub(crate) async fn graph(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_assistant_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /assistants/{assistant_id}/graph"))
}

pub(crate) async fn schemas(
    State(_state): State<Arc<AppState>>,
    _user: AuthUser,
    Path(_assistant_id): Path<String>,
) -> Result<Response, ApiError> {
    Err(not_built("GET /assistants/{assistant_id}/schemas"))
}
