//! A decision from the chat: a click on a request's buttons, or a typed `/approve ID` /
//! `/deny ID [reason]`, by whoever the identity resolver says sent it. A refusal or a repeat
//! is answered and changes nothing; a decision hands the request to its chat's resume entry.

use antler_channel::{ButtonClick, ChatKey, InboundMessage};

use crate::agent_api::approval::{ApprovalRequest, ApprovalStatus, Decision};
use crate::approvals::{ApprovalError, Decided, Decider};
use crate::channels::approvals::text::already_decided;
use crate::channels::approvals::{Action, parse_value};
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::outbound::reply;
use crate::channels::outbox::OutboxStep;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::sender::sender_name;
use crate::commands::Command;

const APPROVE_USAGE: &str = "Usage: /approve ID (the id shown with the request).";
const DENY_USAGE: &str = "Usage: /deny ID [reason] (the id shown with the request).";

/// What became of a decision.
enum Outcome {
    /// Not an approver, or no such request: the reason, for the person only.
    Refused(String),
    Decided(Box<Decided>),
}

/// A click: answered once (the refusal or "already decided" as the clicker's note, else just
/// acknowledged); the request's message and the run are its resume entry's to settle.
pub(crate) async fn on_click(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
) -> Result<bool, TurnError> {
    let message = &entry.message;
    let Some(click) = &message.click else {
        return Ok(true);
    };
    let note = match parse_value(&click.value) {
        Some((id, Action::Decide(decision))) => {
            match decide(deps, runtime, message, &id, decision, None).await? {
                Outcome::Refused(refusal) => Some(refusal),
                Outcome::Decided(decided) if decided.fresh => None,
                Outcome::Decided(decided) => Some(already_decided(&decided.request)),
            }
        }
        // Not ours (or a resume value no platform sends): only the spinner stops.
        _ => None,
    };
    answer(runtime, key, message, click, note.as_deref()).await;
    Ok(true)
}

/// `/approve ID` and `/deny ID [reason]` typed in a chat: the same decision as a click, the
/// answer a reply (none when the decision is fresh and its request is in this chat: the
/// settled request and the resumed run say it).
pub(crate) async fn on_command(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    command: Command,
) -> Result<bool, TurnError> {
    let (id, decision, reason, usage) = match command {
        Command::Approve(id) => (id, Decision::Approve, None, APPROVE_USAGE),
        Command::Deny { id, reason } => (id, Decision::Deny, reason, DENY_USAGE),
        _ => return Ok(true),
    };
    let id = id.trim().to_string();
    let text = if id.is_empty() || id.contains(char::is_whitespace) {
        Some(usage.to_string())
    } else {
        match decide(deps, runtime, &entry.message, &id, decision, reason).await? {
            Outcome::Refused(refusal) => Some(refusal),
            Outcome::Decided(decided) if decided.fresh => elsewhere(&decided.request, key),
            Outcome::Decided(decided) => Some(already_decided(&decided.request)),
        }
    };
    if let Some(text) = text {
        reply(deps, runtime, key, entry, OutboxStep::Reply, &text).await;
    }
    Ok(true)
}

/// Records the decision of `message`'s sender and hands a decided request on to be resumed
/// (again, harmlessly, when it was decided before: a crash may have come between).
async fn decide(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    message: &InboundMessage,
    id: &str,
    decision: Decision,
    reason: Option<String>,
) -> Result<Outcome, TurnError> {
    let config = deps.config.current();
    let channel_admin = config
        .channels
        .section(&message.channel)
        .is_some_and(|section| section.access().admins.contains(&message.user_id));
    let decider = Decider {
        user_id: deps.sender(message)?,
        // Clicks on Slack and Feishu carry no name: the platform's, as for a group sender.
        name: Some(sender_name(runtime, message).await),
        is_admin: channel_admin,
    };
    let decided = match deps.harness.decide_approval(id, &decider, decision, reason) {
        Ok(decided) => decided,
        Err(refused @ (ApprovalError::NotFound { .. } | ApprovalError::NotAllowed { .. })) => {
            tracing::info!(approval_id = id, user = %decider.user_id, %refused, "Refused a decision on an approval request");
            return Ok(Outcome::Refused(refused.to_string()));
        }
        Err(error) => return Err(error.into()),
    };
    let request = &decided.request;
    if request.status != ApprovalStatus::Pending {
        if request.origin.is_some() {
            if let Some(hook) = deps.harness.chat_resume() {
                hook.resume(request.clone());
            }
        } else if decided.fresh {
            // Parked by a run outside any chat (the HTTP API): it continues there.
            deps.harness.hand_over(request.clone()).await;
        }
    }
    Ok(Outcome::Decided(Box::new(decided)))
}

/// A word for a decision on a request posted in another chat (or none: the run continues).
fn elsewhere(request: &ApprovalRequest, key: &ChatKey) -> Option<String> {
    let here = key.to_string();
    match &request.origin {
        Some(origin) if origin.chat_key == here => None,
        _ => Some(format!(
            "{}. The run continues where it was asked.",
            super::text::decision_line(request)
        )),
    }
}

async fn answer(
    runtime: &ChannelRuntime,
    key: &ChatKey,
    message: &InboundMessage,
    click: &ButtonClick,
    note: Option<&str>,
) {
    let Some(buttons) = &runtime.parts.buttons else {
        return;
    };
    if let Err(error) = buttons
        .answer_click(key, &message.user_id, click, note)
        .await
    {
        tracing::debug!(%error, chat = %key, "Could not answer a click");
    }
}
