//! Posting a parked run's request: planned in the outbox before the turn's answer is (so a
//! restart finds it in the plan), sent once after that answer, and its message recorded in the
//! request (`ApprovalStore::set_origin`) so the decision can settle it and the run resumes here.

use antler_channel::ChatKey;

use crate::agent_api::approval::{ApprovalRequest, ChatOrigin};
use crate::channels::approvals::text::request_text;
use crate::channels::approvals::{buttons, fits_buttons};
use crate::channels::deps::TurnDeps;
use crate::channels::journal::JournalEntry;
use crate::channels::outbound::send_all;
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;

/// Plans the request's one message (step `approval:{id}`): buttons where the channel has them,
/// else the text says how to answer by command. Stored, not sent.
pub(crate) fn plan_request(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    request: &ApprovalRequest,
) -> Option<OutboxRecord> {
    let message = &entry.message;
    let requester = message
        .display_name
        .clone()
        .unwrap_or_else(|| request.requester.clone());
    let with_buttons = runtime.parts.buttons.is_some() && fits_buttons(&request.id);
    let action = OutboxAction::Buttons {
        text: request_text(request, &requester, !with_buttons),
        buttons: if with_buttons {
            buttons(&request.id)
        } else {
            Vec::new()
        },
        reply_to: Some(message.platform_message_id.clone()),
    };
    let step = OutboxStep::Approval(request.id.clone());
    let record = OutboxRecord::new(
        step.key(&entry.key),
        key.clone(),
        !message.is_direct,
        action,
    );
    match deps.outbox.insert(record) {
        Ok(record) => Some(record),
        Err(error) => {
            tracing::warn!(%error, approval_id = %request.id, "Could not plan an approval request in the outbox");
            None
        }
    }
}

/// Sends a planned request (once) and records where it is.
pub(crate) async fn send_request(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    record: OutboxRecord,
) {
    let Some(OutboxStep::Approval(approval_id)) = record.step() else {
        return;
    };
    let is_group = record.is_group;
    let sent = send_all(deps, runtime, key, is_group, vec![record])
        .await
        .into_iter()
        .flatten()
        .next();
    let origin = ChatOrigin {
        chat_key: key.to_string(),
        message_id: sent,
    };
    if let Err(error) = deps.harness.approvals().set_origin(&approval_id, origin) {
        tracing::warn!(%error, approval_id, chat = %key, "Could not record where an approval request was posted");
    }
}

/// The requests a turn planned before a restart: sent if they were not, and recorded.
pub(crate) async fn send_planned(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    planned: &[OutboxRecord],
) {
    for record in planned {
        if matches!(record.step(), Some(OutboxStep::Approval(_))) {
            send_request(deps, runtime, key, record.clone()).await;
        }
    }
}
