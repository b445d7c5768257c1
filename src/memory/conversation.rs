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
    messages
        .iter()
        .filter_map(|message| match message {
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
        })
        .collect()
}
