//! The resume entry: one synthetic journal entry per decided request, `approval:{id}` in the
//! request's chat, recorded by whoever learns of the decision (a click or command in the chat,
//! or [`ChatResumeHook`] for the HTTP API and the timeout). The journal takes an id once, so
//! the entry, and with it the settled buttons and the resumed run, happens once across
//! redeliveries, daemons and restarts; the chat's worker answers it like any message. The
//! hook that journals it lives in `channels::resume_hook` (it needs the manager).

use antler_channel::{ButtonClick, ChatKey, InboundMessage};

use crate::agent_api::approval::{ApprovalRequest, ApprovalStatus};
use crate::channels::approvals::{Action, parse_value, value};
use crate::channels::deps::TurnDeps;
use crate::channels::mapping::{ChatMap, parse_chat_key};
use antler_store::StoreError;

const ENTRY_PREFIX: &str = "approval:";

/// The resume entry's platform message id (its dedupe key within the chat).
fn entry_id(approval_id: &str) -> String {
    format!("{ENTRY_PREFIX}{approval_id}")
}

/// The request a journalled message resumes, if it is a resume entry. Only the daemon writes
/// these: a click carrying a resume value (platforms let clients forge button data) has a
/// platform id of its own, so it is not one.
pub(crate) fn resume_of(message: &InboundMessage) -> Option<String> {
    let click = message.click.as_ref()?;
    match parse_value(&click.value)? {
        (id, Action::Resume) if message.platform_message_id == entry_id(&id) => Some(id),
        _ => None,
    }
}

/// The resume entry of a decided request: its chat and the synthetic message to journal there
/// (`None` without a chat origin). `shared`: whether that chat's conversation is a group's.
pub(crate) fn resume_entry(
    request: &ApprovalRequest,
    chats: &ChatMap,
) -> Result<Option<(ChatKey, InboundMessage)>, StoreError> {
    let Some(origin) = &request.origin else {
        return Ok(None);
    };
    let Some(key) = parse_chat_key(&origin.chat_key) else {
        tracing::warn!(approval_id = %request.id, chat = %origin.chat_key, "An approval request names a chat that is not one");
        return Ok(None);
    };
    let shared = chats.get(&key)?.is_some_and(|record| record.shared);
    let message = InboundMessage {
        channel: key.channel.clone(),
        workspace_id: None,
        chat_id: key.chat_id.clone(),
        topic_id: key.topic_id.clone(),
        user_id: String::new(),
        display_name: None,
        platform_message_id: entry_id(&request.id),
        text: String::new(),
        files: Vec::new(),
        is_direct: !shared,
        mentions_bot: true,
        reply_to: origin.message_id.clone(),
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: Some(ButtonClick {
            value: value(&request.id, 'r'),
            message_id: origin.message_id.clone().unwrap_or_default(),
            answer_handle: String::new(),
        }),
    };
    Ok(Some((key, message)))
}

/// The requests of `thread_id` still waiting with a message in a chat: a new message's run
/// supersedes them (see [`settle_overtaken`]).
pub(crate) fn waiting_in(deps: &TurnDeps, thread_id: &str) -> Vec<String> {
    match deps.harness.approvals().list_thread(thread_id) {
        Ok(requests) => requests
            .into_iter()
            .filter(|r| r.status == ApprovalStatus::Pending && r.origin.is_some())
            .map(|r| r.id)
            .collect(),
        Err(error) => {
            tracing::warn!(%error, thread_id, "Could not read the thread's approval requests");
            Vec::new()
        }
    }
}

/// Settles the buttons of requests that a new message overtook while they waited (their
/// resume entry only settles: the new message's run went on without the call).
pub(crate) fn settle_overtaken(deps: &TurnDeps, waiting: &[String]) {
    let Some(hook) = deps.harness.chat_resume() else {
        return;
    };
    for id in waiting {
        match deps.harness.approvals().get(id) {
            Ok(Some(request)) if request.status != ApprovalStatus::Pending => hook.resume(request),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, approval_id = %id, "Could not read an approval request")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_daemons_own_entry_resumes() {
        let click = |platform_id: &str, value: &str| InboundMessage {
            channel: "telegram".into(),
            workspace_id: None,
            chat_id: "42".into(),
            topic_id: None,
            user_id: "42".into(),
            display_name: None,
            platform_message_id: platform_id.into(),
            text: String::new(),
            files: Vec::new(),
            is_direct: true,
            mentions_bot: false,
            reply_to: None,
            thread_reply: false,
            is_bot: false,
            bot_id: None,
            context: Vec::new(),
            click: Some(ButtonClick {
                value: value.into(),
                message_id: "31".into(),
                answer_handle: String::new(),
            }),
        };
        assert_eq!(
            resume_of(&click("approval:k3", "ap:k3:r")),
            Some("k3".into())
        );
        assert_eq!(resume_of(&click("4382001", "ap:k3:r")), None, "forged");
        assert_eq!(resume_of(&click("approval:k3", "ap:k3:a")), None);
        assert_eq!(resume_of(&click("approval:k4", "ap:k3:r")), None);
    }
}
