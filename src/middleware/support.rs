//! Small helpers the built-in middlewares share (hidden notes, AI-message rewrites).

use antler_store::messages::{AiMessage, FinishReason, HumanMessage, Message, MessageMeta, new_id};
use antler_store::state::StateUpdate;

/// A harness-authored human message: hidden from chat surfaces and tagged with `name`, so it is
/// never mistaken for something a person typed.
pub(crate) fn hidden_human(
    name: &str,
    content: impl Into<antler_store::messages::Text>,
) -> HumanMessage {
    HumanMessage {
        id: new_id("human").into(),
        content: content.into(),
        name: Some(name.to_string()),
        images: Vec::new(),
        meta: MessageMeta {
            hide_from_ui: true,
            ..Default::default()
        },
    }
}

/// An update replacing an AI message in place (same id ⇒ the reducer upserts it).
pub(crate) fn replace_ai(ai: AiMessage) -> StateUpdate {
    StateUpdate::message(Message::Ai(ai))
}

/// A copy of `ai` that ends the turn: no tool calls, finish reason `stop`, `suffix` appended.
pub(crate) fn forced_final(ai: &AiMessage, suffix: &str) -> AiMessage {
    let mut copy = ai.clone();
    copy.tool_calls.clear();
    copy.finish_reason = Some(FinishReason::Stop);
    copy.content.push_str(suffix);
    copy
}

/// Whether the current turn (since the last genuine human message) ran any tool.
pub(crate) fn turn_used_tools(messages: &[Message]) -> bool {
    let start = messages
        .iter()
        .rposition(Message::is_genuine_human)
        .unwrap_or(0);
    messages[start..]
        .iter()
        .any(|m| matches!(m, Message::Tool(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_notes_are_not_genuine_human_messages() {
        let note = Message::Human(hidden_human("loop_warning", "x"));
        assert!(!note.is_genuine_human());
        assert!(note.is_hidden());
    }
}
