//! Liveness and readiness probes (unauthenticated, for systemd/Docker/Kubernetes).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::AppState;

/// The process is up and serving HTTP.
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// The store answers and the configuration is valid. `channels` shows each channel's state;
/// an unhealthy channel is reported but does not fail readiness (the others keep serving).
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Value>) {
    let channels = json!(state.channels.health.snapshot());
    // A read through the store proves it is open and answering.
    match state.harness.threads().get("readyz-probe") {
        Ok(_) => (
            StatusCode::OK,
            Json(json!({"status": "ready", "channels": channels})),
        ),
        Err(problem) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"status": "not_ready", "problem": problem.to_string(), "channels": channels}),
            ),
        ),
    }
}
