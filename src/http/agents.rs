//! Custom-agent routes: list, create, show, update, delete, history and revert the caller's
//! agents. Admins may act for another user with `?user=` (or `"user"` in a create body).
//!
//! Access rules come from [`crate::lead_agent::access`], the same the run factory applies; an
//! agent of another user is simply absent (404) unless an admin names that user.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::AppConfig;
use crate::custom_agents::{
    AgentConfig, AgentStoreError, AgentUpdate, KnownCapabilities, ModelSettings, ReasoningEffort,
    StoredAgent, VersionAuthor,
};
use crate::http::{ApiError, AppState, AuthUser};
use crate::lead_agent::AccessDenied;
use crate::lead_agent::access::{check_manage, check_read};

#[derive(Debug, Default, Deserialize)]
pub(crate) struct UserQuery {
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    name: String,
    #[serde(default)]
    description: String,
    soul: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    tool_groups: Option<Vec<String>>,
    #[serde(default)]
    skills: Option<Vec<String>>,
    #[serde(default)]
    model_settings: Option<ModelSettings>,
    #[serde(default)]
    thinking_enabled: Option<bool>,
    #[serde(default)]
    reasoning_effort: Option<ReasoningEffort>,
    /// Admins only: create the agent for this user.
    #[serde(default)]
    user: Option<String>,
}

/// A partial update: absent fields keep their value; `skills: []` disables all skills.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBody {
    soul: Option<String>,
    description: Option<String>,
    skills: Option<Vec<String>>,
    tool_groups: Option<Vec<String>>,
    model: Option<String>,
    model_settings: Option<ModelSettings>,
    thinking_enabled: Option<bool>,
    reasoning_effort: Option<ReasoningEffort>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevertBody {
    version: String,
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<UserQuery>,
) -> Result<Json<Value>, ApiError> {
    let (owner, _) = authorize(&state, &user, query.user, Access::Read)?;
    let agents = state.harness.agents().list(&owner).map_err(store_error)?;
    Ok(Json(json!({"user": owner, "agents": agents})))
}

pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<UserQuery>,
    Json(body): Json<CreateBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let (owner, config) = authorize(
        &state,
        &user,
        body.user.clone().or(query.user),
        Access::Manage,
    )?;
    if let Some(model) = &body.model {
        check_model(&config, model)?;
    }
    check_capabilities(
        &state,
        &config,
        &owner,
        body.tool_groups.as_deref(),
        body.skills.as_deref(),
    )?;
    let agent_config = AgentConfig {
        name: body.name.clone(),
        description: body.description.trim().to_string(),
        model: body.model,
        tool_groups: body.tool_groups,
        skills: body.skills,
        model_settings: body.model_settings.unwrap_or_default(),
        thinking_enabled: body.thinking_enabled,
        reasoning_effort: body.reasoning_effort,
        approvals: Default::default(),
        extra: Default::default(),
    };
    let created = state
        .harness
        .agents()
        .create_by(&owner, &body.name, &agent_config, &body.soul, author(&user))
        .map_err(store_error)?;
    tracing::info!(caller = %user.0, owner = %owner, agent = %created.config.name, "Agent created over HTTP");
    Ok((StatusCode::CREATED, Json(agent_json(&owner, &created))))
}

#[derive(Debug, Deserialize)]
pub(crate) struct CheckQuery {
    name: String,
    user: Option<String>,
}

/// `GET /api/agents/check?name=`: whether an agent of that name can be created (DeerFlow's
/// UI asks before it offers a name): the name as it would be stored, and whether it is free.
pub(crate) async fn check(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<CheckQuery>,
) -> Result<Json<Value>, ApiError> {
    let (owner, _) = authorize(&state, &user, query.user, Access::Read)?;
    let name = crate::custom_agents::normalize_agent_name(&query.name).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_agent_name",
            e.to_string(),
        )
    })?;
    let taken = state
        .harness
        .agents()
        .get(&owner, &name)
        .map_err(store_error)?
        .is_some();
    Ok(Json(json!({"available": !taken, "name": name})))
}

pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
    Query(query): Query<UserQuery>,
) -> Result<Json<Value>, ApiError> {
    let (owner, _) = authorize(&state, &user, query.user, Access::Read)?;
    let agent = state
        .harness
        .agents()
        .get(&owner, &name)
        .map_err(store_error)?
        .ok_or_else(|| agent_not_found(&name))?;
    Ok(Json(agent_json(&owner, &agent)))
}

pub(crate) async fn update(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
    Query(query): Query<UserQuery>,
    Json(body): Json<UpdateBody>,
) -> Result<Json<Value>, ApiError> {
    let (owner, config) = authorize(&state, &user, query.user, Access::Manage)?;
    if let Some(model) = &body.model {
        check_model(&config, model)?;
    }
    check_capabilities(
        &state,
        &config,
        &owner,
        body.tool_groups.as_deref(),
        body.skills.as_deref(),
    )?;
    let update = AgentUpdate {
        soul: body.soul,
        description: body.description.map(|d| d.trim().to_string()),
        skills: body.skills,
        tool_groups: body.tool_groups,
        model: body.model,
        model_settings: body.model_settings,
        thinking_enabled: body.thinking_enabled,
        reasoning_effort: body.reasoning_effort,
    };
    if update == AgentUpdate::default() {
        return Err(ApiError::bad_request(
            "nothing to update; send at least one of soul, description, skills, tool_groups, model, model_settings, thinking_enabled, reasoning_effort",
        ));
    }
    let store = state.harness.agents();
    let changed = store
        .update_by(&owner, &name, update, author(&user))
        .map_err(store_error)?;
    let agent = store
        .get(&owner, &name)
        .map_err(store_error)?
        .ok_or_else(|| agent_not_found(&name))?;
    if !changed.is_empty() {
        tracing::info!(caller = %user.0, owner = %owner, agent = %agent.config.name, changed = ?changed.fields, "Agent updated over HTTP");
    }
    let mut body = agent_json(&owner, &agent);
    body["changed"] = json!(changed.fields);
    body["archived_version"] = json!(changed.archived_version);
    Ok(Json(body))
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
    Query(query): Query<UserQuery>,
) -> Result<Json<Value>, ApiError> {
    let (owner, _) = authorize(&state, &user, query.user, Access::Manage)?;
    state
        .harness
        .agents()
        .delete(&owner, &name)
        .map_err(store_error)?;
    tracing::info!(caller = %user.0, owner = %owner, agent = %name, "Agent deleted over HTTP");
    Ok(Json(
        json!({"success": true, "name": name.to_ascii_lowercase()}),
    ))
}

pub(crate) async fn history(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
    Query(query): Query<UserQuery>,
) -> Result<Json<Value>, ApiError> {
    let (owner, _) = authorize(&state, &user, query.user, Access::Read)?;
    let store = state.harness.agents();
    let versions = store.history(&owner, &name).map_err(store_error)?;
    let current = store.current_version(&owner, &name).map_err(store_error)?;
    Ok(Json(
        json!({"name": name.to_ascii_lowercase(), "versions": versions, "current": current}),
    ))
}

pub(crate) async fn revert(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
    Query(query): Query<UserQuery>,
    Json(body): Json<RevertBody>,
) -> Result<Json<Value>, ApiError> {
    let (owner, _) = authorize(&state, &user, query.user, Access::Manage)?;
    let store = state.harness.agents();
    let archived = store
        .revert_by(&owner, &name, &body.version, author(&user))
        .map_err(store_error)?;
    let agent = store
        .get(&owner, &name)
        .map_err(store_error)?
        .ok_or_else(|| agent_not_found(&name))?;
    tracing::info!(caller = %user.0, owner = %owner, agent = %agent.config.name, version = %body.version, "Agent reverted over HTTP");
    let mut response = agent_json(&owner, &agent);
    response["reverted_to"] = json!(body.version);
    response["archived_version"] = json!(archived);
    Ok(Json(response))
}

/// Whose agents a request is about: the named user, else the caller.
enum Access {
    Read,
    Manage,
}

/// Whose agents a request acts on (the caller, or `user` for admins) and whether the caller may
/// read or manage them; also returns the config snapshot the handler checks against.
fn authorize(
    state: &AppState,
    user: &AuthUser,
    requested: Option<String>,
    access: Access,
) -> Result<(String, Arc<AppConfig>), ApiError> {
    let config = state.config.current();
    let owner = requested
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| user.0.clone());
    // The local operator (the daemon's socket) is trusted like the CLI on the data dir.
    if !user.is_operator() {
        match access {
            Access::Read => check_read(&config, &user.0, &owner),
            Access::Manage => check_manage(&config, &user.0, &owner),
        }
        .map_err(forbidden)?;
    }
    Ok((owner, config))
}

/// Who a write through these routes is recorded as: the CLI over the daemon's socket, else
/// the API caller.
fn author(user: &AuthUser) -> VersionAuthor {
    let user_id = user.0.clone();
    if user.is_operator() {
        VersionAuthor::Cli { user_id }
    } else {
        VersionAuthor::Http { user_id }
    }
}

/// Antler's `{user, agent, soul}` with the agent's fields also at the top level, where
/// DeerFlow's UI reads them (`name`, `description`, `model`, `tool_groups`, `skills`, …).
fn agent_json(owner: &str, agent: &StoredAgent) -> Value {
    let mut body = match serde_json::to_value(&agent.config) {
        Ok(Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    body.insert("user".into(), json!(owner));
    body.insert("agent".into(), json!(agent.config));
    body.insert("soul".into(), json!(agent.soul));
    Value::Object(body)
}

fn check_model(config: &AppConfig, model: &str) -> Result<(), ApiError> {
    if config.model(model).is_some() {
        return Ok(());
    }
    let names: Vec<&str> = config.models.iter().map(|m| m.name.as_str()).collect();
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "unknown_model",
        format!(
            "model '{model}' is not configured; use one of: {}",
            if names.is_empty() {
                "(no models are configured)".to_string()
            } else {
                names.join(", ")
            }
        ),
    ))
}

/// Refuses tool groups and skills that do not exist for `owner`, naming those that do.
fn check_capabilities(
    state: &AppState,
    config: &AppConfig,
    owner: &str,
    tool_groups: Option<&[String]>,
    skills: Option<&[String]>,
) -> Result<(), ApiError> {
    let catalog = state.harness.skills(config);
    let Some(known) = KnownCapabilities::of(config, &catalog, owner) else {
        return Ok(());
    };
    known.check(tool_groups, skills).map_err(|unknown| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown_tool_group_or_skill",
            unknown.to_string(),
        )
    })
}

pub(crate) fn forbidden(denied: AccessDenied) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", denied.to_string())
}

fn agent_not_found(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "agent_not_found",
        format!("no agent named '{name}' for you; list yours with GET /api/agents"),
    )
}

fn store_error(error: AgentStoreError) -> ApiError {
    use AgentStoreError as E;
    match error {
        E::InvalidName(_) | E::ReservedName { .. } => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_agent_name",
            error.to_string(),
        ),
        E::InvalidUser(_) => ApiError::bad_request(error.to_string()),
        E::Exists { .. } => ApiError::new(StatusCode::CONFLICT, "agent_exists", error.to_string()),
        E::NotFound { name } => agent_not_found(&name),
        E::VersionNotFound { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "version_not_found",
            error.to_string(),
        ),
        E::EmptySoul => ApiError::new(StatusCode::BAD_REQUEST, "empty_soul", error.to_string()),
        E::Config { .. } => ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_agent_config",
            error.to_string(),
        ),
        E::Io { .. } => ApiError::internal(error),
    }
}
