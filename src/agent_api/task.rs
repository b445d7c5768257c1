//! A sub-agent's task as the run reports it: how it ended, why it was capped, and its end's
//! payload (what the channel board shows and what usage meters). `CapReason::of` is beside
//! `StopReason`, so this module stays a leaf.

use std::collections::BTreeMap;

use serde::Serialize;

use antler_store::messages::Usage;

pub const TASK_STARTED: &str = "task_started";
pub const TASK_RUNNING: &str = "task_running";
pub const TASK_COMPLETED: &str = "task_completed";
pub const TASK_FAILED: &str = "task_failed";
pub const TASK_TIMED_OUT: &str = "task_timed_out";
pub const TASK_CANCELLED: &str = "task_cancelled";

/// How a sub-agent's task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

impl TaskStatus {
    /// The `task_*` event announcing this end.
    pub fn event_name(self) -> &'static str {
        match self {
            TaskStatus::Completed => TASK_COMPLETED,
            TaskStatus::Failed => TASK_FAILED,
            TaskStatus::Cancelled => TASK_CANCELLED,
            TaskStatus::TimedOut => TASK_TIMED_OUT,
        }
    }
}

/// Why a sub-agent stopped short of a plain answer (DeerFlow's `subagent_stop_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapReason {
    TokenCapped,
    TurnCapped,
    LoopCapped,
}

impl CapReason {
    /// How the lead model's tool message names the cap.
    pub fn label(self) -> &'static str {
        match self {
            CapReason::TokenCapped => "token budget",
            CapReason::TurnCapped => "turn budget",
            CapReason::LoopCapped => "repeated tool-call loop",
        }
    }
}

/// A sub-agent's end as the run reports it. Its `usage_by_model` is what the harness meters for
/// the user: sub-agent tokens count like the lead's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskEnd {
    pub task_id: String,
    pub subagent_type: String,
    pub status: TaskStatus,
    pub stop_reason: Option<CapReason>,
    pub model: Option<String>,
    /// The sum of `usage_by_model`.
    pub token_usage: Usage,
    pub usage_by_model: BTreeMap<String, Usage>,
    /// A completed task's answer.
    pub result: Option<String>,
    /// What the lead model reads of a task that did not complete.
    pub error: Option<String>,
}
