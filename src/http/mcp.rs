//! `GET/PUT/PATCH /api/mcp/config` (admins): the `mcpServers` of `extensions_config.json`
//! (also as DeerFlow's `mcp_servers`; a PATCH turns one server on or off), and
//! `GET /api/mcp/servers`: each server's status and tools.
//!
//! A PUT is validated in full before anything is written, then written atomically (a temporary
//! file renamed over the old one) keeping the file's other keys; the next run reconnects to the
//! servers of the new version. It is written in the data dir (the service's writable state),
//! never beside `config.yaml`: an older install's file there is read until the first PUT, which
//! carries its other keys over and leaves it as it was. The GET answers the file as written: `$VAR` references stay
//! references, so resolved secrets never leave the daemon.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::config::ProcessEnv;
use crate::http::error::ApiError;
use crate::http::{AppState, AuthUser};
use crate::lead_agent::access::is_admin;
use crate::mcp::config::merge_servers;
use crate::mcp::{ExtensionsConfig, extensions_write_path};

fn require_admin(state: &AppState, user: &AuthUser) -> Result<(), ApiError> {
    if user.is_operator() || is_admin(&state.config.current(), &user.0) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        "only admins may read or change the MCP configuration; ask one listed in `admins`",
    ))
}

pub(super) async fn get_config(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let path = state.harness.mcp().path();
    let servers = read_servers(&path).await?;
    Ok(Json(config_json(&servers, &path)))
}

/// Replaces the servers: `{"mcpServers": …}`, or DeerFlow's `{"mcp_servers": …}`.
pub(super) async fn put_config(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let Some(servers) = body
        .get("mcpServers")
        .or_else(|| body.get("mcp_servers"))
        .cloned()
    else {
        return Err(ApiError::bad_request(
            "send {\"mcpServers\": {<name>: {...}}}; the body has no mcpServers",
        ));
    };
    replace_servers(&state, &user, servers).await
}

/// `PATCH /api/mcp/config` with `{"server_name", "enabled"}` (DeerFlow's UI's switch): turns
/// one server on or off, the rest of the file kept as it is.
pub(super) async fn patch_config(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let (Some(name), Some(enabled)) = (
        body.get("server_name").and_then(Value::as_str),
        body.get("enabled").and_then(Value::as_bool),
    ) else {
        return Err(ApiError::bad_request(
            "send {\"server_name\": <name>, \"enabled\": true|false}",
        ));
    };
    let mut servers = read_servers(&state.harness.mcp().path()).await?;
    let Some(server) = servers.get_mut(name).and_then(Value::as_object_mut) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "mcp_server_not_found",
            format!("no MCP server {name}; GET /api/mcp/config lists the configured ones"),
        ));
    };
    server.insert("enabled".into(), Value::Bool(enabled));
    replace_servers(&state, &user, servers).await
}

/// The `mcpServers` of the file at `path` (`{}` when there is none).
async fn read_servers(path: &std::path::Path) -> Result<Value, ApiError> {
    Ok(match tokio::fs::read(path).await {
        Ok(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {
            let root: Value = serde_json::from_slice(&bytes).map_err(|e| {
                ApiError::internal(format!(
                    "{} is not valid JSON ({e}); fix it or PUT a new config",
                    path.display()
                ))
            })?;
            root.get("mcpServers").cloned().unwrap_or_else(|| json!({}))
        }
        Ok(_) => json!({}),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(error) => return Err(ApiError::internal(error)),
    })
}

/// Antler's `mcpServers` and DeerFlow's `mcp_servers` (the same servers), and the file.
fn config_json(servers: &Value, path: &std::path::Path) -> Value {
    json!({"mcpServers": servers, "mcp_servers": servers, "path": path.display().to_string()})
}

/// Validates `servers` in full, then writes them (see the module doc).
async fn replace_servers(
    state: &AppState,
    user: &AuthUser,
    servers: Value,
) -> Result<Json<Value>, ApiError> {
    let candidate =
        serde_json::to_vec(&json!({"mcpServers": servers.clone()})).map_err(ApiError::internal)?;
    ExtensionsConfig::parse(&candidate, "the new config", &ProcessEnv).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_config",
            e.to_string(),
        )
    })?;
    let read_from = state.harness.mcp().path();
    let existing = match tokio::fs::read(&read_from).await {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(ApiError::internal(error)),
    };
    let text = merge_servers(&existing, servers.clone()).map_err(ApiError::internal)?;
    let path = extensions_write_path(&ProcessEnv, &state.config.current().data_dir());
    write_atomically(&path, &text).await.map_err(|e| {
        ApiError::internal(format!(
            "could not write {}: {e}; the data directory must be writable by the daemon",
            path.display()
        ))
    })?;
    if path != read_from {
        state.harness.mcp().set_path(path.clone());
        tracing::info!(
            from = %read_from.display(),
            to = %path.display(),
            "extensions_config.json now lives in the data dir; the old file is no longer read"
        );
    }
    tracing::info!(caller = %user.0, path = %path.display(), "MCP configuration replaced over HTTP");
    Ok(Json(config_json(&servers, &path)))
}

pub(super) async fn servers(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let mcp = state.harness.mcp();
    let mut servers = mcp
        .servers()
        .await
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_config", e))?;
    // Listing is how an operator checks a server: connect what has not been tried yet.
    if servers
        .iter()
        .any(|s| s.status == crate::mcp::ServerStatus::Pending)
    {
        mcp.tools().await;
        servers = mcp.servers().await.unwrap_or(servers);
    }
    Ok(Json(
        json!({"servers": servers, "path": mcp.path().display().to_string()}),
    ))
}

/// Writes beside the target then renames, so a reader never sees half a file.
async fn write_atomically(path: &std::path::Path, text: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(dir).await?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "extensions_config.json".into());
    let temporary = path.with_file_name(format!(".{file_name}.{}.tmp", uuid::Uuid::new_v4()));
    tokio::fs::write(&temporary, text).await?;
    if let Err(error) = tokio::fs::rename(&temporary, path).await {
        let _ = tokio::fs::remove_file(&temporary).await;
        return Err(error);
    }
    Ok(())
}
