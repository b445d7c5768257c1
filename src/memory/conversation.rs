//! The conversation memory reads: what one person typed and the assistant's final answers to
//! them, with tool traffic, harness-injected messages, `<current_uploads>` blocks and, in a
//! shared conversation, everybody else's messages left out.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use antler_store::messages::{HumanMessage, Message};

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

/// Whose words memory learns from a thread: one person's own messages and the answers to
/// them. In a thread of one person that is every message. In a shared conversation (a group
/// chat's thread) a message is theirs when they sent it (`meta.extra.sender_id`); one that names
/// no sender (written before the thread was shared, or through the API) is the owner's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Author<'a> {
    pub user_id: &'a str,
    /// The thread's owner.
    pub owner_id: &'a str,
}

impl<'a> Author<'a> {
    /// The owner of a thread of one person.
    pub fn alone(user_id: &'a str) -> Self {
        Self {
            user_id,
            owner_id: user_id,
        }
    }

    fn wrote(&self, human: &HumanMessage) -> bool {
        match human.shared_sender() {
            Some(sender) => sender.user_id == self.user_id,
            None => self.user_id == self.owner_id,
        }
    }
}

/// What `author` typed and the final answers they got, in order.
pub fn conversation_of(messages: &[Message], author: Author<'_>) -> Vec<ConversationMessage> {
    let mut theirs = author.user_id == author.owner_id;
    let mut conversation = Vec::new();
    for message in messages {
        if let Some(human) = genuine_human(message) {
            theirs = author.wrote(human);
        }
        if theirs && let Some(entry) = conversation_message(message) {
            conversation.push(entry);
        }
    }
    conversation
}

/// The newest `max_messages` entries of [`conversation_of`], each cut to `max_chars`
/// characters. Walks back from the end, so a turn on a thread of thousands of messages copies
/// only what the memory queue keeps instead of the whole history.
pub fn recent_conversation_of(
    messages: &[Message],
    author: Author<'_>,
    max_messages: usize,
    max_chars: usize,
) -> Vec<ConversationMessage> {
    let mut recent = Vec::new();
    newest_first(messages, author, max_messages, |entry| {
        recent.push(entry);
        ControlFlow::Continue(())
    });
    recent.reverse();
    for message in &mut recent {
        truncate_chars(&mut message.content, max_chars);
    }
    recent
}

/// Whether the newest `max_messages` entries of [`conversation_of`] hold both something
/// `author` wrote and an answer to them. Walks back from the end and stops at the first of each,
/// so a turn looks at its own messages only.
pub fn has_exchange(messages: &[Message], author: Author<'_>, max_messages: usize) -> bool {
    let (mut user, mut answer) = (false, false);
    newest_first(messages, author, max_messages, |entry| {
        user |= entry.role == "user";
        answer |= entry.role == "assistant";
        if user && answer {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    user && answer
}

/// Hands `visit` the entries of [`conversation_of`] newest first, from the newest
/// `max_messages` entries of the thread's conversation (everybody's). Walking back, an answer is
/// only known to be `author`'s once the human message before it is reached, so answers wait
/// until then and are dropped if someone else asked.
fn newest_first(
    messages: &[Message],
    author: Author<'_>,
    max_messages: usize,
    mut visit: impl FnMut(ConversationMessage) -> ControlFlow<()>,
) {
    let mut waiting: Vec<ConversationMessage> = Vec::new();
    let mut seen = 0;
    for message in messages.iter().rev() {
        if seen >= max_messages {
            break;
        }
        let Some(human) = genuine_human(message) else {
            if let Some(entry) = conversation_message(message) {
                seen += 1;
                waiting.push(entry);
            }
            continue;
        };
        if !author.wrote(human) {
            // Someone else's exchange: it still counts towards the window, which bounds the
            // walk however long the thread.
            seen += 1;
            waiting.clear();
            continue;
        }
        let question = conversation_message(message);
        seen += usize::from(question.is_some());
        for entry in waiting.drain(..).chain(question) {
            if visit(entry).is_break() {
                return;
            }
        }
    }
    // Answers before the thread's first message: the owner's, like unsigned messages.
    if author.user_id == author.owner_id {
        for entry in waiting {
            if visit(entry).is_break() {
                return;
            }
        }
    }
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

/// A human message a person typed (not harness-injected context): it starts a new exchange.
fn genuine_human(message: &Message) -> Option<&HumanMessage> {
    message.as_human().filter(|_| message.is_genuine_human())
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
    use super::*;

    fn from(user: &str, text: &str) -> Message {
        let mut human = HumanMessage {
            id: antler_store::messages::new_id("human").into(),
            content: text.into(),
            ..Default::default()
        };
        human.set_shared_sender(user, user);
        Message::Human(human)
    }

    fn pairs(conversation: &[ConversationMessage]) -> Vec<(&str, &str)> {
        conversation
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_str()))
            .collect()
    }

    /// A group thread owned by ann, begun before it was shared (a message with no sender).
    fn group_thread() -> Vec<Message> {
        vec![
            Message::human("from before"),
            Message::ai("old answer"),
            from("ann", "I like tea"),
            Message::ai("Noted, Ann."),
            from("bob", "my dog is Rex"),
            Message::ai("Hi Rex!"),
            from("ann", "lunch?"),
            Message::ai("Noon."),
        ]
    }

    #[test]
    fn in_a_shared_thread_each_person_has_only_their_own_exchanges() {
        let thread = group_thread();
        let ann = Author {
            user_id: "ann",
            owner_id: "ann",
        };
        let bob = Author {
            user_id: "bob",
            owner_id: "ann",
        };
        let expected_ann = [
            ("user", "from before"),
            ("assistant", "old answer"),
            ("user", "I like tea"),
            ("assistant", "Noted, Ann."),
            ("user", "lunch?"),
            ("assistant", "Noon."),
        ];
        let expected_bob = [("user", "my dog is Rex"), ("assistant", "Hi Rex!")];
        assert_eq!(pairs(&conversation_of(&thread, ann)), expected_ann);
        assert_eq!(pairs(&conversation_of(&thread, bob)), expected_bob);
        assert_eq!(
            pairs(&recent_conversation_of(&thread, ann, 60, 100)),
            expected_ann
        );
        assert_eq!(
            pairs(&recent_conversation_of(&thread, bob, 60, 100)),
            expected_bob
        );
        assert!(has_exchange(&thread, bob, 60));
        assert!(
            !has_exchange(&thread, bob, 2),
            "the newest two entries are ann's"
        );
        let carol = Author {
            user_id: "carol",
            owner_id: "ann",
        };
        assert!(conversation_of(&thread, carol).is_empty());
        assert!(!has_exchange(&thread, carol, 60));
    }

    #[test]
    fn answers_before_anyones_message_are_the_owners() {
        let thread = [
            Message::ai("welcome"),
            from("bob", "hi"),
            Message::ai("hello"),
        ];
        let owner = Author::alone("ann");
        let bob = Author {
            user_id: "bob",
            owner_id: "ann",
        };
        assert_eq!(
            pairs(&recent_conversation_of(&thread, owner, 60, 100)),
            [("assistant", "welcome")]
        );
        assert_eq!(
            pairs(&recent_conversation_of(&thread, bob, 60, 100)),
            [("user", "hi"), ("assistant", "hello")]
        );
    }

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
