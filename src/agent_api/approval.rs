//! An approval request: a tool call the policy (`approvals:`) gates, parked until a person
//! decides. The loop, the store, the channels and the HTTP API all speak these types, so they
//! live with the other agent contracts.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent_api::RunOptions;

/// The name of the `custom` stream event a parked run sends (`{"type": "approval_requested",
/// "data": <ApprovalRequest>}`).
pub const APPROVAL_REQUESTED: &str = "approval_requested";

/// What an approver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run this call.
    Approve,
    /// Run this call, and calls of the same tool (for `bash`: the same command prefix) for the
    /// rest of the conversation without asking.
    ApproveConversation,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::ApproveConversation => "approve_conversation",
            Decision::Deny => "deny",
        }
    }

    pub fn approves(self) -> bool {
        !matches!(self, Decision::Deny)
    }
}

/// Where a request stands; only `Pending` may change, and only once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    /// Nobody answered within `approvals.timeout_minutes`: denied.
    TimedOut,
    /// A new message reached the conversation before anyone decided: the call was not run.
    Superseded,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::TimedOut => "timed_out",
            ApprovalStatus::Superseded => "superseded",
        }
    }
}

/// The `antler_approvals_total` label of a settled request: its status, and for an approval
/// whether it was for the whole conversation; `None` while pending.
pub fn outcome_label(status: ApprovalStatus, decision: Option<Decision>) -> Option<&'static str> {
    Some(match (status, decision) {
        (ApprovalStatus::Pending, _) => return None,
        (ApprovalStatus::Approved, Some(Decision::ApproveConversation)) => "approved_conversation",
        (ApprovalStatus::Approved, _) => "approved",
        (ApprovalStatus::Denied, _) => "denied",
        (ApprovalStatus::TimedOut, _) => "timed_out",
        (ApprovalStatus::Superseded, _) => "superseded",
    })
}

/// Why the call needs a person's yes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalReason {
    /// The tool is in `approvals.tools`.
    Always,
    /// The tool is in `approvals.when_untrusted` and the run's context holds untrusted content
    /// from these sources (e.g. `web_fetch https://…`, `mcp:github`, `upload report.pdf`).
    Untrusted { sources: Vec<String> },
}

/// Who may decide (`approvals.approvers`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "users", rename_all = "snake_case")]
pub enum Approvers {
    /// The person whose turn it is.
    #[default]
    Requester,
    /// The daemon's admins (`gateway.admins` and each channel's admins).
    Admins,
    /// These Antler user ids.
    Users(Vec<String>),
}

/// A decision, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub decision: Decision,
    /// The Antler user id of whoever decided; `system` for a timeout or a superseding message.
    pub by: String,
    /// Their display name where known, for the chat's "approved by …" line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

/// Where a request was posted in a chat, so its buttons can be settled and the resumed run
/// answers there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatOrigin {
    /// The chat key's string form (`ChatKey`'s `Display`).
    pub chat_key: String,
    /// The platform message holding the request (its buttons), once sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// One request, persisted in the `approvals` tree from the park to the decision and kept after
/// it (the audit trail).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Short and URL-safe (it goes into button values and `/approve ID`).
    pub id: String,
    pub thread_id: String,
    /// The run that parked.
    pub run_id: String,
    pub tool_call_id: String,
    pub tool: String,
    pub args: Value,
    /// What the call would do, readable (the bash command, the URL, the file path).
    pub summary: String,
    pub reason: ApprovalReason,
    /// The thread's owner (a chat's id in a shared conversation).
    pub owner: String,
    /// The person whose turn parked (the run's speaker).
    pub requester: String,
    pub approvers: Approvers,
    /// The parked run's options, so the resumed run uses the same agent, model and mode.
    pub options: RunOptions,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub status: ApprovalStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionRecord>,
    /// Set when the request was posted in a chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<ChatOrigin>,
    /// Whose custom agent the parked run ran (a shared conversation's chooser): kept apart
    /// from `options`, whose `agent_owner` is never (de)serialized, so that no request body
    /// can set it. The resumed run gets it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_owner: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_settled_request_has_its_metric_label() {
        let cases = [
            (ApprovalStatus::Pending, None, None),
            (
                ApprovalStatus::Approved,
                Some(Decision::Approve),
                Some("approved"),
            ),
            (
                ApprovalStatus::Approved,
                Some(Decision::ApproveConversation),
                Some("approved_conversation"),
            ),
            (ApprovalStatus::Denied, Some(Decision::Deny), Some("denied")),
            (
                ApprovalStatus::TimedOut,
                Some(Decision::Deny),
                Some("timed_out"),
            ),
            (
                ApprovalStatus::Superseded,
                Some(Decision::Deny),
                Some("superseded"),
            ),
        ];
        for (status, decision, label) in cases {
            assert_eq!(outcome_label(status, decision), label, "{status:?}");
        }
    }
}
