//! Memory routes: the caller's own long-term memory (users own theirs). `?agent=NAME` selects a
//! custom agent's memory; without it, the default agent's.
//!
//! `GET/DELETE /api/memory`, `POST /api/memory/facts`, `PATCH/DELETE /api/memory/facts/{id}`,
//! `POST /api/memory/facts/{id}/confirm` (a fact learned from untrusted content is used),
//! `GET /api/memory/export`, `POST /api/memory/import`. Documents are the seed's JSON shape.
//! History and revert have their own file, `memory_history.rs`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::http::{ApiError, AppState, AuthUser};
use crate::memory::document::{Fact, FactCategory, MemoryDocument, normalize};
use crate::memory::{MemoryError, MemoryRepo, MemoryScope, WriteSource};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentQuery {
    agent: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewFactBody {
    content: String,
    category: FactCategory,
    /// A fact the user states is certain unless they say otherwise.
    #[serde(default = "full_confidence")]
    confidence: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchFactBody {
    content: Option<String>,
    category: Option<FactCategory>,
    confidence: Option<f64>,
}

fn full_confidence() -> f64 {
    1.0
}

pub(crate) fn repo(state: &AppState) -> Result<&MemoryRepo, ApiError> {
    state
        .harness
        .memory()
        .map(|memory| &memory.repo)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "memory_unavailable",
                "long-term memory is not running in this process; check the daemon log",
            )
        })
}

pub(crate) fn scope(user: &AuthUser, query: &AgentQuery) -> Result<MemoryScope, ApiError> {
    let agent = match query.agent.as_deref() {
        Some(name) => Some(
            crate::custom_agents::normalize_agent_name(name)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        ),
        None => None,
    };
    Ok(MemoryScope::new(user.0.clone(), agent.as_deref()))
}

pub(crate) fn memory_error(error: MemoryError) -> ApiError {
    match error {
        MemoryError::FactNotFound { .. } => {
            ApiError::new(StatusCode::NOT_FOUND, "fact_not_found", error.to_string())
        }
        MemoryError::VersionNotFound { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "version_not_found",
            error.to_string(),
        ),
        MemoryError::InvalidDocument(_) => {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_memory", error.to_string())
        }
        other => ApiError::internal(other),
    }
}

pub(crate) fn api_source(request: &str) -> WriteSource {
    WriteSource::Api {
        request: request.to_string(),
    }
}

fn check_fact(content: &str, confidence: f64) -> Result<(), ApiError> {
    if content.trim().is_empty() {
        return Err(ApiError::bad_request("content must not be empty"));
    }
    if !(0.0..=1.0).contains(&confidence) {
        return Err(ApiError::bad_request("confidence must be between 0 and 1"));
    }
    Ok(())
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
) -> Result<Json<MemoryDocument>, ApiError> {
    let scope = scope(&user, &query)?;
    Ok(Json(repo(&state)?.load(&scope).map_err(memory_error)?))
}

pub(crate) async fn clear(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
) -> Result<Json<Value>, ApiError> {
    let scope = scope(&user, &query)?;
    let source = api_source("DELETE /api/memory");
    let deleted = repo(&state)?.clear(&scope, &source).map_err(memory_error)?;
    let mut body = with_document(&state, &scope, json!({}))?;
    body["deleted_facts"] = json!(deleted);
    Ok(Json(body))
}

/// `fields` (Antler's answer: a fact, a count) with the whole memory document beside them,
/// which DeerFlow's UI reads back after every change (`version`, `lastUpdated`, `user`,
/// `history`, `facts`: no name a fact or a count uses).
fn with_document(state: &AppState, scope: &MemoryScope, fields: Value) -> Result<Value, ApiError> {
    let Value::Object(document) =
        serde_json::to_value(repo(state)?.load(scope).map_err(memory_error)?)
            .map_err(ApiError::internal)?
    else {
        return Ok(fields);
    };
    let mut body = match fields {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    for (key, value) in document {
        body.entry(key).or_insert(value);
    }
    Ok(Value::Object(body))
}

pub(crate) async fn add_fact(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
    Json(body): Json<NewFactBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_fact(&body.content, body.confidence)?;
    let scope = scope(&user, &query)?;
    let fact = Fact::new(&body.content, body.category, body.confidence, "api");
    let key = normalize(&fact.content);
    let source = api_source("POST /api/memory/facts");
    let (_, added) = repo(&state)?
        .update(&scope, &source, |doc, forgotten| {
            if doc.facts.iter().any(|f| normalize(&f.content) == key) {
                return Ok(false);
            }
            // Writing it back by hand un-forgets it.
            forgotten.retain(|f| *f != key);
            doc.facts.push(fact.clone());
            Ok(true)
        })
        .map_err(memory_error)?;
    if !added {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "fact_exists",
            "a fact with this content already exists; change it with PATCH /api/memory/facts/{id}",
        ));
    }
    let body = with_document(&state, &scope, json!(fact))?;
    Ok((StatusCode::CREATED, Json(body)))
}

pub(crate) async fn patch_fact(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
    Query(query): Query<AgentQuery>,
    Json(body): Json<PatchFactBody>,
) -> Result<Json<Value>, ApiError> {
    check_fact(
        body.content.as_deref().unwrap_or("unchanged"),
        body.confidence.unwrap_or(1.0),
    )?;
    let scope = scope(&user, &query)?;
    let source = api_source(&format!("PATCH /api/memory/facts/{id}"));
    let (_, fact) = repo(&state)?
        .update(&scope, &source, |doc, _| {
            let fact = doc
                .facts
                .iter_mut()
                .find(|f| f.id == id)
                .ok_or_else(|| MemoryError::FactNotFound { id: id.clone() })?;
            if let Some(content) = &body.content {
                fact.content = content.trim().to_string();
            }
            if let Some(category) = body.category {
                fact.category = category;
            }
            if let Some(confidence) = body.confidence {
                fact.confidence = confidence;
            }
            Ok(fact.clone())
        })
        .map_err(memory_error)?;
    Ok(Json(with_document(&state, &scope, json!(fact))?))
}

/// Confirms a fact learned while the conversation held untrusted content (`source:
/// "untrusted"`): it is injected from now on. Confirming a confirmed fact changes nothing.
pub(crate) async fn confirm_fact(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
    Query(query): Query<AgentQuery>,
) -> Result<Json<Fact>, ApiError> {
    let scope = scope(&user, &query)?;
    let source = api_source(&format!("POST /api/memory/facts/{id}/confirm"));
    let (fact, _) = repo(&state)?
        .confirm_fact(&scope, &id, &source)
        .map_err(memory_error)?;
    Ok(Json(fact))
}

pub(crate) async fn delete_fact(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
    Query(query): Query<AgentQuery>,
) -> Result<StatusCode, ApiError> {
    let scope = scope(&user, &query)?;
    let source = api_source(&format!("DELETE /api/memory/facts/{id}"));
    repo(&state)?
        .delete_fact(&scope, &id, &source)
        .map_err(memory_error)?;
    Ok(StatusCode::NO_CONTENT)
}

pub(crate) async fn export(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let scope = scope(&user, &query)?;
    let doc = repo(&state)?.load(&scope).map_err(memory_error)?;
    Ok((
        [(
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"memory.json\"",
        )],
        Json(doc),
    ))
}

pub(crate) async fn import(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<AgentQuery>,
    Json(doc): Json<MemoryDocument>,
) -> Result<Json<MemoryDocument>, ApiError> {
    let scope = scope(&user, &query)?;
    let written = repo(&state)?
        .replace(&scope, doc, &WriteSource::Import)
        .map_err(memory_error)?;
    Ok(Json(written))
}
