//! Memory history routes: `GET /api/memory/history` lists the kept versions of the caller's
//! memory (newest first, without their documents), `GET /api/memory/history/{version}` returns
//! one with its document, and `POST /api/memory/revert` with `{"version": n}` puts one back as a
//! new version. `?agent=NAME` selects a custom agent's memory, as on the other memory routes.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::memory::{AgentQuery, api_source, memory_error, repo, scope};
use crate::http::{ApiError, AppState, AuthUser};
use crate::memory::MemoryVersion;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevertBody {
    version: u64,
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
) -> Result<Json<Value>, ApiError> {
    let scope = scope(&user, &query)?;
    let repo = repo(&state)?;
    let versions = repo.history(&scope).map_err(memory_error)?;
    let versions: Vec<Value> = versions.iter().map(listing).collect();
    Ok(Json(json!({
        "limit": repo.history_limit(),
        "versions": versions,
    })))
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(version): Path<u64>,
    Query(query): Query<AgentQuery>,
) -> Result<Json<MemoryVersion>, ApiError> {
    let scope = scope(&user, &query)?;
    let version = repo(&state)?
        .version(&scope, version)
        .map_err(memory_error)?;
    Ok(Json(version))
}

pub(crate) async fn revert(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
    Json(body): Json<RevertBody>,
) -> Result<Json<Value>, ApiError> {
    let scope = scope(&user, &query)?;
    let source = api_source(&format!(
        "POST /api/memory/revert (version {})",
        body.version
    ));
    let reverted = repo(&state)?
        .revert(&scope, body.version, &source)
        .map_err(memory_error)?;
    Ok(Json(json!({
        "restored": body.version,
        // `null` when the memory already matched that version (nothing was written).
        "version": reverted.version,
        "memory": reverted.document,
    })))
}

/// A version without its document, plus the one-line change summary chat shows.
fn listing(version: &MemoryVersion) -> Value {
    json!({
        "version": version.version,
        "at": version.at,
        "source": version.source,
        "restores": version.restores,
        "changes": version.changes,
        "summary": version.changes.describe(),
    })
}
