//! `GET /api/threads/{id}/messages/page`: the thread's messages a page at a time, newest page
//! first, in the shape DeerFlow's UI reloads a conversation from (`{data, has_more,
//! next_before_seq}`, each row `{run_id, seq, content, metadata, created_at}`).
//!
//! DeerFlow serves these rows from a journal of run events; Antler has the thread's state, so a
//! row's `seq` is the message's position in it (1-based). Positions are stable while messages
//! are only appended, which is every turn; a summarization that drops old messages renumbers
//! the rest, and the UI then reloads from the first page as it does after any refresh.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::assistants::LEAD_AGENT;
use super::errors::unsupported;
use super::shapes;
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};

/// Rows a page holds unless asked (DeerFlow's own page size).
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct PageQuery {
    before_seq: Option<u64>,
    limit: Option<usize>,
}

pub(crate) async fn page(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Json<Value>, ApiError> {
    owned_thread(&state, &user, &thread_id)?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(unsupported(
            "limit",
            format!("must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let (head, values) = shapes::latest(&state, &thread_id)?;
    let created_at = head.map(|head| head.created_at);
    // Messages the harness injected for the model are not the conversation.
    let visible: Vec<(u64, Value)> = values
        .messages
        .iter()
        .enumerate()
        .filter(|(_, message)| !message.is_hidden())
        .map(|(index, message)| (index as u64 + 1, json!(message)))
        .filter(|(seq, _)| query.before_seq.is_none_or(|before| *seq < before))
        .collect();
    let start = visible.len().saturating_sub(limit);
    let has_more = start > 0;
    let rows: Vec<Value> = visible[start..]
        .iter()
        .map(|(seq, message)| {
            json!({
                "run_id": "",
                "seq": seq,
                "content": message,
                "metadata": {"caller": LEAD_AGENT},
                "created_at": created_at,
            })
        })
        .collect();
    let next_before_seq = if has_more {
        visible.get(start).map(|(seq, _)| *seq)
    } else {
        None
    };
    Ok(Json(json!({
        "data": rows,
        "has_more": has_more,
        "next_before_seq": next_before_seq,
    })))
}
