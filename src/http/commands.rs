//! `POST /api/commands`: runs a chat command (`/plan on`, `/new`, `/memory`, …) for the caller
//! with the implementation every surface shares ([`crate::commands`]).
//!
//! The web chat and `antler chat` on a running daemon keep a conversation's settings
//! themselves (they send them with each run as its `context`), so they send them here too:
//! `{"command": "/plan on", "conversation": {"thread_id", "model", "agent", "plan_mode"}}`. The
//! answer is the reply, the conversation as the command left it (a new thread after `/new`),
//! and, for `/bootstrap`, the turn to run. Text that is not a command is a 400
//! `not_a_command`: send it as a message instead.
//!
//! `/approve ID` and `/deny ID` that decide a request no chat continues run its continuation
//! before answering, as a button's `POST /api/threads/{id}/approvals/{approval_id}` does: the
//! answer then carries the run's final state (as `/runs/wait`'s), or with `Accept:
//! text/event-stream` it is the run's stream after a `custom` `approval_decided` frame holding
//! the command's answer.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::commands::{CommandAnswer, Conversation, run_for_session};
use crate::http::approvals::wants_stream;
use crate::http::{ApiError, AppState, AuthUser};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommandBody {
    command: String,
    #[serde(default)]
    conversation: Conversation,
}

pub(crate) async fn run(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    headers: HeaderMap,
    Json(body): Json<CommandBody>,
) -> Result<Response, ApiError> {
    if let Some(thread_id) = &body.conversation.thread_id {
        crate::paths::validate_id("thread", thread_id)?;
        let record = state
            .harness
            .threads()
            .get(thread_id)
            .map_err(ApiError::internal)?;
        // A thread that does not exist yet is fine (the web chat names its threads before
        // their first run); another user's is as absent as a missing one.
        if record.is_some_and(|record| record.user_id != user.0) {
            return Err(ApiError::thread_not_found(thread_id));
        }
    }
    let config = state.config.current();
    let answer = run_for_session(
        &state.harness,
        &config,
        &user.0,
        user.2.as_ref(),
        body.conversation,
        &body.command,
    )
    .await
    .map_err(ApiError::internal)?;
    match answer {
        Some(answer) => respond(&state, answer, &headers).await,
        None => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "not_a_command",
            format!(
                "{:?} is not a chat command; send it as a message (POST \
                 /api/threads/{{thread_id}}/runs/stream), or send /help for the commands",
                body.command.trim().chars().take(40).collect::<String>()
            ),
        )),
    }
}

/// The answer, after running the continuation of a request the command decided.
async fn respond(
    state: &AppState,
    mut answer: CommandAnswer,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let request = match answer.approval.as_deref() {
        Some(request) if answer.resume => request.clone(),
        _ => return Ok(Json(answer).into_response()),
    };
    // Run here: the client is told the run's outcome, not asked to start it.
    answer.resume = false;
    let lead = match serde_json::to_value(&answer).map_err(ApiError::internal)? {
        serde_json::Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    crate::http::approvals::continue_run(state, &request, wants_stream(headers), lead).await
}
