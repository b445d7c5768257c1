//! `GET/PUT /api/mcp/config` (admins): the `mcpServers` of `extensions_config.json`, and
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
    let servers = match tokio::fs::read(&path).await {
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
    };
    Ok(Json(
        json!({"mcpServers": servers, "path": path.display().to_string()}),
    ))
}

pub(super) async fn put_config(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    require_admin(&state, &user)?;
    let Some(servers) = body.get("mcpServers").cloned() else {
        return Err(ApiError::bad_request(
            "send {\"mcpServers\": {<name>: {...}}}; the body has no mcpServers",
        ));
    };
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
    Ok(Json(
        json!({"mcpServers": servers, "path": path.display().to_string()}),
    ))
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
