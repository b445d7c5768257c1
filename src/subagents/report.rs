//! How a sub-agent's end reaches the lead agent and the surfaces: the tool message text
//! (`Task Succeeded. Result: …`), its structured metadata, and the `task_*` run events.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::agent_api::taint::TaintSource;
use crate::agent_api::{CapReason, TaskStatus};
use crate::agent_api::{RunEvent, TaskEnd};
use antler_store::messages::Usage;

/// The brief of a result kept in the metadata (the tool message has all of it).
const BRIEF_CHARS: usize = 2000;

/// The end of one sub-agent run.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskReport {
    pub task_id: String,
    pub subagent_type: String,
    pub status: TaskStatus,
    pub cap: Option<CapReason>,
    /// The final answer (completed), or the last text it wrote.
    pub result: Option<String>,
    pub error: Option<String>,
    /// The model the sub-agent ran on (`None` when it never started).
    pub model: Option<String>,
    /// Tokens spent, by the model that spent them.
    pub usage: BTreeMap<String, Usage>,
    /// The sub-agent's AI messages.
    pub messages: usize,
    /// The untrusted sources its context held at the end (the lead's and what it read): they
    /// taint the lead's thread when the report returns.
    pub untrusted: Vec<TaintSource>,
}

impl TaskReport {
    /// A task that ended before its agent ran (unknown type, no model, …).
    pub fn failed_early(task_id: &str, subagent_type: &str, error: String) -> Self {
        Self {
            task_id: task_id.to_string(),
            subagent_type: subagent_type.to_string(),
            status: TaskStatus::Failed,
            cap: None,
            result: None,
            error: Some(error),
            model: None,
            usage: BTreeMap::new(),
            messages: 0,
            untrusted: Vec::new(),
        }
    }

    pub fn total_usage(&self) -> Usage {
        let mut total = Usage::default();
        for usage in self.usage.values() {
            total.add(usage);
        }
        total
    }

    /// What the lead model reads.
    pub fn text(&self) -> String {
        let error = self.error.as_deref().unwrap_or("unknown error");
        let cap = self
            .cap
            .map(|cap| format!(" (capped: {})", cap.label()))
            .unwrap_or_default();
        match self.status {
            TaskStatus::Completed => format!(
                "Task Succeeded{cap}. Result: {}",
                self.result.as_deref().unwrap_or("")
            ),
            TaskStatus::Failed => format!("Task failed{cap}. Error: {error}"),
            TaskStatus::TimedOut => format!("Task timed out. Error: {error}"),
            TaskStatus::Cancelled => "Task cancelled by user.".to_string(),
        }
    }

    /// The structured metadata of the tool message (DeerFlow's `subagent_*` keys).
    pub fn metadata(&self) -> Value {
        let result = self.result.as_deref().unwrap_or("");
        json!({
            "subagent_type": self.subagent_type,
            "subagent_status": self.status,
            "subagent_stop_reason": self.cap,
            "subagent_error": self.error,
            "subagent_result_brief": result.chars().take(BRIEF_CHARS).collect::<String>(),
            "subagent_result_sha256": hex::encode(Sha256::digest(result.as_bytes())),
            "subagent_model_name": self.model,
            "subagent_token_usage": self.total_usage(),
            "subagent_messages": self.messages,
        })
    }

    /// The `task_completed` / `task_failed` / … event: the answer when it completed, the text
    /// the lead reads otherwise, and the tokens by model the harness meters for the user.
    pub fn event(&self) -> RunEvent {
        let completed = self.status == TaskStatus::Completed;
        RunEvent::TaskEnded(Box::new(TaskEnd {
            task_id: self.task_id.clone(),
            subagent_type: self.subagent_type.clone(),
            status: self.status,
            stop_reason: self.cap,
            model: self.model.clone(),
            token_usage: self.total_usage(),
            usage_by_model: self.usage.clone(),
            result: completed.then(|| self.result.clone()).flatten(),
            error: (!completed).then(|| self.text()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: TaskStatus) -> TaskReport {
        TaskReport {
            status,
            result: Some("42".into()),
            error: Some("boom".into()),
            model: Some("m".into()),
            ..TaskReport::failed_early("call_1", "bash", String::new())
        }
    }

    #[test]
    fn texts_follow_the_reference() {
        assert_eq!(
            report(TaskStatus::Completed).text(),
            "Task Succeeded. Result: 42"
        );
        assert_eq!(
            report(TaskStatus::Failed).text(),
            "Task failed. Error: boom"
        );
        assert!(
            report(TaskStatus::TimedOut)
                .text()
                .starts_with("Task timed out.")
        );
        assert!(
            report(TaskStatus::Cancelled)
                .text()
                .starts_with("Task cancelled")
        );
        let capped = TaskReport {
            cap: Some(CapReason::TurnCapped),
            ..report(TaskStatus::Completed)
        };
        assert_eq!(
            capped.text(),
            "Task Succeeded (capped: turn budget). Result: 42"
        );
    }

    #[test]
    fn metadata_and_events_carry_status_usage_and_model() {
        let mut done = report(TaskStatus::Completed);
        done.usage.insert(
            "m".into(),
            Usage {
                input_tokens: 3,
                output_tokens: 4,
                total_tokens: 7,
                ..Default::default()
            },
        );
        let meta = done.metadata();
        assert_eq!(meta["subagent_status"], "completed");
        assert_eq!(meta["subagent_model_name"], "m");
        assert_eq!(meta["subagent_token_usage"]["total_tokens"], 7);
        let event = done.event();
        let RunEvent::TaskEnded(end) = &event else {
            panic!("a task end")
        };
        assert_eq!(end.usage_by_model["m"].total_tokens, 7);
        let (name, data) = event.custom_wire().unwrap();
        assert_eq!(name, crate::agent_api::progress::TASK_COMPLETED);
        assert_eq!(data["result"], "42");
        assert_eq!(data["usage_by_model"]["m"]["total_tokens"], 7);
    }
}
