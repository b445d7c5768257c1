//! The typed progress a run reports besides its messages (the plan, summaries, sub-agents), and
//! the one place they get their wire names and payloads.
//!
//! Consumers (the channel layer's board, usage metering, the tests) match these variants, so
//! none of them imports the middleware or sub-agent module that emits one just for a name. The
//! HTTP stream sends them as LangGraph-style `custom` events, `{"type": name, "data": …}`, with
//! the names and payloads the stream has always had ([`RunEvent::custom_wire`]).

use serde_json::{Value, json};

use crate::agent_api::RunEvent;
pub use crate::agent_api::task::{
    TASK_CANCELLED, TASK_COMPLETED, TASK_FAILED, TASK_RUNNING, TASK_STARTED, TASK_TIMED_OUT,
};
use crate::agent_api::task::{TaskEnd, TaskStatus};

pub const TODOS_UPDATED: &str = "todos_updated";
pub const SUMMARIZATION: &str = "summarization";
impl RunEvent {
    /// The `(type, data)` of the `custom` event this sends on the LangGraph-compatible stream:
    /// the typed progress under the names it always had, `Custom` as given. `None` for the
    /// events that have a stream mode of their own (messages, values, errors, the end).
    pub fn custom_wire(&self) -> Option<(&str, Value)> {
        let wire = match self {
            RunEvent::TodosUpdated { todos } => (TODOS_UPDATED, json!({ "todos": todos })),
            RunEvent::Summarized { model, usage } => {
                (SUMMARIZATION, json!({"model": model, "usage": usage}))
            }
            RunEvent::TaskStarted {
                task_id,
                description,
                subagent_type,
                prompt,
            } => (
                TASK_STARTED,
                json!({
                    "task_id": task_id,
                    "description": description,
                    "subagent_type": subagent_type,
                    "prompt": prompt,
                }),
            ),
            RunEvent::TaskRunning {
                task_id,
                message,
                message_index,
            } => (
                TASK_RUNNING,
                json!({
                    "task_id": task_id,
                    "message": message,
                    "message_index": message_index,
                    "total_messages": message_index,
                }),
            ),
            RunEvent::TaskEnded(end) => (end.status.event_name(), task_end_data(end)),
            RunEvent::ApprovalRequested(request) => (
                crate::agent_api::approval::APPROVAL_REQUESTED,
                serde_json::to_value(request.as_ref()).unwrap_or(Value::Null),
            ),
            RunEvent::Custom { name, data } => (name.as_str(), data.clone()),
            _ => return None,
        };
        Some(wire)
    }
}

/// The `task_completed` / `task_failed` / … payload, keys in the order the stream always had.
fn task_end_data(end: &TaskEnd) -> Value {
    let mut data = json!({
        "task_id": end.task_id,
        "subagent_type": end.subagent_type,
        "status": end.status,
        "stop_reason": end.stop_reason,
        "model": end.model,
        "token_usage": end.token_usage,
        "usage_by_model": end.usage_by_model,
    });
    match end.status {
        TaskStatus::Completed => data["result"] = json!(end.result),
        _ => data["error"] = json!(end.error),
    }
    data
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::agent_api::StopReason;
    use crate::agent_api::task::CapReason;
    use antler_store::messages::Message;
    use antler_store::messages::Usage;
    use antler_store::state::{Todo, TodoStatus};

    fn usage(total: u64) -> Usage {
        Usage {
            input_tokens: total - 1,
            output_tokens: 1,
            total_tokens: total,
            ..Default::default()
        }
    }

    /// The stream's payloads, byte for byte as they were when these were `Custom` events.
    #[test]
    fn typed_progress_keeps_its_wire_names_and_payloads() {
        let todos = RunEvent::TodosUpdated {
            todos: vec![Todo {
                content: "a".into(),
                status: TodoStatus::InProgress,
                active_form: Some("Doing a".into()),
            }],
        };
        let (name, data) = todos.custom_wire().unwrap();
        assert_eq!(name, "todos_updated");
        assert_eq!(
            data.to_string(),
            r#"{"todos":[{"content":"a","status":"in_progress","activeForm":"Doing a"}]}"#
        );
        let summarized = RunEvent::Summarized {
            model: "m".into(),
            usage: usage(10),
        };
        let (name, data) = summarized.custom_wire().unwrap();
        assert_eq!(name, "summarization");
        assert_eq!(
            data.to_string(),
            r#"{"model":"m","usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}"#
        );
        let started = RunEvent::TaskStarted {
            task_id: "c1".into(),
            description: "Scan".into(),
            subagent_type: "bash".into(),
            prompt: "ls".into(),
        };
        let (name, data) = started.custom_wire().unwrap();
        assert_eq!(name, "task_started");
        assert_eq!(
            data.to_string(),
            r#"{"task_id":"c1","description":"Scan","subagent_type":"bash","prompt":"ls"}"#
        );
        let running = RunEvent::TaskRunning {
            task_id: "c1".into(),
            message: Message::ai("hi"),
            message_index: 2,
        };
        let (name, data) = running.custom_wire().unwrap();
        assert_eq!(name, "task_running");
        assert_eq!(data["message"]["content"], "hi");
        assert_eq!(
            (
                data["message_index"].as_u64(),
                data["total_messages"].as_u64()
            ),
            (Some(2), Some(2))
        );
    }

    #[test]
    fn a_task_end_is_named_by_its_status_and_carries_result_or_error() {
        let end = TaskEnd {
            task_id: "c1".into(),
            subagent_type: "bash".into(),
            status: TaskStatus::Completed,
            stop_reason: None,
            model: Some("m".into()),
            token_usage: usage(7),
            usage_by_model: BTreeMap::from([("m".to_string(), usage(7))]),
            result: Some("42".into()),
            error: None,
        };
        let completed = RunEvent::TaskEnded(Box::new(end.clone()));
        let (name, data) = completed.custom_wire().unwrap();
        assert_eq!(name, "task_completed");
        let keys: Vec<&str> = data
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "task_id",
                "subagent_type",
                "status",
                "stop_reason",
                "model",
                "token_usage",
                "usage_by_model",
                "result"
            ]
        );
        let failed = TaskEnd {
            status: TaskStatus::TimedOut,
            stop_reason: Some(CapReason::TurnCapped),
            result: None,
            error: Some("Task timed out. Error: slow".into()),
            ..end
        };
        let timed_out = RunEvent::TaskEnded(Box::new(failed));
        let (name, data) = timed_out.custom_wire().unwrap();
        assert_eq!(name, "task_timed_out");
        assert_eq!(data["error"], "Task timed out. Error: slow");
        assert_eq!(data["stop_reason"], "turn_capped");
        assert!(data.get("result").is_none());
        let other = RunEvent::Custom {
            name: "mine".into(),
            data: json!({"x": 1}),
        };
        assert_eq!(other.custom_wire(), Some(("mine", json!({"x": 1}))));
        let finished = RunEvent::Finished {
            stop_reason: StopReason::Completed,
        };
        assert_eq!(finished.custom_wire(), None);
    }
}
