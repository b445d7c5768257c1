//! `/approve ID` and `/deny ID [reason]`: a decision on a parked tool call, typed.
//!
//! The decision is recorded once (`Harness::decide_approval`); whoever records it fresh sees
//! the run continue: a request posted in a chat continues there (`Harness::chat_resume`), any
//! other comes back as [`CommandOutcome::Resume`] for the surface to run, as a button click
//! on the same surface would. A repeat changes nothing and says who decided.

use crate::agent_api::approval::{ApprovalReason, ApprovalRequest, ApprovalStatus, Decision};
use crate::approvals::{ApprovalError, Decider};
use crate::commands::surface::{CommandError, CommandSurface};
use crate::config::AppConfig;
use crate::harness::Harness;
use crate::identity::is_admin;

const APPROVE_USAGE: &str =
    "Usage: /approve ID — the id is in the request's message (e.g. /approve ap_7k2x).";
const DENY_USAGE: &str = "Usage: /deny ID [reason] — the id is in the request's message.";

/// What a typed decision comes to (`execute` makes it a `CommandOutcome`).
pub(crate) enum Typed {
    Reply(String),
    /// Fresh, and no chat continues it: the surface runs `Harness::resume_request(request)`.
    Resume {
        reply: String,
        request: Box<ApprovalRequest>,
    },
}

/// Records `decision` on request `id` for the surface's user and says what became of it.
pub(crate) async fn decide(
    surface: &dyn CommandSurface,
    harness: &Harness,
    config: &AppConfig,
    id: &str,
    decision: Decision,
    reason: Option<String>,
) -> Result<Typed, CommandError> {
    let id = id.trim();
    if id.is_empty() {
        let usage = match decision {
            Decision::Deny => DENY_USAGE,
            _ => APPROVE_USAGE,
        };
        return Ok(Typed::Reply(usage.into()));
    }
    let user_id = surface.user_id();
    let decider = Decider {
        user_id: user_id.to_string(),
        name: None,
        is_admin: is_admin(config, user_id),
    };
    let decided = match harness.decide_approval(id, &decider, decision, reason) {
        Ok(decided) => decided,
        Err(ApprovalError::NotFound { .. }) => {
            return Ok(Typed::Reply(format!(
                "There is no approval request {id}; check the id in the request's message."
            )));
        }
        Err(ApprovalError::NotAllowed { who }) => {
            return Ok(Typed::Reply(format!("You cannot decide on {id}: {who}.")));
        }
        Err(other) => return Err(CommandError::Surface(other.to_string())),
    };
    let request = decided.request;
    if !decided.fresh {
        return Ok(Typed::Reply(already_decided(&request)));
    }
    let said = decided_line(&request);
    if request.origin.is_some()
        && let Some(hook) = harness.chat_resume()
    {
        hook.resume(request);
        return Ok(Typed::Reply(format!(
            "{said} The run continues in the chat it was asked in."
        )));
    }
    Ok(Typed::Resume {
        reply: said,
        request: Box::new(request),
    })
}

/// "Approved: bash `ls` (ap_7k2x)." — what a fresh decision did, in one line.
pub fn decided_line(request: &ApprovalRequest) -> String {
    let what = match request.decision.as_ref().map(|d| d.decision) {
        Some(Decision::ApproveConversation) => "Approved for this conversation",
        Some(Decision::Approve) => "Approved",
        _ => "Denied",
    };
    format!(
        "{what}: {} {} ({}).",
        request.tool,
        quoted(&request.summary),
        request.id
    )
}

/// A request as a text surface shows it: what, why, and how to answer.
pub fn approval_prompt(request: &ApprovalRequest) -> String {
    let why = match &request.reason {
        ApprovalReason::Always => "this tool always needs approval".to_string(),
        ApprovalReason::Untrusted { sources } if sources.is_empty() => {
            "the conversation holds untrusted content".to_string()
        }
        ApprovalReason::Untrusted { sources } => {
            format!("untrusted content from {}", sources.join(", "))
        }
    };
    format!(
        "Approval needed ({id}): {tool} {what}\nWhy: {why}\nAnswer /approve {id}, or /deny {id} [reason].",
        id = request.id,
        tool = request.tool,
        what = quoted(&request.summary),
    )
}

/// What a second decision is told: the first one stands.
pub fn already_decided(request: &ApprovalRequest) -> String {
    let by = request
        .decision
        .as_ref()
        .map(|d| d.by_name.clone().unwrap_or_else(|| d.by.clone()))
        .unwrap_or_else(|| "nobody".into());
    let state = match request.status {
        ApprovalStatus::Pending => {
            return format!("{} is still waiting for a decision.", request.id);
        }
        ApprovalStatus::Approved => format!("was already approved by {by}"),
        ApprovalStatus::Denied => format!("was already denied by {by}"),
        ApprovalStatus::TimedOut => "timed out before anyone decided (denied)".into(),
        ApprovalStatus::Superseded => "was superseded by a newer message (not run)".into(),
    };
    format!("{} {state}; nothing changed.", request.id)
}

/// A summary as inline code, cut to a readable length.
fn quoted(summary: &str) -> String {
    const MAX: usize = 120;
    let one_line = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one_line.chars().take(MAX).collect();
    let ellipsis = if one_line.chars().count() > MAX {
        "…"
    } else {
        ""
    };
    format!("`{}{ellipsis}`", cut.replace('`', "'"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::approval::{Approvers, DecisionRecord};

    fn request(status: ApprovalStatus, decision: Option<Decision>) -> ApprovalRequest {
        let now = chrono::Utc::now();
        ApprovalRequest {
            id: "ap_7k2x".into(),
            thread_id: "t1".into(),
            run_id: "r1".into(),
            tool_call_id: "call_1".into(),
            tool: "bash".into(),
            args: serde_json::json!({"command": "ls"}),
            summary: "ls  -la\n/tmp".into(),
            reason: ApprovalReason::Always,
            owner: "alice".into(),
            requester: "alice".into(),
            approvers: Approvers::Requester,
            options: Default::default(),
            created_at: now,
            expires_at: now,
            status,
            decision: decision.map(|decision| DecisionRecord {
                decision,
                by: "alice".into(),
                by_name: Some("Alice".into()),
                reason: None,
                at: now,
            }),
            origin: None,
            agent_owner: None,
        }
    }

    #[test]
    fn lines_say_what_was_decided_and_by_whom() {
        let approved = request(
            ApprovalStatus::Approved,
            Some(Decision::ApproveConversation),
        );
        assert_eq!(
            decided_line(&approved),
            "Approved for this conversation: bash `ls -la /tmp` (ap_7k2x)."
        );
        assert_eq!(
            already_decided(&approved),
            "ap_7k2x was already approved by Alice; nothing changed."
        );
        let denied = request(ApprovalStatus::Denied, Some(Decision::Deny));
        assert_eq!(
            decided_line(&denied),
            "Denied: bash `ls -la /tmp` (ap_7k2x)."
        );
        let timed_out = request(ApprovalStatus::TimedOut, None);
        assert_eq!(
            already_decided(&timed_out),
            "ap_7k2x timed out before anyone decided (denied); nothing changed."
        );
    }

    #[test]
    fn a_prompt_says_what_why_and_how_to_answer() {
        let mut pending = request(ApprovalStatus::Pending, None);
        pending.reason = ApprovalReason::Untrusted {
            sources: vec!["web_fetch https://example.com/a".into()],
        };
        assert_eq!(
            approval_prompt(&pending),
            "Approval needed (ap_7k2x): bash `ls -la /tmp`\n\
             Why: untrusted content from web_fetch https://example.com/a\n\
             Answer /approve ap_7k2x, or /deny ap_7k2x [reason]."
        );
    }

    #[test]
    fn long_summaries_are_cut_and_backticks_cannot_break_out() {
        let text = quoted(&format!("echo `id` {}", "x".repeat(200)));
        assert!(text.starts_with("`echo 'id' x"), "{text}");
        assert!(text.ends_with("…`"), "{text}");
        assert_eq!(text.chars().count(), 123, "{text}");
    }
}
