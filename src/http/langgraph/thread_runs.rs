//! Runs on a thread as the request that starts them sees them: the run body (Antler's fields
//! and the LangGraph SDKs'), `/threads/{thread_id}/runs/stream` and `/runs/wait`, the answer
//! of a wait, and the HTTP form of a run that cannot start.
//!
//! SSE frames come from `stream::Encoder` (LangGraph's event names and the modes a request asks
//! for; without `stream_mode`, Antler's own set), through the run's frame buffer (`run_live`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tracing::Instrument;

use crate::agent_api::{ErrorCode, RunOptions};
use crate::api_runs::MultitaskStrategy;
use crate::harness::{RunError, RunRequest, Speaker};
use crate::http::langgraph::assistants::{LEAD_AGENT, agent_of};
use crate::http::langgraph::errors::unsupported;
use crate::http::langgraph::run_start::RunStart;
use crate::http::langgraph::shapes;
use crate::http::langgraph::stream::StreamRequest;
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
    /// Kept on the run's record.
    metadata: Map<String, Value>,
    /// `reject` (the default), `enqueue`, `interrupt` or `rollback`: what to do on a busy thread.
    multitask_strategy: Option<String>,
    /// `cancel`: the run stops when the client streaming it (or waiting for it) goes away;
    /// `continue` (the default, as before the SDKs' field): it goes on.
    pub(crate) on_disconnect: Option<String>,
    /// Stateless runs: `delete` (the default) removes their thread at the end, `keep` keeps it.
    pub(crate) on_completion: Option<String>,
    /// `create` (the default: a run creates its thread) or `reject` (404 for a missing thread).
    if_not_exists: Option<String>,
    /// Fields of the SDKs' run payloads Antler does not support: refused (422) when sent.
    #[serde(flatten)]
    refused: RefusedFields,
}

/// Run fields the SDKs can send that Antler cannot honour. (What the SDKs send on their own,
/// `after_seconds`, `durability`, `stream_resumable`, `langsmith_tracer` and the rest, is
/// accepted and has no effect: every run is resumable and checkpointed per step.)
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RefusedFields {
    command: Option<Value>,
    interrupt_before: Option<Value>,
    interrupt_after: Option<Value>,
    webhook: Option<Value>,
    checkpoint: Option<Value>,
    checkpoint_id: Option<Value>,
    feedback_keys: Option<Value>,
}

impl RefusedFields {
    fn check(&self) -> Result<(), ApiError> {
        let refused = [
            (
                "command",
                &self.command,
                "answer a clarification with a new input message instead",
            ),
            (
                "interrupt_before",
                &self.interrupt_before,
                "Antler's agent has no static breakpoints",
            ),
            (
                "interrupt_after",
                &self.interrupt_after,
                "Antler's agent has no static breakpoints",
            ),
            (
                "webhook",
                &self.webhook,
                "follow the run with GET …/runs/{run_id}/join instead",
            ),
            (
                "feedback_keys",
                &self.feedback_keys,
                "LangSmith feedback is not available",
            ),
        ];
        for (field, value, why) in refused {
            if value.as_ref().is_some_and(|value| !value.is_null()) {
                return Err(unsupported(field, format!("not supported; {why}")));
            }
        }
        Ok(())
    }

    /// The checkpoint version a run asks to continue from (`checkpoint.checkpoint_id` or
    /// `checkpoint_id`), if any. The SDKs' `useStream` (DeerFlow's UI) sends the thread's
    /// latest with every follow-up message; `check_exists` accepts only that one, since a run
    /// always continues from the latest state.
    fn checkpoint(&self) -> Result<Option<u64>, ApiError> {
        let (field, id) = match (&self.checkpoint, &self.checkpoint_id) {
            (_, Some(Value::String(id))) => ("checkpoint_id", Some(id.as_str())),
            (Some(Value::Object(checkpoint)), _) => (
                "checkpoint",
                checkpoint.get("checkpoint_id").and_then(Value::as_str),
            ),
            (None | Some(Value::Null), None | Some(Value::Null)) => return Ok(None),
            (Some(_), _) => return Err(unsupported("checkpoint", "must be an object")),
            (_, Some(_)) => return Err(unsupported("checkpoint_id", "must be a string")),
        };
        let Some(id) = id else { return Ok(None) };
        shapes::version_of(id).map(Some).ok_or_else(|| {
            unsupported(
                field,
                format!("{id:?} is not one of this thread's checkpoints (see GET …/state)"),
            )
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunInput {
    messages: Vec<Value>,
}

#[derive(Debug, Default, Deserialize, serde::Serialize)]
#[serde(default)]
struct RunConfig {
    configurable: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
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

/// How a run request wants to be treated beyond its run: from the body's LangGraph fields.
pub(crate) struct RunMode {
    /// The client going away cancels the run (`on_disconnect: cancel`).
    pub(crate) cancel_on_disconnect: bool,
    /// A stateless run keeps its thread (`on_completion: keep`).
    pub(crate) keep_thread: bool,
    /// A missing thread is refused (`if_not_exists: reject`).
    pub(crate) reject_missing: bool,
    /// The checkpoint version the run must start from (the thread's latest, or 422).
    pub(crate) from_checkpoint: Option<u64>,
    /// `/runs/wait` answers the final values at the top level, as LangGraph does (the SDKs'
    /// `runs.wait` hands the body to its caller as the values): the request named an
    /// `assistant_id`, which the SDKs always send and Antler's own clients never did.
    pub(crate) values_at_top: bool,
}

/// Reads a run body into what starting it takes; `stream`: its frames are kept for readers.
pub(crate) fn api_run_start(
    user: &AuthUser,
    thread_id: &str,
    mut body: RunBody,
    stream: bool,
) -> Result<(RunStart, RunMode), ApiError> {
    body.refused.check()?;
    let strategy = match body.multitask_strategy.as_deref() {
        None => MultitaskStrategy::Reject,
        Some(name) => MultitaskStrategy::parse(name).ok_or_else(|| {
            unsupported(
                "multitask_strategy",
                "must be \"reject\", \"enqueue\", \"interrupt\" or \"rollback\"",
            )
        })?,
    };
    let mode = RunMode {
        cancel_on_disconnect: one_of(
            "on_disconnect",
            body.on_disconnect.as_deref(),
            &["continue", "cancel"],
        )? == "cancel",
        keep_thread: one_of(
            "on_completion",
            body.on_completion.as_deref(),
            &["delete", "keep"],
        )? == "keep",
        reject_missing: one_of(
            "if_not_exists",
            body.if_not_exists.as_deref(),
            &["create", "reject"],
        )? == "reject",
        from_checkpoint: body.refused.checkpoint()?,
        values_at_top: body.assistant_id.is_some(),
    };
    let stream_request = if stream {
        Some(StreamRequest::parse(
            body.stream_mode.as_ref(),
            body.stream_subgraphs.as_ref(),
        )?)
    } else {
        None
    };
    let mut kwargs = Map::new();
    kwargs.insert("config".into(), json!(body.config));
    kwargs.insert("context".into(), Value::Object(body.context.clone()));
    if let Some(modes) = &body.stream_mode {
        kwargs.insert("stream_mode".into(), modes.clone());
    }
    let assistant_id = body
        .assistant_id
        .clone()
        .unwrap_or_else(|| LEAD_AGENT.to_string());
    let metadata = std::mem::take(&mut body.metadata);
    let request = run_request(user, thread_id, body, stream)?;
    let start = RunStart {
        request,
        assistant_id,
        metadata,
        kwargs,
        strategy,
        stream: stream_request,
        temporary: false,
    };
    Ok((start, mode))
}

/// `value` if it is one of `allowed` (the first when absent), else a 422 naming `field`.
fn one_of<'a>(
    field: &str,
    value: Option<&'a str>,
    allowed: &[&'a str],
) -> Result<&'a str, ApiError> {
    match value {
        None => Ok(allowed[0]),
        Some(value) if allowed.contains(&value) => Ok(value),
        Some(_) => Err(unsupported(
            field,
            format!("must be one of {}", allowed.join(", ")),
        )),
    }
}

/// A run body for the thread `thread_id` read into its start, the thread checked as the body
/// asks (`if_not_exists`, `checkpoint`); `stream`: its frames are kept for readers.
pub(crate) fn thread_run_start(
    state: &AppState,
    user: &AuthUser,
    thread_id: &str,
    body: RunBody,
    stream: bool,
) -> Result<(RunStart, RunMode), ApiError> {
    crate::paths::validate_id("thread", thread_id)?;
    let (start, mode) = api_run_start(user, thread_id, body, stream)?;
    check_exists(state, user, thread_id, &mode)?;
    Ok((start, mode))
}

/// 404 for a missing thread when the body says `if_not_exists: reject`.
fn check_exists(
    state: &AppState,
    user: &AuthUser,
    thread_id: &str,
    mode: &RunMode,
) -> Result<(), ApiError> {
    if mode.reject_missing && mode.from_checkpoint.is_none() {
        owned_thread(state, user, thread_id)?;
    }
    if let Some(version) = mode.from_checkpoint {
        let latest = owned_thread(state, user, thread_id)?.last_checkpoint;
        if version != latest {
            return Err(unsupported(
                "checkpoint",
                format!(
                    "names an earlier checkpoint than the thread's latest ({}); runs continue \
                     from the latest state, so send that one or none",
                    shapes::checkpoint_id(latest).unwrap_or_else(|| "none yet".into())
                ),
            ));
        }
    }
    Ok(())
}

pub(crate) async fn stream(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Json(body): Json<RunBody>,
) -> Result<Response, ApiError> {
    let (start, mode) = thread_run_start(&state, &user, &thread_id, body, true)?;
    let span = crate::telemetry::spans::api_run("/api/threads/{thread_id}/runs/stream", &thread_id);
    stream_started(&state, start, &mode).instrument(span).await
}

/// Starts a run and answers its frames as SSE, from the first.
pub(crate) async fn stream_started(
    state: &AppState,
    start: RunStart,
    mode: &RunMode,
) -> Result<Response, ApiError> {
    let started = state.api_runs.start(start, false).await?;
    Ok(state
        .api_runs
        .sse(started.run, 0, None, mode.cancel_on_disconnect))
}

pub(crate) async fn wait(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Json(body): Json<RunBody>,
) -> Result<Response, ApiError> {
    let (start, mode) = thread_run_start(&state, &user, &thread_id, body, false)?;
    let span = crate::telemetry::spans::api_run("/api/threads/{thread_id}/runs/wait", &thread_id);
    wait_started(&state, start, &mode).instrument(span).await
}

/// Starts a run and answers as `/runs/wait` does once it ends.
pub(crate) async fn wait_started(
    state: &AppState,
    start: RunStart,
    mode: &RunMode,
) -> Result<Response, ApiError> {
    // Starting a run (building its agent) is a large future of its own: boxed, it is freed
    // once the run is under way instead of sizing this handler's future for the whole wait.
    let started = Box::pin(state.api_runs.start(start, true)).await?;
    let run = started.run;
    let _guard = mode
        .cancel_on_disconnect
        .then(|| state.api_runs.cancel_on_drop(run.clone()));
    let outcome = match started.outcome {
        Some(outcome) => outcome.await.ok(),
        None => None,
    };
    let Some(outcome) = outcome else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "run_failed",
            format!(
                "run {} ended without an outcome; GET /api/threads/{}/runs/{} for its status",
                run.run_id, run.thread_id, run.run_id
            ),
        ));
    };
    let shape = if mode.values_at_top {
        WaitShape::ValuesAtTop
    } else {
        WaitShape::Antler
    };
    let mut response = wait_answer(
        outcome,
        run.run_id.clone(),
        run.thread_id.clone(),
        Map::new(),
        shape,
    )?;
    response
        .headers_mut()
        .extend(crate::http::langgraph::run_live::run_headers(&run));
    response.headers_mut().remove(header::LOCATION);
    Ok(response)
}

/// Where a `/runs/wait` answer puts the final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitShape {
    /// Under `values`: Antler's documented answer.
    Antler,
    /// Its fields at the top level beside `run_id`, `thread_id`, `stop_reason` and `error`
    /// (no state key is one of those), as the SDKs read LangGraph's answer.
    ValuesAtTop,
}

/// The `/runs/wait` answer of a run's outcome, with `lead`'s fields first.
pub(crate) fn wait_answer(
    outcome: crate::agent::RunOutcome,
    run_id: String,
    thread_id: String,
    lead: Map<String, Value>,
    shape: WaitShape,
) -> Result<Response, ApiError> {
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
        values: (shape == WaitShape::Antler).then_some(&outcome.state),
        state: (shape == WaitShape::ValuesAtTop).then_some(&outcome.state),
    };
    serde_json::to_writer(&mut body, &wait).map_err(ApiError::internal)?;
    let json = HeaderValue::from_static("application/json");
    let body = crate::body_buffers::into_body(body);
    Ok((status, [(header::CONTENT_TYPE, json)], body).into_response())
}

/// The body of `/runs/wait`, serialized straight from the state (no intermediate JSON tree:
/// the state carries the whole history), which is under `values` or at the top level (see
/// [`WaitShape`]), never both: a long thread's answer is not sent twice.
#[derive(serde::Serialize)]
pub(crate) struct WaitResponse<'a> {
    #[serde(flatten)]
    lead: Map<String, Value>,
    run_id: String,
    thread_id: String,
    stop_reason: crate::agent_api::StopReason,
    error: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<&'a antler_store::state::ThreadState>,
    #[serde(flatten)]
    state: Option<&'a antler_store::state::ThreadState>,
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
