//! What an approval request says in a chat, before and after the decision.

use crate::agent_api::approval::{ApprovalRequest, ApprovalStatus, Approvers, Decision};
use crate::approvals::texts::reason_label;

/// How much of the call's summary a request shows (a long heredoc would bury the buttons).
const SUMMARY_MAX_CHARS: usize = 1_200;

/// The request as posted: what the tool would do, why it asks, who may decide, the id, and
/// (`typed`: the channel has no buttons) how to answer by command. `requester` is the name of
/// the person whose turn parked, as the chat shows them.
pub(crate) fn request_text(request: &ApprovalRequest, requester: &str, typed: bool) -> String {
    let mut text = format!(
        "🔐 Approval needed: `{}`\n{}\nWhy: {}.\nWho can decide: {}.\nID: `{}`",
        request.tool,
        summary_block(&request.summary),
        reason_label(&request.reason),
        deciders(&request.approvers, requester),
        request.id,
    );
    if typed {
        text.push_str(&format!(
            "\nReply /approve {id} or /deny {id} [reason].",
            id = request.id
        ));
    }
    text
}

/// The request once decided: what it was, then the decision and who made it. The buttons go.
pub(crate) fn settled_text(request: &ApprovalRequest) -> String {
    format!(
        "🔐 `{}`\n{}\n{}",
        request.tool,
        summary_block(&request.summary),
        decision_line(request)
    )
}

/// "✅ Approved by Alice", "❌ Denied by Bob: not on prod", "⌛ Timed out: denied".
pub(crate) fn decision_line(request: &ApprovalRequest) -> String {
    let decision = request.decision.as_ref();
    let by = decision
        .map(|d| d.by_name.clone().unwrap_or_else(|| d.by.clone()))
        .unwrap_or_else(|| "someone".into());
    let reason = decision
        .and_then(|d| d.reason.as_deref())
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .map(|reason| format!(": {reason}"))
        .unwrap_or_default();
    match request.status {
        ApprovalStatus::Pending => "⏳ Waiting for a decision".into(),
        ApprovalStatus::Approved
            if decision.is_some_and(|d| d.decision == Decision::ApproveConversation) =>
        {
            format!("✅ Approved for this conversation by {by}")
        }
        ApprovalStatus::Approved => format!("✅ Approved by {by}"),
        ApprovalStatus::Denied => format!("❌ Denied by {by}{reason}"),
        ApprovalStatus::TimedOut => "⌛ Timed out: denied".into(),
        ApprovalStatus::Superseded => "⏭ Not run: a new message came before a decision".into(),
    }
}

/// The short answer to a click or command on a request decided before.
pub(crate) fn already_decided(request: &ApprovalRequest) -> String {
    match request.status {
        ApprovalStatus::Pending => "This request is still waiting for a decision.".into(),
        _ => format!("Already decided: {}", decision_line(request)),
    }
}

/// The summary in a code span, or a code block when it has lines or backticks of its own.
fn summary_block(summary: &str) -> String {
    let mut shown: String = summary.chars().take(SUMMARY_MAX_CHARS).collect();
    if shown.len() < summary.len() {
        shown.push('…');
    }
    if shown.trim().is_empty() {
        return "(no arguments)".into();
    }
    if shown.contains('\n') || shown.contains('`') {
        let fence = if shown.contains("```") { "~~~" } else { "```" };
        format!("{fence}\n{shown}\n{fence}")
    } else {
        format!("`{shown}`")
    }
}

fn deciders(approvers: &Approvers, requester: &str) -> String {
    match approvers {
        Approvers::Requester => format!("{requester} (who asked) or an admin"),
        Approvers::Admins => "an admin".into(),
        Approvers::Users(users) => format!("{} or an admin", users.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::RunOptions;
    use crate::agent_api::approval::{ApprovalReason, DecisionRecord};
    use chrono::Utc;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            id: "k3x9".into(),
            thread_id: "t1".into(),
            run_id: "r1".into(),
            tool_call_id: "c1".into(),
            tool: "bash".into(),
            args: serde_json::json!({"command": "ls -la /mnt/user-data"}),
            summary: "ls -la /mnt/user-data".into(),
            reason: ApprovalReason::Untrusted {
                sources: vec!["web_fetch https://example.com/".into()],
            },
            owner: "telegram-42".into(),
            requester: "telegram-42".into(),
            approvers: Approvers::Requester,
            options: RunOptions::default(),
            created_at: Utc::now(),
            expires_at: Utc::now(),
            status: ApprovalStatus::Pending,
            decision: None,
            origin: None,
            agent_owner: None,
        }
    }

    #[test]
    fn the_request_says_what_why_who_and_how() {
        let text = request_text(&request(), "Ann", true);
        assert_eq!(
            text,
            "🔐 Approval needed: `bash`\n`ls -la /mnt/user-data`\nWhy: the conversation holds \
             untrusted content from web_fetch https://example.com/.\nWho can decide: Ann (who \
             asked) or an admin.\nID: `k3x9`\nReply /approve k3x9 or /deny k3x9 [reason]."
        );
        assert!(!request_text(&request(), "Ann", false).contains("/approve"));
        let heredoc = ApprovalRequest {
            summary: "cat <<EOF\nhi `x`\nEOF".into(),
            ..request()
        };
        assert!(request_text(&heredoc, "Ann", false).contains("```\ncat <<EOF\nhi `x`\nEOF\n```"));
    }

    #[test]
    fn a_settled_request_names_the_decision_and_who_made_it() {
        let decided = |status, decision, by_name: Option<&str>, reason: Option<&str>| {
            let request = ApprovalRequest {
                status,
                decision: Some(DecisionRecord {
                    decision,
                    by: "telegram-7".into(),
                    by_name: by_name.map(String::from),
                    reason: reason.map(String::from),
                    at: Utc::now(),
                }),
                ..request()
            };
            decision_line(&request)
        };
        let cases = [
            (
                decided(
                    ApprovalStatus::Approved,
                    Decision::Approve,
                    Some("Alice"),
                    None,
                ),
                "✅ Approved by Alice",
            ),
            (
                decided(
                    ApprovalStatus::Approved,
                    Decision::ApproveConversation,
                    Some("Alice"),
                    None,
                ),
                "✅ Approved for this conversation by Alice",
            ),
            (
                decided(
                    ApprovalStatus::Denied,
                    Decision::Deny,
                    None,
                    Some(" not on prod "),
                ),
                "❌ Denied by telegram-7: not on prod",
            ),
            (
                decided(
                    ApprovalStatus::TimedOut,
                    Decision::Deny,
                    Some("system"),
                    None,
                ),
                "⌛ Timed out: denied",
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(line, expected);
        }
        let settled = ApprovalRequest {
            status: ApprovalStatus::Denied,
            decision: Some(DecisionRecord {
                decision: Decision::Deny,
                by: "u".into(),
                by_name: Some("Bob".into()),
                reason: None,
                at: Utc::now(),
            }),
            ..request()
        };
        assert_eq!(
            settled_text(&settled),
            "🔐 `bash`\n`ls -la /mnt/user-data`\n❌ Denied by Bob"
        );
    }
}
