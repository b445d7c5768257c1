//! Runs as records: background runs, list, get, join, joining a run's stream (from the start
//! or from `Last-Event-ID`), cancel, stateless runs. (`/runs/stream` and `/runs/wait` on a
//! thread are `thread_runs`; starting and following runs is `run_start`, their frames and
//! readers `run_live`.)

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use super::errors::unsupported;
use super::thread_runs::{
    RunBody, api_run_start, run_error, stream_started, thread_run_start, wait_started,
};
use crate::api_runs::{ApiRun, RunStatus};
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};

/// `POST /threads/{thread_id}/runs`: a background run, answered with its record at once.
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Json(body): Json<RunBody>,
) -> Result<Response, ApiError> {
    let (start, _mode) = thread_run_start(&state, &user, &thread_id, body, true)?;
    let span = crate::telemetry::spans::api_run("/api/threads/{thread_id}/runs", &thread_id);
    let started = Box::pin(state.api_runs.start(start, false))
        .instrument(span)
        .await?;
    let mut headers = super::run_live::run_headers(&started.run);
    headers.remove(header::LOCATION);
    Ok((headers, Json(started.run.record())).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(default)]
pub(crate) struct ListQuery {
    limit: usize,
    offset: usize,
    status: Option<String>,
    /// The SDKs' `select` (fields to return): every field is returned.
    #[allow(dead_code)]
    select: Option<String>,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            limit: 10,
            offset: 0,
            status: None,
            select: None,
        }
    }
}

/// `GET /threads/{thread_id}/runs`: the thread's runs, newest first.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<ApiRun>>, ApiError> {
    owned_thread(&state, &user, &thread_id)?;
    let status = match query.status.as_deref() {
        None => None,
        Some(name) => Some(RunStatus::parse(name).ok_or_else(|| {
            unsupported(
                "status",
                "must be pending, running, success, error, interrupted or timeout",
            )
        })?),
    };
    let mut runs = state
        .api_runs
        .records
        .list(&thread_id)
        .map_err(ApiError::internal)?;
    runs.reverse();
    let runs = runs
        .into_iter()
        .filter(|run| status.is_none_or(|status| run.status == status))
        .skip(query.offset)
        .take(query.limit)
        .collect();
    Ok(Json(runs))
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<ApiRun>, ApiError> {
    owned_run(&state, &user, &thread_id, &run_id).map(Json)
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: waits for the run's end and answers the
/// thread's values then.
pub(crate) async fn join(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    owned_run(&state, &user, &thread_id, &run_id)?;
    if let Some(run) = state.api_runs.live(&thread_id, &run_id) {
        run.frames.ended().await;
    }
    let values = state
        .harness
        .thread_state(&thread_id)
        .await
        .map_err(ApiError::internal)?
        .unwrap_or_default();
    Ok(Json(json!(values)))
}

/// `GET|POST /threads/{thread_id}/runs/{run_id}/stream`: the run's frames, from the start or
/// after `Last-Event-ID`; query `stream_mode` (repeated, as the SDKs send a list) keeps some
/// modes only, `cancel_on_disconnect` cancels the run when this client goes away.
pub(crate) async fn join_stream(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, run_id)): Path<(String, String)>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    owned_run(&state, &user, &thread_id, &run_id)?;
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .map(str::trim)
            .and_then(|id| {
                if id.is_empty() {
                    Some(0)
                } else {
                    id.parse().ok()
                }
            })
            .ok_or_else(|| unsupported("Last-Event-ID", "must be an event id this server sent"))?,
    };
    let mut modes: Vec<String> = Vec::new();
    let mut cancel_on_disconnect = false;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            // An SDK leaving `stream_mode` unset sends it empty: every mode.
            "stream_mode" if !value.is_empty() => modes.push(value.into_owned()),
            "cancel_on_disconnect" => cancel_on_disconnect = flag("cancel_on_disconnect", &value)?,
            _ => {}
        }
    }
    let modes = (!modes.is_empty()).then_some(modes);
    match state.api_runs.live(&thread_id, &run_id) {
        Some(run) => Ok(state.api_runs.sse(run, after, modes, cancel_on_disconnect)),
        // Ended long enough ago that its frames are gone (or before a restart): only its end.
        None => {
            let end = Event::default().event("end").data("null");
            let events = futures::stream::iter([Ok::<_, std::convert::Infallible>(end)]);
            Ok(Sse::new(events).into_response())
        }
    }
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel?wait=&action=interrupt|rollback`.
/// `interrupt` keeps what the run did; `rollback` puts the thread back to before the run and
/// removes its record. `wait` answers once the run has ended.
pub(crate) async fn cancel(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, run_id)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    owned_thread(&state, &user, &thread_id)?;
    let mut wait = false;
    let mut rollback = false;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "wait" => wait = flag("wait", &value)?,
            "action" => {
                rollback = match value.as_ref() {
                    "interrupt" => false,
                    "rollback" => true,
                    _ => return Err(unsupported("action", "must be interrupt or rollback")),
                }
            }
            _ => {}
        }
    }
    let live = state
        .api_runs
        .live(&thread_id, &run_id)
        .filter(|run| !run.frames.is_done());
    let Some(run) = live else {
        // A run of another surface (the web chat's) or on another instance: no record.
        if state.harness.cancel_run(&thread_id, &run_id) {
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({"success": true, "run_id": run_id})),
            )
                .into_response());
        }
        let record = state
            .api_runs
            .records
            .get(&thread_id, &run_id)
            .map_err(ApiError::internal)?;
        return Err(match record {
            Some(record) => ApiError::new(
                StatusCode::CONFLICT,
                "run_ended",
                format!(
                    "run {run_id} has already ended ({}); there is nothing to cancel",
                    record.status.as_str()
                ),
            ),
            None => not_running(&thread_id, &run_id),
        });
    };
    if rollback {
        run.request_rollback();
    }
    run.waiting.cancel();
    state.harness.cancel_run(&thread_id, &run_id);
    if !wait {
        return Ok((
            StatusCode::ACCEPTED,
            Json(json!({"success": true, "run_id": run_id})),
        )
            .into_response());
    }
    run.frames.ended().await;
    if rollback {
        return Ok(Json(json!({"success": true, "run_id": run_id})).into_response());
    }
    Ok(Json(run.record()).into_response())
}

/// `POST /runs/stream`: a run on a temporary thread of the caller, streamed.
pub(crate) async fn stateless_stream(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<RunBody>,
) -> Result<Response, ApiError> {
    let thread_id = temporary_thread(&state, &user)?;
    let (mut start, mode) = api_run_start(&user, &thread_id, body, true)?;
    start.temporary = !mode.keep_thread;
    let span = crate::telemetry::spans::api_run("/api/runs/stream", &thread_id);
    stream_started(&state, start, &mode).instrument(span).await
}

/// `POST /runs/wait`: a run on a temporary thread of the caller, waited for.
pub(crate) async fn stateless_wait(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<RunBody>,
) -> Result<Response, ApiError> {
    let thread_id = temporary_thread(&state, &user)?;
    let (mut start, mode) = api_run_start(&user, &thread_id, body, false)?;
    start.temporary = !mode.keep_thread;
    let span = crate::telemetry::spans::api_run("/api/runs/wait", &thread_id);
    wait_started(&state, start, &mode).instrument(span).await
}

/// A fresh thread of the caller for a stateless run.
fn temporary_thread(state: &AppState, user: &AuthUser) -> Result<String, ApiError> {
    let mut metadata = Map::new();
    metadata.insert("stateless".into(), Value::Bool(true));
    state
        .harness
        .create_thread(&user.0, None, metadata)
        .map(|record| record.thread_id)
        .map_err(|e| run_error(e.into()))
}

/// The caller's run record, or 404 (the thread's or the run's).
fn owned_run(
    state: &AppState,
    user: &AuthUser,
    thread_id: &str,
    run_id: &str,
) -> Result<ApiRun, ApiError> {
    owned_thread(state, user, thread_id)?;
    state
        .api_runs
        .records
        .get(thread_id, run_id)
        .map_err(ApiError::internal)?
        .ok_or_else(|| not_running(thread_id, run_id))
}

fn not_running(thread_id: &str, run_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "run_not_found",
        format!(
            "no run {run_id} on thread {thread_id}; list the thread's runs with GET /api/threads/{thread_id}/runs"
        ),
    )
}

/// A boolean query flag as the SDKs send it (`1`/`0`, `true`/`false`).
fn flag(field: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "true" | "True" => Ok(true),
        "0" | "false" | "False" | "" => Ok(false),
        _ => Err(unsupported(field, "must be true or false")),
    }
}
