//! `GET /api/models`: names and capabilities of the configured models (never keys or URLs),
//! with the fields DeerFlow's UI reads (`id`, `supports_reasoning_effort`, `token_usage`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::http::{AppState, AuthUser};

pub(crate) async fn list(State(state): State<Arc<AppState>>, _user: AuthUser) -> Json<Value> {
    let config = state.config.current();
    let models: Vec<Value> = config
        .models
        .iter()
        .map(|m| {
            json!({
                // DeerFlow's UI keys models by `id` and offers a reasoning effort where
                // `supports_reasoning_effort` (the thinking models here).
                "id": m.name,
                "name": m.name,
                "display_name": m.display_name.as_deref().unwrap_or(&m.name),
                "provider": m.provider,
                "model": m.model,
                "supports_thinking": m.supports_thinking,
                "supports_vision": m.supports_vision,
                "context_window": m.context_window,
                "description": null,
                "supports_reasoning_effort": m.supports_thinking,
            })
        })
        .collect();
    Json(json!({
        "models": models,
        "default": config.models.first().map(|m| &m.name),
        "token_usage": {"enabled": config.token_usage.enabled},
    }))
}
