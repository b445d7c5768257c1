//! Liveness and readiness probes (unauthenticated, for systemd/Docker/Kubernetes).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{Value, json};

use crate::http::AppState;
use crate::http::peer::LocalOperator;

/// The process is up and serving HTTP.
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// The store answers and the configuration is valid. `channels` shows each channel's state;
/// an unhealthy channel is reported but does not fail readiness (the others keep serving).
/// `model` says whether the default model's endpoint answers (cached, time-bounded probe); an
/// unreachable model is reported, not a readiness failure: the daemon still serves. `sandbox`
/// says which provider runs tools and whether shell commands work. `reload` is what the last
/// config reload did (absent until one happened): a rollback shows here as well as in the log.
/// `store` names the backend; `cluster` this instance, the leases it holds and the instances
/// sharing the store (from their `instance:` leases). `scheduler` says whether schedules fire,
/// how many there are and when the soonest active one fires next.
/// Over the local socket (the operator) it also names the config file and the data dir.
pub(crate) async fn readyz(
    State(state): State<Arc<AppState>>,
    operator: Option<Extension<LocalOperator>>,
) -> (StatusCode, Json<Value>) {
    let mut channels = json!(state.channels.health.snapshot());
    for (channel, warnings) in state.channels.health.warnings() {
        if let Some(health) = channels.get_mut(&channel).filter(|h| h.is_object()) {
            health["warnings"] = json!(warnings);
        }
    }
    let sandbox = sandbox_json(&state);
    let (status, mut body) = match state.harness.threads().get("readyz-probe") {
        // A read through the store proves it is open and answering.
        Ok(_) => (
            StatusCode::OK,
            json!({"status": "ready", "channels": channels, "sandbox": sandbox}),
        ),
        Err(problem) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "not_ready", "problem": problem.to_string(), "channels": channels, "sandbox": sandbox}),
        ),
    };
    body["store"] = json!({"backend": state.harness.cluster().backend()});
    body["cluster"] = cluster_json(state.harness.cluster());
    body["scheduler"] = scheduler_json(&state);
    if operator.is_some() {
        body["config"] = json!(state.config.origin().to_string());
        body["data_dir"] = json!(state.config.current().data_dir().display().to_string());
    }
    if let Some(reload) = state.config.last_reload() {
        body["reload"] = json!(reload);
    }
    if let Some(model) = state.config.current().default_model() {
        body["model"] = json!(state.model_probe.check(model).await);
    }
    (status, Json(body))
}

/// `{"provider": "bwrap", "bash": true, "reason": "auto: bubblewrap works"}`, or `null` while no
/// provider was chosen (none could start: the daemon log says why).
fn sandbox_json(state: &AppState) -> Value {
    match state.harness.sandbox_info() {
        Some(info) => json!({"provider": info.provider, "bash": info.bash, "reason": info.reason}),
        None => Value::Null,
    }
}

/// `{"instance": "web-1", "leases": ["instance:web-1", "telegram:transport:…"], "instances":
/// [{"id": "web-1", "since_ms": …, "expires_ms": …}]}`; `instances` is replaced by `problem`
/// when the store cannot list them.
fn cluster_json(cluster: &crate::cluster::Cluster) -> Value {
    let mut body = json!({
        "instance": cluster.instance_id(),
        "lease_seconds": cluster.lease_duration().as_secs(),
        "leases": cluster.held_names(),
    });
    match cluster.instances() {
        Ok(instances) => {
            body["instances"] = instances
                .iter()
                .map(|lease| {
                    json!({
                        "id": lease.holder,
                        "since_ms": lease.acquired_at_ms,
                        "expires_ms": lease.expires_at_ms,
                    })
                })
                .collect();
        }
        Err(problem) => body["problem"] = json!(problem.to_string()),
    }
    body
}

/// `{"enabled": true, "schedules": 3, "next_fire": "2026-12-07T08:00:00Z"}` (`next_fire` null
/// with nothing active); `schedules` is replaced by `problem` when the store cannot list them.
fn scheduler_json(state: &AppState) -> Value {
    let enabled = state.config.current().scheduler.enabled;
    let mut body = json!({
        "enabled": enabled,
        "next_fire": state.harness.next_schedule_fire(),
    });
    match state.harness.scheduler().store().list_all() {
        Ok(schedules) => body["schedules"] = json!(schedules.len()),
        Err(problem) => body["problem"] = json!(problem.to_string()),
    }
    body
}
