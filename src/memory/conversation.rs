//! The conversation memory reads: what the user typed and the assistant's final answers, with
//! tool traffic, harness-injected messages and `<current_uploads>` blocks left out.

use serde::{Deserialize, Serialize};

use crate::messages::Message;

/// One message of the conversation the updater reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
}

/// User text with upload blocks removed (`None`: nothing the user wrote).
fn user_text(content: &str) -> Option<String> {
    let mut text = content.to_string();
    while let Some(start) = text.find("<current_uploads>") {
        let end = text[start..]
            .find("</current_uploads>")
            .map(|i| start + i + "</current_uploads>".len())
            .unwrap_or(text.len());
        text.replace_range(start..end, "");
    }
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The user inputs and final answers of `messages`, in order.
pub fn conversation_of(messages: &[Message]) -> Vec<ConversationMessage> {
    messages.iter().filter_map(conversation_message).collect()
}

/// The newest `max_messages` entries of [`conversation_of`], each cut to `max_chars`
/// characters. Walks back from the end, so a turn on a thread of thousands of messages copies
/// only what the memory queue keeps instead of the whole history.
pub fn recent_conversation_of(
    messages: &[Message],
    max_messages: usize,
    max_chars: usize,
) -> Vec<ConversationMessage> {
    let mut recent: Vec<ConversationMessage> = messages
        .iter()
        .rev()
        .filter_map(conversation_message)
        .take(max_messages)
        .collect();
    recent.reverse();
    for message in &mut recent {
        if let Some((cut, _)) = message.content.char_indices().nth(max_chars) {
            message.content.truncate(cut);
        }
    }
    recent
}

fn conversation_message(message: &Message) -> Option<ConversationMessage> {
    match message {
        Message::Human(human) if !human.meta.hide_from_ui && human.name.is_none() => {
            user_text(&human.content).map(|content| ConversationMessage {
                role: "user".into(),
                content,
            })
        }
        Message::Ai(ai) if ai.tool_calls.is_empty() && !ai.content.trim().is_empty() => {
            Some(ConversationMessage {
                role: "assistant".into(),
                content: ai.content.trim().to_string(),
            })
        }
        _ => None,
    }
}
