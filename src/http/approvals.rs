//! Approval routes: a thread's requests, a decision on one, and the audit list.
//!
//! `POST /api/threads/{id}/approvals/{approval_id}` records the decision once
//! (`Harness::decide_approval`). A fresh decision continues the parked run: a request posted in
//! a chat continues there (202, `Harness::chat_resume`); any other continues here, answered as
//! `/runs/wait` answers (the decision's fields first) or, with `Accept: text/event-stream`,
//! streamed as `/runs/stream` streams, after a `custom` `approval_decided` frame. A repeat
//! (a double click) is 200 with the record and `"fresh": false`, and runs nothing.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::agent_api::approval::{ApprovalRequest, ApprovalStatus, Approvers, Decision};
use crate::approvals::{ApprovalError, ApprovalFilter, Decider};
use crate::http::runs::{run_error, stream_run, wait_run};
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::identity::is_admin;
use crate::paths::validate_id;

/// The custom stream event that opens a resumed run's stream: the decision, as recorded.
pub(crate) const APPROVAL_DECIDED: &str = "approval_decided";
/// Longest reason kept with a decision.
const MAX_REASON_CHARS: usize = 2000;
/// `GET /api/approvals` answers this many without `limit`, and at most `MAX_LIMIT`.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionBody {
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    status: Option<ApprovalStatus>,
    user: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/threads/{id}/approvals`: the thread's requests, newest first (the caller's
/// thread; an admin may read any).
pub(crate) async fn for_thread(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if is_admin_caller(&state, &user) {
        validate_id("thread", &thread_id)?;
        let exists = state
            .harness
            .threads()
            .get(&thread_id)
            .map_err(ApiError::internal)?;
        if exists.is_none() {
            return Err(ApiError::thread_not_found(&thread_id));
        }
    } else {
        owned_thread(&state, &user, &thread_id)?;
    }
    let approvals = state
        .harness
        .approvals()
        .list_thread(&thread_id)
        .map_err(ApiError::internal)?;
    Ok(Json(
        json!({"thread_id": thread_id, "approvals": approvals}),
    ))
}

/// `GET /api/approvals`: the caller's requests (made, owned or decided by them); an admin's
/// are everyone's, or one user's with `?user=`.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let admin = is_admin_caller(&state, &user);
    let who = match query.user.map(|u| u.trim().to_string()) {
        Some(other) if !other.is_empty() && other != user.0 => {
            if !admin {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "only admins may list another user's approvals; leave out `user`",
                ));
            }
            Some(other)
        }
        _ if admin => None,
        _ => Some(user.0.clone()),
    };
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    let filter = ApprovalFilter {
        user: who,
        status: query.status,
        limit,
    };
    let approvals = state
        .harness
        .approvals()
        .list(&filter)
        .map_err(ApiError::internal)?;
    Ok(Json(json!({"approvals": approvals})))
}

/// `POST /api/threads/{id}/approvals/{approval_id}`: see the module's description.
pub(crate) async fn decide(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    headers: HeaderMap,
    Path((thread_id, approval_id)): Path<(String, String)>,
    Json(body): Json<DecisionBody>,
) -> Result<Response, ApiError> {
    validate_id("thread", &thread_id)?;
    let reason = body
        .reason
        .map(|reason| reason.trim().to_string())
        .filter(|reason| !reason.is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(ApiError::bad_request(format!(
            "reason is longer than {MAX_REASON_CHARS} characters; shorten it"
        )));
    }
    let admin = is_admin_caller(&state, &user);
    let visible = state
        .harness
        .approvals()
        .get(&approval_id)
        .map_err(ApiError::internal)?
        .filter(|request| request.thread_id == thread_id && (admin || sees(request, &user.0)));
    if visible.is_none() {
        return Err(approval_not_found(&approval_id, &thread_id));
    }
    let decider = Decider {
        user_id: user.0.clone(),
        name: None,
        is_admin: admin,
    };
    let decided = state
        .harness
        .decide_approval(&approval_id, &decider, body.decision, reason)
        .map_err(|error| match error {
            ApprovalError::NotFound { .. } => approval_not_found(&approval_id, &thread_id),
            ApprovalError::NotAllowed { who } => {
                ApiError::new(StatusCode::FORBIDDEN, "not_an_approver", who)
            }
            other => ApiError::internal(other),
        })?;
    let request = decided.request;
    if !decided.fresh {
        return Ok(Json(json!({"approval": request, "fresh": false})).into_response());
    }
    if request.origin.is_some()
        && let Some(hook) = state.harness.chat_resume()
    {
        let body = json!({
            "approval": request,
            "fresh": true,
            "continues_in": "chat",
            "message": "decided; the run continues in the chat the request was posted in",
        });
        hook.resume(request);
        return Ok((StatusCode::ACCEPTED, Json(body)).into_response());
    }
    let lead = Map::from_iter([
        ("approval".to_string(), json!(request)),
        ("fresh".to_string(), Value::Bool(true)),
    ]);
    continue_run(&state, &request, wants_stream(&headers), lead).await
}

/// Runs the continuation of a freshly decided `request` (no chat continues it): the answer of
/// `/runs/wait` with `lead`'s fields first, or with `stream` the `/runs/stream` events after a
/// `custom` frame `approval_decided` carrying `lead`.
pub(crate) async fn continue_run(
    state: &AppState,
    request: &ApprovalRequest,
    stream: bool,
    lead: Map<String, Value>,
) -> Result<Response, ApiError> {
    let mut run = state.harness.resume_request(request);
    run.want_values = stream;
    // Starting a run (building its agent) is a large future of its own; boxed, as in
    // `/runs/wait`.
    let handle = Box::pin(state.harness.start_run(run))
        .await
        .map_err(run_error)?;
    let thread_id = request.thread_id.clone();
    if stream {
        let frame = json!({"type": APPROVAL_DECIDED, "data": Value::Object(lead)});
        let lead = Event::default().event("custom").data(frame.to_string());
        return Ok(stream_run(
            handle,
            thread_id,
            crate::http::langgraph::stream::StreamRequest::default(),
            Some(lead),
        )
        .into_response());
    }
    wait_run(handle, thread_id, lead).await
}

/// Whether the client asked for the run as an event stream.
pub(crate) fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/event-stream"))
}

/// Admins and the local operator see and may decide every request (the policy says whether an
/// admin is an approver).
fn is_admin_caller(state: &AppState, user: &AuthUser) -> bool {
    user.is_operator() || is_admin(&state.config.current(), &user.0)
}

/// Who may see a request besides admins: the thread's owner, the requester and the approvers
/// named in it. Everyone else gets the 404 an unknown id gets.
fn sees(request: &ApprovalRequest, user_id: &str) -> bool {
    request.owner == user_id
        || request.requester == user_id
        || matches!(&request.approvers, Approvers::Users(users) if users.iter().any(|u| u == user_id))
}

fn approval_not_found(approval_id: &str, thread_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "approval_not_found",
        format!(
            "no approval request {approval_id} on thread {thread_id}; list them with GET /api/threads/{thread_id}/approvals"
        ),
    )
}
