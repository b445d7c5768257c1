//! Assistants: `lead_agent` (the default agent) and each of the caller's custom agents, its
//! name as `assistant_id`, in the SDK's `Assistant` shape.
//!
//! Every assistant runs the one graph, `lead_agent` (DeerFlow's graph name): a custom agent is
//! the lead agent with its SOUL.md and config. Only the caller's own agents are listed, as
//! `GET /api/agents` lists them; another user's agent reads as absent (404).

use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::custom_agents::AgentConfig;
use crate::http::{ApiError, AppState, AuthUser};

use super::errors::{Paging, body_object, field, unsupported};
use super::threads::contains;

/// The default agent's assistant id (DeerFlow's graph name).
pub(crate) const LEAD_AGENT: &str = "lead_agent";

/// The agent an `assistant_id` selects, as `context.agent_name` does: `None` for the default
/// agent, else the custom agent of that name.
pub(crate) fn agent_of(assistant_id: &str) -> Option<&str> {
    (assistant_id != LEAD_AGENT).then_some(assistant_id)
}

/// When the default assistant "was created": the daemon's start, so it stays the same across
/// calls (clients cache assistants by id and compare timestamps).
static STARTED_AT: LazyLock<DateTime<Utc>> = LazyLock::new(Utc::now);

const SEARCH_FIELDS: [&str; 8] = [
    "graph_id",
    "metadata",
    "name",
    "limit",
    "offset",
    "sort_by",
    "sort_order",
    "select",
];

/// `POST /assistants/search`: `lead_agent` and the caller's agents, filtered by `graph_id`,
/// `metadata` (JSON containment) and `name` (a case-insensitive part of it), sorted and paged.
pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    body: Bytes,
) -> Result<Json<Vec<Value>>, ApiError> {
    let fields = body_object(&body, &SEARCH_FIELDS)?;
    let graph_id: Option<String> = field(&fields, "graph_id", "a string")?;
    let metadata: Option<Value> = field(&fields, "metadata", "an object")?;
    let name = field::<String>(&fields, "name", "a string")?.map(|name| name.to_lowercase());
    let sort_by = field::<String>(&fields, "sort_by", "a string")?;
    let Paging {
        limit,
        offset,
        descending,
        select,
    } = Paging::read(&fields, false, usize::MAX)?;
    let key = match sort_by.as_deref() {
        None => None,
        Some(key @ ("assistant_id" | "graph_id" | "name" | "created_at" | "updated_at")) => {
            Some(key.to_string())
        }
        Some(_) => {
            return Err(unsupported(
                "sort_by",
                "must be one of assistant_id, graph_id, name, created_at, updated_at",
            ));
        }
    };

    let mut found: Vec<Value> = all(&state, &user)?
        .into_iter()
        .filter(|a| {
            graph_id
                .as_ref()
                .is_none_or(|g| a["graph_id"] == g.as_str())
        })
        .filter(|a| {
            metadata
                .as_ref()
                .is_none_or(|m| contains(&a["metadata"], m))
        })
        .filter(|a| {
            name.as_ref().is_none_or(|part| {
                a["name"]
                    .as_str()
                    .is_some_and(|n| n.to_lowercase().contains(part))
            })
        })
        .collect();
    if let Some(key) = key {
        // Timestamps are RFC 3339 strings of one format: their text order is their time order.
        found.sort_by(|a, b| {
            let order = a[&key]
                .as_str()
                .cmp(&b[&key].as_str())
                .then_with(|| a["assistant_id"].as_str().cmp(&b["assistant_id"].as_str()));
            if descending { order.reverse() } else { order }
        });
    } else if descending {
        found.reverse();
    }
    Ok(Json(
        found
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|a| match &select {
                Some(select) => keep(a, select),
                None => a,
            })
            .collect(),
    ))
}

/// `GET /assistants/{id}`.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(assistant_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    one(&state, &user, &assistant_id).map(Json)
}

/// `GET /assistants/{id}/graph`: the one node every assistant runs, between start and end
/// (what the SDK's `getGraph` and LangGraph Studio draw).
pub(crate) async fn graph(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(assistant_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    one(&state, &user, &assistant_id)?;
    Ok(Json(json!({
        "nodes": [
            {"id": "__start__", "type": "schema", "data": "__start__"},
            {"id": LEAD_AGENT, "type": "runnable",
             "data": {"id": ["antler", "lead_agent"], "name": LEAD_AGENT}},
            {"id": "__end__", "type": "schema", "data": "__end__"},
        ],
        "edges": [
            {"source": "__start__", "target": LEAD_AGENT},
            {"source": LEAD_AGENT, "target": "__end__"},
        ],
    })))
}

/// `GET /assistants/{id}/schemas`: the input a run takes, the state it keeps and the options
/// its context reads, as JSON Schemas (the fields clients set, not every internal one).
pub(crate) async fn schemas(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(assistant_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    one(&state, &user, &assistant_id)?;
    let messages = json!({"type": "array", "items": {"type": "object"}});
    let state_schema = json!({
        "title": "ThreadState",
        "type": "object",
        "properties": {
            "messages": messages,
            "title": {"type": ["string", "null"]},
            "artifacts": {"type": "array", "items": {"type": "string"}},
            "todos": {"type": ["array", "null"], "items": {"type": "object"}},
            "uploaded_files": {"type": "array", "items": {"type": "object"}},
        },
    });
    let options = json!({
        "title": "RunOptions",
        "type": "object",
        "properties": {
            "agent_name": {"type": ["string", "null"]},
            "model_name": {"type": ["string", "null"]},
            "thinking_enabled": {"type": ["boolean", "null"]},
            "reasoning_effort": {"type": ["string", "null"]},
            "is_plan_mode": {"type": "boolean"},
            "subagent_enabled": {"type": "boolean"},
            "max_concurrent_subagents": {"type": ["integer", "null"]},
            "recursion_limit": {"type": ["integer", "null"]},
        },
    });
    Ok(Json(json!({
        "graph_id": LEAD_AGENT,
        "input_schema": {
            "title": "Input",
            "type": "object",
            "properties": {"messages": messages},
        },
        "output_schema": state_schema,
        "state_schema": state_schema,
        "config_schema": {
            "title": "Configurable",
            "type": "object",
            "properties": options["properties"],
        },
        "context_schema": options,
    })))
}

/// The caller's assistant `assistant_id`, or 404.
fn one(state: &AppState, user: &AuthUser, assistant_id: &str) -> Result<Value, ApiError> {
    let Some(name) = agent_of(assistant_id) else {
        return Ok(lead_agent());
    };
    let agents = state.harness.agents();
    let found = match agents.get(&user.0, name) {
        Ok(found) => found,
        // A name no agent can have is an assistant nobody has.
        Err(crate::custom_agents::AgentStoreError::InvalidName(_)) => None,
        Err(e) => return Err(ApiError::internal(e)),
    };
    let agent = found.ok_or_else(|| assistant_not_found(assistant_id))?;
    Ok(custom(state, user, &agent.config))
}

/// `lead_agent` first, then the caller's agents by name.
fn all(state: &AppState, user: &AuthUser) -> Result<Vec<Value>, ApiError> {
    let agents = state
        .harness
        .agents()
        .list(&user.0)
        .map_err(ApiError::internal)?;
    let mut out = vec![lead_agent()];
    out.extend(agents.iter().map(|agent| custom(state, user, agent)));
    Ok(out)
}

fn lead_agent() -> Value {
    let at = *STARTED_AT;
    json!({
        "assistant_id": LEAD_AGENT,
        "graph_id": LEAD_AGENT,
        "name": LEAD_AGENT,
        "description": "The default agent",
        "config": {"configurable": {}},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": at,
        "updated_at": at,
    })
}

/// A custom agent as an assistant: its config under `config.configurable` (with
/// `agent_name`, what selects it in a run) and `context`, its description in `metadata` too.
fn custom(state: &AppState, user: &AuthUser, agent: &AgentConfig) -> Value {
    let mut configurable = match serde_json::to_value(agent) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    configurable.remove("name");
    configurable.insert("agent_name".into(), json!(agent.name));
    let (created_at, updated_at) = file_times(state, user, &agent.name);
    json!({
        "assistant_id": agent.name,
        "graph_id": LEAD_AGENT,
        "name": agent.name,
        "description": agent.description,
        "config": {"configurable": configurable},
        "context": {"agent_name": agent.name},
        "metadata": {"created_by": "user", "description": agent.description},
        "version": 1,
        "created_at": created_at,
        "updated_at": updated_at,
    })
}

/// When the agent's directory was made and its config last written (the files are the
/// agent: there is no record with timestamps).
fn file_times(state: &AppState, user: &AuthUser, name: &str) -> (DateTime<Utc>, DateTime<Utc>) {
    let Ok(dir) = state.harness.agents().agent_dir(&user.0, name) else {
        return (*STARTED_AT, *STARTED_AT);
    };
    let time = |meta: std::io::Result<std::fs::Metadata>, created: bool| {
        meta.and_then(|m| if created { m.created() } else { m.modified() })
            .map(DateTime::<Utc>::from)
            .unwrap_or_else(|_| DateTime::<Utc>::from(SystemTime::UNIX_EPOCH))
    };
    let updated = time(
        std::fs::metadata(dir.join(crate::custom_agents::store::CONFIG_FILE)),
        false,
    );
    let created = time(std::fs::metadata(&dir), true).min(updated);
    (created, updated)
}

fn keep(assistant: Value, select: &[String]) -> Value {
    let Value::Object(mut all) = assistant else {
        return assistant;
    };
    Value::Object(
        select
            .iter()
            .filter_map(|name| all.remove(name).map(|value| (name.clone(), value)))
            .collect(),
    )
}

fn assistant_not_found(assistant_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "assistant_not_found",
        format!(
            "no assistant {assistant_id}; search yours with POST /assistants/search \
             (\"lead_agent\" is the default agent)"
        ),
    )
}
