//! Run routes: stream a run as Server-Sent Events, wait for its final state, cancel it.
//!
//! SSE frames come from `langgraph::stream::Encoder` (LangGraph's event names and the modes a
//! request asks for; without `stream_mode`, Antler's own set).

use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::task::AbortOnDropHandle;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::agent_api::{ErrorCode, RunEvent, RunOptions};
use crate::harness::{RunError, RunHandle, RunRequest, Speaker};
use crate::http::langgraph::assistants::agent_of;
use crate::http::langgraph::stream::{Encoder, Frame, StreamRequest};
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::lead_agent::LeadAgentError;
use antler_store::messages::{HumanMessage, Message, MessageMeta, new_id};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RunBody {
    input: Option<RunInput>,
    config: RunConfig,
    context: Map<String, Value>,
    /// LangGraph's `stream_mode` (a string or a list); absent: Antler's own set of events.
    pub(crate) stream_mode: Option<Value>,
    pub(crate) stream_subgraphs: Option<Value>,
    /// LangGraph's assistant: `lead_agent` or a custom agent's name (as `context.agent_name`).
    assistant_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunInput {
    messages: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunConfig {
    configurable: Map<String, Value>,
    recursion_limit: Option<u32>,
}

/// Converts LangGraph-style input messages (`{"role"|"type": "human"|"user", "content": …}`)
/// into human messages; anything else is refused with a message saying what is accepted.
fn parse_input(messages: &[Value]) -> Result<Vec<Message>, ApiError> {
    messages
        .iter()
        .map(|raw| {
            let kind = raw
                .get("role")
                .or_else(|| raw.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("human");
            if !matches!(kind, "human" | "user") {
                return Err(ApiError::bad_request(format!(
                    "input messages must be human messages (role \"user\" or \"human\"), got {kind:?}"
                )));
            }
            let content = match raw.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => {
                    return Err(ApiError::bad_request(
                        "each input message needs a \"content\" string or a list of text parts",
                    ));
                }
            };
            let id = raw
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| new_id("human"));
            let extra = raw
                .get("additional_kwargs")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            Ok(Message::Human(HumanMessage {
                id: id.into(),
                content: content.into(),
                meta: MessageMeta {
                    hide_from_ui: false,
                    extra,
                },
                ..Default::default()
            }))
        })
        .collect()
}

fn run_request(
    user: &AuthUser,
    thread_id: &str,
    body: RunBody,
    want_values: bool,
) -> Result<RunRequest, ApiError> {
    let input = parse_input(&body.input.unwrap_or_default().messages)?;
    if input.is_empty() {
        return Err(ApiError::bad_request(
            "input.messages is empty; send at least one human message",
        ));
    }
    let mut options = RunOptions::merge(&body.config.configurable, &body.context)
        .map_err(|e| ApiError::bad_request(format!("invalid run options: {e}")))?;
    if body.config.recursion_limit.is_some() {
        options.recursion_limit = body.config.recursion_limit;
    }
    // An explicit agent in the context wins over the assistant (DeerFlow sends both).
    if options.agent_name.is_none()
        && let Some(agent) = body.assistant_id.as_deref().and_then(agent_of)
    {
        options.agent_name = Some(agent.to_string());
    }
    Ok(RunRequest {
        user_id: user.0.clone(),
        speaker: Speaker::Owner,
        thread_id: thread_id.to_string(),
        input,
        options,
        want_values,
    })
}

pub(crate) fn run_error(e: RunError) -> ApiError {
    match e {
        RunError::Busy { thread_id } => ApiError::new(
            StatusCode::CONFLICT,
            "thread_busy",
            format!(
                "thread {thread_id} is already running a request; wait for it to finish or cancel it with POST /api/threads/{thread_id}/runs/{{run_id}}/cancel"
            ),
        ),
        RunError::NotFound { thread_id } => ApiError::thread_not_found(&thread_id),
        RunError::ShuttingDown => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the daemon is shutting down; retry in a moment",
        ),
        RunError::Agent(LeadAgentError::Forbidden(denied)) => {
            crate::http::agents::forbidden(denied)
        }
        RunError::Agent(e @ LeadAgentError::AgentNotFound { .. }) => {
            ApiError::new(StatusCode::NOT_FOUND, "agent_not_found", e.to_string())
        }
        RunError::Agent(e @ LeadAgentError::InvalidAgentName(_)) => {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_agent_name", e.to_string())
        }
        RunError::BudgetSpent { notice } => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "budget_exceeded", notice)
        }
        e @ RunError::Overloaded { .. } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", e.to_string())
        }
        other => ApiError::internal(other),
    }
}

/// The SSE form of a frame.
pub(crate) fn sse_of(frame: Frame) -> Event {
    Event::default().event(frame.event).data(frame.data)
}

pub(crate) async fn stream(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Json(body): Json<RunBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    crate::paths::validate_id("thread", &thread_id)?;
    let stream_request =
        StreamRequest::parse(body.stream_mode.as_ref(), body.stream_subgraphs.as_ref())?;
    let request = run_request(&user, &thread_id, body, true)?;
    let span = crate::telemetry::spans::api_run("/api/threads/{thread_id}/runs/stream", &thread_id);
    let handle = state
        .harness
        .start_run(request)
        .instrument(span)
        .await
        .map_err(run_error)?;
    Ok(stream_run(handle, thread_id, stream_request, None))
}

/// A started run's events as the `/runs/stream` answer, after `lead` (a frame of the caller's
/// own, such as the decision that resumed the run).
pub(crate) fn stream_run(
    handle: RunHandle,
    thread_id: String,
    stream_request: StreamRequest,
    lead: Option<Event>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut encoder = Encoder::new(stream_request, &handle.run_id, &thread_id);
    let mut events = handle.events;
    let stream = async_stream_of(move |tx| async move {
        if let Some(lead) = lead
            && tx.send(lead).await.is_err()
        {
            return;
        }
        let mut frames = Vec::new();
        while let Some(event) = events.recv().await {
            let last = matches!(event, RunEvent::Finished { .. });
            encoder.encode(&event, &mut frames);
            for frame in frames.drain(..) {
                if tx.send(sse_of(frame)).await.is_err() {
                    return;
                }
            }
            if last {
                break;
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Adapts a producer task writing into a bounded channel into a `Stream` of SSE events.
fn async_stream_of<F, Fut>(produce: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    // The stream owns its producer: a client that goes away drops the stream, which aborts it.
    #[allow(clippy::disallowed_methods)]
    let producer = AbortOnDropHandle::new(tokio::spawn(produce(tx)));
    futures::stream::unfold((rx, producer), |(mut rx, producer)| async move {
        rx.recv().await.map(|event| (Ok(event), (rx, producer)))
    })
}

pub(crate) async fn wait(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Json(body): Json<RunBody>,
) -> Result<Response, ApiError> {
    crate::paths::validate_id("thread", &thread_id)?;
    let request = run_request(&user, &thread_id, body, false)?;
    // Starting a run (building its agent) is a large future of its own: boxed, it is freed once
    // the run is under way instead of sizing this handler's future for the whole wait.
    let span = crate::telemetry::spans::api_run("/api/threads/{thread_id}/runs/wait", &thread_id);
    async move {
        let handle = Box::pin(state.harness.start_run(request))
            .await
            .map_err(run_error)?;
        wait_run(handle, thread_id, Map::new()).await
    }
    .instrument(span)
    .await
}

/// Waits for a started run and answers as `/runs/wait` does, with `lead`'s fields first (the
/// decision that resumed the run, the command that did).
pub(crate) async fn wait_run(
    handle: RunHandle,
    thread_id: String,
    lead: Map<String, Value>,
) -> Result<Response, ApiError> {
    // Nobody reads the events of a run waited for: dropping them at once keeps the run's
    // streamed text from queueing up until it ends.
    let RunHandle {
        run_id, outcome, ..
    } = handle;
    let outcome = outcome.await.map_err(ApiError::internal)?;
    let status = outcome
        .error
        .as_ref()
        .map_or(StatusCode::OK, |failure| failure_status(failure.code));
    let error = outcome
        .error
        .map(|failure| json!({"code": failure.code, "message": failure.message}));
    // Sized once: axum's `Json` starts at 128 bytes and doubles, copying a long thread's state
    // a dozen times on its way out.
    let mut body = crate::body_buffers::buffer(outcome.state.json_size_hint());
    let wait = WaitResponse {
        lead,
        run_id,
        thread_id,
        stop_reason: outcome.stop,
        error,
        values: outcome.state,
    };
    serde_json::to_writer(&mut body, &wait).map_err(ApiError::internal)?;
    let json = HeaderValue::from_static("application/json");
    let body = crate::body_buffers::into_body(body);
    Ok((status, [(header::CONTENT_TYPE, json)], body).into_response())
}

/// The body of `/runs/wait`, serialized straight from the state (no intermediate JSON tree:
/// the state carries the whole history).
#[derive(serde::Serialize)]
pub(crate) struct WaitResponse {
    #[serde(flatten)]
    lead: Map<String, Value>,
    run_id: String,
    thread_id: String,
    stop_reason: crate::agent_api::StopReason,
    error: Option<Value>,
    values: antler_store::state::ThreadState,
}

/// The status of a run that ended in a failure: the model's side as a gateway error by cause,
/// the harness's own failures as 500. A run stopped by its step limit did its work: 200.
fn failure_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::ModelUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::ModelTimeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::ModelError => StatusCode::BAD_GATEWAY,
        ErrorCode::RecursionLimit => StatusCode::OK,
        ErrorCode::MiddlewareError
        | ErrorCode::StateError
        | ErrorCode::CheckpointError
        | ErrorCode::Panic => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

pub(crate) async fn cancel(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, run_id)): Path<(String, String)>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    owned_thread(&state, &user, &thread_id)?;
    if state.harness.cancel_run(&thread_id, &run_id) {
        Ok((
            StatusCode::ACCEPTED,
            Json(json!({"success": true, "run_id": run_id})),
        ))
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "run_not_found",
            format!("run {run_id} is not running on thread {thread_id}; it may have finished"),
        ))
    }
}
