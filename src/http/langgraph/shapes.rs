//! A thread and its state in the shapes the SDKs read (`Thread`, `ThreadState`, `Checkpoint`),
//! beside the fields Antler's own routes always answered.
//!
//! A checkpoint id names the thread's head version (`ThreadRecord::last_checkpoint`, the
//! `Head::version` every saved step bumps), written as a UUID because the SDKs and DeerFlow's
//! UI treat ids as opaque UUID-like strings. It is stable (the same version always has the same
//! id) and resolvable: [`version_of`] reads it back. The checkpoint log keeps no marks of older
//! versions, so only the latest checkpoint can be given back with its values.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use antler_store::ThreadRecord;
use antler_store::log::Head;
use antler_store::messages::Message;
use antler_store::state::ThreadState;
use antler_store::threads::ThreadStatus;

use crate::agent_api::approval::ApprovalStatus;
use crate::http::{ApiError, AppState};
use crate::middleware::clarification::ASK_CLARIFICATION;

/// The prefix of every checkpoint id: the version is the last 12 hex digits.
const CHECKPOINT_PREFIX: &str = "00000000-0000-0000-0000-";

/// The id of a thread's checkpoint `version`; `None` for a thread never checkpointed.
pub(crate) fn checkpoint_id(version: u64) -> Option<String> {
    (version > 0).then(|| format!("{CHECKPOINT_PREFIX}{version:012x}"))
}

/// The version a checkpoint id names; `None` for an id Antler did not make.
pub(crate) fn version_of(checkpoint_id: &str) -> Option<u64> {
    let hex = checkpoint_id.strip_prefix(CHECKPOINT_PREFIX)?;
    if hex.len() != 12 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().filter(|v| *v > 0)
}

/// The thread's latest checkpoint: its head (`None`: never checkpointed) and its state.
pub(crate) fn latest(
    state: &AppState,
    thread_id: &str,
) -> Result<(Option<Head>, Arc<ThreadState>), ApiError> {
    Ok(
        match state
            .harness
            .threads()
            .state(thread_id)
            .map_err(ApiError::internal)?
        {
            Some((head, values)) => (Some(head), values),
            None => (None, Arc::default()),
        },
    )
}

/// The SDK's `Checkpoint` of `version` on `thread_id`.
pub(crate) fn checkpoint(thread_id: &str, version: u64) -> Value {
    json!({
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id(version),
        "checkpoint_map": null,
    })
}

/// A thread as the SDK's `Thread`: the record's own fields (Antler's documented shape) plus
/// `values` (the state, `{}` when not read) and `interrupts` (by task, as the SDK keys them).
pub(crate) fn thread(app: &AppState, record: &ThreadRecord, values: Option<&ThreadState>) -> Value {
    let mut out = match serde_json::to_value(record) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let interrupts = values
        .map(|state| interrupts(app, record, state))
        .unwrap_or_default();
    let by_task: Map<String, Value> = if interrupts.is_empty() {
        Map::new()
    } else {
        Map::from_iter([(
            crate::http::langgraph::assistants::LEAD_AGENT.to_string(),
            Value::Array(interrupts),
        )])
    };
    out.insert(
        "values".into(),
        values.map_or_else(|| json!({}), |state| json!(state)),
    );
    out.insert("interrupts".into(), Value::Object(by_task));
    Value::Object(out)
}

/// A thread's latest state as the SDK's `ThreadState`, plus today's `thread_id` and `status`.
/// `head` is `None` for a thread that has no checkpoint yet.
pub(crate) fn state(
    app: &AppState,
    record: &ThreadRecord,
    head: Option<&Head>,
    values: &ThreadState,
) -> Value {
    let thread_id = record.thread_id.as_str();
    let version = head.map_or(0, |head| head.version);
    let interrupts = interrupts(app, record, values);
    let tasks: Vec<Value> = if interrupts.is_empty() {
        Vec::new()
    } else {
        vec![json!({
            "id": checkpoint_id(version),
            "name": crate::http::langgraph::assistants::LEAD_AGENT,
            "error": null,
            "interrupts": interrupts,
            "checkpoint": null,
            "state": null,
            "result": null,
        })]
    };
    json!({
        "thread_id": thread_id,
        "status": record.status,
        "values": values,
        "next": [],
        "tasks": tasks,
        "checkpoint": checkpoint(thread_id, version),
        "metadata": checkpoint_metadata(record, head),
        "created_at": head.map_or(record.updated_at, |head| head.created_at),
        "parent_checkpoint": (version > 1).then(|| checkpoint(thread_id, version - 1)),
        "interrupts": interrupts,
    })
}

/// What LangGraph records beside a checkpoint (`source`, `step`, the run, the thread's own
/// metadata), so a history `metadata` filter has something to match.
pub(crate) fn checkpoint_metadata(record: &ThreadRecord, head: Option<&Head>) -> Value {
    let mut metadata = record.metadata.clone();
    let run_id = head.map_or("", |head| head.run_id.as_str());
    let source = match head {
        None => "input",
        // A checkpoint saved outside a run is a client's state update.
        Some(_) if run_id.is_empty() => "update",
        Some(_) => "loop",
    };
    metadata.insert("source".into(), json!(source));
    metadata.insert(
        "step".into(),
        json!(head.map_or(-1, |head| head.step as i64)),
    );
    metadata.insert("thread_id".into(), json!(record.thread_id));
    if !run_id.is_empty() {
        metadata.insert("run_id".into(), json!(run_id));
    }
    metadata.insert("parents".into(), json!({}));
    Value::Object(metadata)
}

/// What a thread waits on, as the SDK's `Interrupt`s: the question of a run that ended on
/// `ask_clarification` (its last message; the next message answers it), and the tool calls
/// parked for a person's approval (decided through `/threads/{id}/approvals/{id}`). Only an
/// `interrupted` thread waits on anything.
fn interrupts(app: &AppState, record: &ThreadRecord, state: &ThreadState) -> Vec<Value> {
    if record.status != ThreadStatus::Interrupted {
        return Vec::new();
    }
    let mut waiting = Vec::new();
    if let Some(Message::Tool(tool)) = state.messages.last()
        && tool.name == ASK_CLARIFICATION
    {
        let value = tool
            .artifact
            .clone()
            .unwrap_or_else(|| json!(tool.content.as_ref() as &str));
        waiting.push(json!({"id": tool.tool_call_id, "value": value}));
    }
    match app.harness.approvals().list_thread(&record.thread_id) {
        Ok(requests) => waiting.extend(
            requests
                .iter()
                .filter(|request| request.status == ApprovalStatus::Pending)
                .map(|request| {
                    // What the owner's approval list shows, never the parked run's options.
                    json!({"id": request.id, "value": {
                        "type": "approval_request",
                        "approval_id": request.id,
                        "tool": request.tool,
                        "tool_call_id": request.tool_call_id,
                        "summary": request.summary,
                        "expires_at": request.expires_at,
                    }})
                }),
        ),
        Err(error) => {
            tracing::warn!(%error, thread_id = %record.thread_id, "Could not list the thread's approvals");
        }
    }
    waiting
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_ids_name_their_version_and_nothing_else() {
        assert_eq!(checkpoint_id(0), None);
        let id = checkpoint_id(42).unwrap_or_default();
        assert_eq!(id, "00000000-0000-0000-0000-00000000002a");
        assert_eq!(version_of(&id), Some(42));
        assert_eq!(version_of("00000000-0000-0000-0000-000000000000"), None);
        assert_eq!(version_of("1ef4a9b8-0000-0000-0000-00000000002a"), None);
        assert_eq!(version_of("00000000-0000-0000-0000-2a"), None);
    }
}
