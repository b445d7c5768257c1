//! Webhook deliveries answered in a chat: one synthetic journal entry per delivery,
//! `hook:{endpoint}:{delivery id}` in the chat its `deliver_to` names. No platform sends such
//! ids, and the journal takes an id once, so a delivery is journalled, run and answered once
//! across redeliveries, daemons and restarts; the chat's worker answers it in order with the
//! chat's other messages (`turn::hook`). The id alone proves nothing: the turn runs only a
//! delivery the store holds for this chat.

use antler_channel::{ChatKey, InboundMessage};

use crate::hooks::store::Delivery;

const PREFIX: &str = "hook:";

/// The (endpoint, delivery id) a journalled message is, by its id; `None` for any other.
pub(crate) fn hook_entry_of(message: &InboundMessage) -> Option<(String, String)> {
    if message.click.is_some() || !message.files.is_empty() {
        return None;
    }
    let rest = message.platform_message_id.strip_prefix(PREFIX)?;
    let (endpoint, delivery_id) = rest.split_once(':')?;
    (!endpoint.is_empty() && !delivery_id.is_empty())
        .then(|| (endpoint.to_string(), delivery_id.to_string()))
}

/// The chat of a delivery with a chat, and its entry there.
pub(crate) fn entry(delivery: &Delivery) -> Option<(ChatKey, InboundMessage)> {
    let target = delivery.chat.as_ref()?;
    let key = ChatKey::new(
        target.channel.clone(),
        target.chat.clone(),
        target.thread.clone(),
    );
    let message = InboundMessage {
        channel: key.channel.clone(),
        workspace_id: None,
        chat_id: key.chat_id.clone(),
        topic_id: key.topic_id.clone(),
        user_id: format!("webhook-{}", delivery.endpoint),
        display_name: Some(delivery.endpoint.clone()),
        platform_message_id: format!("{PREFIX}{}:{}", delivery.endpoint, delivery.delivery_id),
        text: delivery.prompt.clone(),
        files: Vec::new(),
        // Answered as in a group: nobody's direct chat, no reply to a message.
        is_direct: false,
        mentions_bot: true,
        reply_to: None,
        thread_reply: false,
        is_bot: false,
        bot_id: None,
        context: Vec::new(),
        click: None,
    };
    Some((key, message))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::hooks::store::{ChatTarget, DeliveryStatus};

    #[test]
    fn an_entry_names_its_delivery() {
        let delivery = Delivery {
            endpoint: "alerts".into(),
            delivery_id: "d:1".into(),
            run_id: "r".into(),
            thread_id: "t".into(),
            user: "alice".into(),
            agent: None,
            prompt: "look".into(),
            chat: Some(ChatTarget {
                channel: "slack".into(),
                chat: "C1".into(),
                thread: Some("17.1".into()),
            }),
            status: DeliveryStatus::Received,
            received_at: Utc::now(),
            detail: None,
        };
        let (key, message) = entry(&delivery).unwrap();
        assert_eq!(key, ChatKey::new("slack", "C1", Some("17.1".into())));
        assert_eq!(message.platform_message_id, "hook:alerts:d:1");
        assert_eq!(
            hook_entry_of(&message),
            Some(("alerts".into(), "d:1".into()))
        );
        for id in ["hook:", "hook:alerts", "hook::x", "schedule:x", "1234"] {
            let mut other = message.clone();
            other.platform_message_id = id.into();
            assert_eq!(hook_entry_of(&other), None, "{id}");
        }
        let mut thread_only = delivery;
        thread_only.chat = None;
        assert!(entry(&thread_only).is_none());
    }
}
