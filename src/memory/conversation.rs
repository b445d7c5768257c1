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
    let mut recent: Vec<ConversationMessage> = newest_first(messages, max_messages).collect();
    recent.reverse();
    for message in &mut recent {
        truncate_chars(&mut message.content, max_chars);
    }
    recent
}

/// Whether the newest `max_messages` entries of [`conversation_of`] hold both something the
/// user wrote and an answer. Walks back from the end and stops at the first of each, so a turn
/// looks at its own messages only.
pub fn has_exchange(messages: &[Message], max_messages: usize) -> bool {
    let (mut user, mut answer) = (false, false);
    for message in newest_first(messages, max_messages) {
        user |= message.role == "user";
        answer |= message.role == "assistant";
        if user && answer {
            return true;
        }
    }
    false
}

/// The newest `max_messages` entries of [`conversation_of`], newest first.
fn newest_first(
    messages: &[Message],
    max_messages: usize,
) -> impl Iterator<Item = ConversationMessage> + '_ {
    messages
        .iter()
        .rev()
        .filter_map(conversation_message)
        .take(max_messages)
}

/// Cuts `text` to its first `max_chars` characters. A text of no more bytes than that is left
/// alone without walking it: this runs over every kept message on every turn.
pub fn truncate_chars(text: &mut String, max_chars: usize) {
    if text.len() <= max_chars {
        return;
    }
    if let Some((cut, _)) = text.char_indices().nth(max_chars) {
        text.truncate(cut);
    }
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

#[cfg(test)]
mod tests {
    use super::truncate_chars;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        let mut text = "héllo wörld".to_string();
        truncate_chars(&mut text, 5);
        assert_eq!(text, "héllo");
        let mut short = "é".repeat(4);
        truncate_chars(&mut short, 4);
        assert_eq!(short, "éééé", "four characters in eight bytes fit four");
        let mut ascii = "abc".to_string();
        truncate_chars(&mut ascii, 3);
        assert_eq!(ascii, "abc");
        truncate_chars(&mut ascii, 0);
        assert_eq!(ascii, "");
    }
}
