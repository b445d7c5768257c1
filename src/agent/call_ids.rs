//! Tool-call ids unique within a thread, whatever the provider sent.
//!
//! Some OpenAI-compatible servers number tool calls per response (`call_0`, `call_1`, …), so the
//! same id comes back in every turn. Results are paired with calls by id (providers require it,
//! and so do the surfaces that match `tool_started` with `tool_finished`), so a reused id is
//! replaced by a fresh one when the AI message is recorded. Every later request carries the new
//! id in both the assistant's call and the tool's result, which keeps the provider's own pairing
//! rule satisfied: it only ever checks that the two match.

use std::collections::HashSet;

use antler_store::messages::{AiMessage, Message};

/// Replaces every call id of `ai` that is empty, already used in `history`, or repeated inside
/// `ai` itself. Returns how many ids were replaced.
pub(crate) fn make_call_ids_unique(ai: &mut AiMessage, history: &[Message]) -> usize {
    if ai.tool_calls.is_empty() {
        return 0;
    }
    let mut used: HashSet<String> = history
        .iter()
        .flat_map(|message| match message {
            Message::Ai(earlier) => earlier.tool_calls.iter().map(|c| c.id.clone()).collect(),
            Message::Tool(tool) => vec![tool.tool_call_id.clone()],
            _ => Vec::new(),
        })
        .collect();
    let mut replaced = 0;
    for call in &mut ai.tool_calls {
        if !call.id.trim().is_empty() && used.insert(call.id.clone()) {
            continue;
        }
        let fresh = loop {
            let candidate = fresh_id(&call.id);
            if used.insert(candidate.clone()) {
                break candidate;
            }
        };
        tracing::debug!(reused = %call.id, fresh = %fresh, tool = %call.name, "Gave a reused tool-call id a unique one");
        call.id = fresh;
        replaced += 1;
    }
    replaced
}

/// `{original}_{random}`, limited to the characters every provider accepts in an id
/// (Anthropic: `^[a-zA-Z0-9_-]+$`).
fn fresh_id(original: &str) -> String {
    let prefix: String = original
        .chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let prefix = if prefix.is_empty() { "call" } else { &prefix };
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}_{}", &random[..12])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use antler_store::messages::{ToolCall, ToolMessage};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "ls".into(),
            args: json!({}),
            args_error: None,
        }
    }

    fn ai(ids: &[&str]) -> AiMessage {
        AiMessage {
            id: "ai".into(),
            tool_calls: ids.iter().map(|id| call(id)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn ids_reused_across_turns_or_within_a_message_are_replaced() {
        let history = vec![
            Message::human("hi"),
            Message::Ai(ai(&["call_0"])),
            Message::Tool(ToolMessage::success(&call("call_0"), "ok")),
        ];
        let mut next = ai(&["call_0", "call_1", "call_1", ""]);
        assert_eq!(make_call_ids_unique(&mut next, &history), 3);
        let ids: Vec<&str> = next.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert!(ids[0].starts_with("call_0_") && ids[0].len() == "call_0_".len() + 12);
        assert_eq!(ids[1], "call_1", "a first use keeps its id");
        assert!(ids[2].starts_with("call_1_"));
        assert!(ids[3].starts_with("call_"));
        let unique: HashSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), 4);
    }

    #[test]
    fn unique_ids_are_kept_and_odd_characters_are_not_copied() {
        let mut fresh = ai(&["toolu_a", "toolu_b"]);
        assert_eq!(make_call_ids_unique(&mut fresh, &[]), 0);
        assert_eq!(fresh.tool_calls[0].id, "toolu_a");
        let id = fresh_id("call:0/x");
        assert!(id.starts_with("call_0_x_"), "{id}");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }
}
