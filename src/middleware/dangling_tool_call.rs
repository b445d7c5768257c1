//! `DanglingToolCallMiddleware`: repairs the shape of the history before a model call.
//!
//! Providers reject a history where an AI tool call has no result (a run was cancelled or crashed
//! mid-tool), a result has no call, or (Anthropic) two calls share an id; strict chat templates
//! (llama.cpp, vLLM) reject two user messages in a row, which a cancelled or crashed turn, or
//! hidden context next to the person's message, would otherwise leave. Results are paired with
//! the calls of the AI message they follow, never across turns, because some servers reuse ids
//! (`call_0` in every response). The fix is request-only: the stored thread is untouched.

use std::collections::HashSet;

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{Middleware, ModelNext};
use crate::model::{ModelError, ModelRequest};
use antler_store::messages::{
    AiMessage, HumanMessage, Message, MessageMeta, ToolMessage, ToolStatus,
};
use antler_store::state::ThreadState;

/// Content of the synthetic result answering a call that never returned.
pub const INTERRUPTED_TOOL_RESULT: &str =
    "[Tool call was interrupted and did not return a result.]";
/// Name given to calls and results whose tool name is empty.
pub const UNKNOWN_TOOL_NAME: &str = "unknown_tool";

#[derive(Debug, Default)]
pub struct DanglingToolCallMiddleware;

impl DanglingToolCallMiddleware {
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Middleware for DanglingToolCallMiddleware {
    fn name(&self) -> &str {
        "DanglingToolCallMiddleware"
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        // Checked on the shared history first: taking it out to rebuild would copy it.
        if !is_well_paired(&request.messages) || has_adjacent_humans(&request.messages) {
            let messages = repair_tool_pairing(std::mem::take(&mut request.messages).into_vec());
            request.messages = merge_adjacent_human_messages(messages).into();
        }
        next.call(request).await
    }
}

/// Puts the results of each AI message's calls right after it, in call order.
///
/// A result answers a call of the nearest AI message before it (results never pair across a
/// later AI message); a call without a result gets [`INTERRUPTED_TOOL_RESULT`], results no call
/// of that message asked for are dropped, and other messages between an AI message and its
/// results move behind the results. An id an earlier AI message already used is renamed in
/// both the call and its result (`{id}_2`, …), so every id in the request is unique.
pub fn repair_tool_pairing(messages: Vec<Message>) -> Vec<Message> {
    // Nearly every request is well-formed already: checking is a scan, rebuilding moves the
    // whole history.
    if is_well_paired(&messages) {
        return messages;
    }
    rebuild_pairing(messages)
}

fn rebuild_pairing(messages: Vec<Message>) -> Vec<Message> {
    let mut synthetic_ids = 0usize;
    let mut all_ids: HashSet<String> = messages
        .iter()
        .filter_map(Message::as_ai)
        .flat_map(|ai| ai.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut repaired = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();
    while let Some(message) = rest.next() {
        let mut ai = match message {
            Message::Ai(ai) => ai,
            Message::Tool(orphan) => {
                tracing::debug!(tool_call_id = %orphan.tool_call_id, "Dropped a tool result that follows no tool call");
                continue;
            }
            other => {
                repaired.push(other);
                continue;
            }
        };
        // Empty call ids cannot be matched; give them stable synthetic ones first.
        sanitize_calls(&mut ai, &mut synthetic_ids);
        let mut results = Vec::new();
        let mut between = Vec::new();
        while let Some(next) = rest.next_if(|m| !matches!(m, Message::Ai(_))) {
            match next {
                Message::Tool(tool) => results.push(tool),
                other => between.push(other),
            }
        }
        let mut paired = Vec::with_capacity(ai.tool_calls.len());
        for call in &mut ai.tool_calls {
            // The first result for a call answers it; a duplicate is dropped below.
            let result = results
                .iter()
                .position(|r| r.tool_call_id == call.id)
                .map(|at| results.remove(at));
            if !seen.insert(call.id.clone()) {
                let renamed = unused_id(&call.id, &all_ids);
                all_ids.insert(renamed.clone());
                seen.insert(renamed.clone());
                call.id = renamed;
            }
            let mut result = result.unwrap_or_else(|| ToolMessage {
                id: format!("dangling:{}", call.id).into(),
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                content: INTERRUPTED_TOOL_RESULT.into(),
                status: ToolStatus::Error,
                artifact: None,
                meta: MessageMeta::default(),
            });
            result.tool_call_id = call.id.clone();
            if result.name.trim().is_empty() {
                result.name = UNKNOWN_TOOL_NAME.to_string();
            }
            paired.push(Message::Tool(result));
        }
        for unmatched in results {
            tracing::debug!(tool_call_id = %unmatched.tool_call_id, "Dropped a tool result without a matching call");
        }
        repaired.push(Message::Ai(ai));
        repaired.extend(paired);
        repaired.extend(between);
    }
    repaired
}

/// Whether [`repair_tool_pairing`] would return `messages` unchanged: every call has a
/// non-blank name and id used by no other call, and its AI message is followed by exactly one
/// result per call, in call order, each with a non-blank name, before any other message; no
/// result is anywhere else.
fn is_well_paired(messages: &[Message]) -> bool {
    let mut call_ids: HashSet<&str> = HashSet::new();
    let mut index = 0;
    while let Some(message) = messages.get(index) {
        index += 1;
        let ai = match message {
            Message::Ai(ai) => ai,
            Message::Tool(_) => return false,
            _ => continue,
        };
        for call in &ai.tool_calls {
            let well_formed = !call.name.trim().is_empty() && !call.id.trim().is_empty();
            if !well_formed || !call_ids.insert(&call.id) {
                return false;
            }
            match messages.get(index) {
                Some(Message::Tool(result))
                    if result.tool_call_id == call.id && !result.name.trim().is_empty() =>
                {
                    index += 1;
                }
                _ => return false,
            }
        }
        // Anything up to the next AI message must not be a result.
        let next_ai = messages[index..]
            .iter()
            .position(|m| matches!(m, Message::Ai(_)))
            .map_or(messages.len(), |offset| index + offset);
        if messages[index..next_ai]
            .iter()
            .any(|m| matches!(m, Message::Tool(_)))
        {
            return false;
        }
        index = next_ai;
    }
    true
}

/// Joins human messages that would reach the model back to back (system messages between them
/// do not count: they are moved to the system prompt). Strict chat templates require user and
/// assistant turns to alternate; joining keeps every word the model should read.
pub fn merge_adjacent_human_messages(messages: Vec<Message>) -> Vec<Message> {
    if !has_adjacent_humans(&messages) {
        return messages;
    }
    let mut merged: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages {
        let Message::Human(human) = message else {
            merged.push(message);
            continue;
        };
        let previous = merged
            .iter_mut()
            .rev()
            .find(|m| !matches!(m, Message::System(_)));
        match previous {
            Some(Message::Human(earlier)) => join_human(earlier, human),
            _ => merged.push(Message::Human(human)),
        }
    }
    merged
}

fn has_adjacent_humans(messages: &[Message]) -> bool {
    let mut previous_was_human = false;
    for message in messages {
        match message {
            Message::System(_) => {}
            Message::Human(_) if previous_was_human => return true,
            Message::Human(_) => previous_was_human = true,
            _ => previous_was_human = false,
        }
    }
    false
}

fn join_human(earlier: &mut HumanMessage, later: HumanMessage) {
    match (
        earlier.content.trim().is_empty(),
        later.content.trim().is_empty(),
    ) {
        (_, true) => {}
        (true, false) => earlier.content = later.content,
        (false, false) => {
            earlier.content = format!("{}\n\n{}", earlier.content, later.content).into();
        }
    }
    earlier.images.extend(later.images);
    // A person's words are in it now: it is no longer only injected context.
    if later.name.is_none() {
        earlier.name = None;
    }
    earlier.meta.hide_from_ui &= later.meta.hide_from_ui;
}

/// `{id}_2`, `{id}_3`, … whichever is not used yet (deterministic, so the request's prefix stays
/// the same from one call to the next).
fn unused_id(id: &str, used: &HashSet<String>) -> String {
    (2..)
        .map(|n| format!("{id}_{n}"))
        .find(|candidate| !used.contains(candidate))
        .unwrap_or_else(|| antler_store::messages::new_id("call"))
}

fn sanitize_calls(ai: &mut AiMessage, synthetic_ids: &mut usize) {
    for call in &mut ai.tool_calls {
        if call.name.trim().is_empty() {
            call.name = UNKNOWN_TOOL_NAME.to_string();
        }
        if call.id.trim().is_empty() {
            *synthetic_ids += 1;
            call.id = format!("antler_synthetic_tool_call_{synthetic_ids}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::messages::ToolCall;
    use serde_json::json;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            args: json!({}),
            args_error: None,
        }
    }

    fn ai_calling(calls: Vec<ToolCall>) -> Message {
        Message::Ai(AiMessage {
            id: "ai-1".into(),
            tool_calls: calls,
            ..Default::default()
        })
    }

    fn result(call_id: &str) -> Message {
        Message::Tool(ToolMessage::success(&call(call_id, "ls"), "ok"))
    }

    #[test]
    fn the_well_paired_check_agrees_with_the_rebuild() {
        let well = vec![
            Message::system("reminder"),
            Message::human("hi"),
            ai_calling(vec![call("a", "ls"), call("b", "ls")]),
            result("a"),
            result("b"),
            Message::human("hidden context"),
            Message::ai("done"),
            ai_calling(vec![call("c", "ls")]),
            result("c"),
        ];
        let cases = [
            well.clone(),
            Vec::new(),
            vec![Message::human("hi"), Message::ai("hello")],
            // Results out of order, missing, duplicated, orphaned, or after other messages.
            vec![
                ai_calling(vec![call("a", "ls"), call("b", "ls")]),
                result("b"),
                result("a"),
            ],
            vec![ai_calling(vec![call("a", "ls")])],
            vec![ai_calling(vec![call("a", "ls")]), result("a"), result("a")],
            vec![result("a"), Message::human("hi")],
            vec![
                ai_calling(vec![call("a", "ls")]),
                Message::human("x"),
                result("a"),
            ],
            vec![
                ai_calling(vec![call("a", "ls")]),
                result("a"),
                Message::human("x"),
                result("a"),
            ],
            // Blank names or ids, and an id used twice.
            vec![ai_calling(vec![call("a", " ")]), result("a")],
            vec![ai_calling(vec![call("", "ls")]), result("")],
            vec![
                ai_calling(vec![call("a", "ls")]),
                result("a"),
                ai_calling(vec![call("a", "ls")]),
                result("a"),
            ],
        ];
        for (index, case) in cases.into_iter().enumerate() {
            let unchanged = rebuild_pairing(case.clone()) == case;
            assert_eq!(is_well_paired(&case), unchanged, "case {index}");
            assert_eq!(
                repair_tool_pairing(case.clone()),
                rebuild_pairing(case),
                "case {index}"
            );
        }
        assert!(is_well_paired(&well));
    }

    #[test]
    fn regroups_results_and_sanitizes_names() {
        let messages = vec![
            Message::human("hi"),
            ai_calling(vec![call("a", ""), call("b", "ls")]),
            Message::human("interjection"),
            result("b"),
            result("a"),
        ];
        let repaired = repair_tool_pairing(messages);
        let kinds: Vec<String> = repaired
            .iter()
            .map(|m| match m {
                Message::Tool(t) => format!("tool:{}", t.tool_call_id),
                other => other.content().to_string(),
            })
            .collect();
        assert_eq!(kinds, ["hi", "", "tool:a", "tool:b", "interjection"]);
        assert_eq!(
            repaired[1].as_ai().unwrap().tool_calls[0].name,
            UNKNOWN_TOOL_NAME
        );
    }

    #[test]
    fn duplicate_results_keep_the_first() {
        let mut second = ToolMessage::success(&call("a", "ls"), "second");
        second.id = "other".into();
        let repaired = repair_tool_pairing(vec![
            ai_calling(vec![call("a", "ls")]),
            result("a"),
            Message::Tool(second),
        ]);
        assert_eq!(repaired.len(), 2);
        assert_eq!(repaired[1].content(), "ok");
    }

    #[test]
    fn empty_call_ids_get_synthetic_ids() {
        let repaired = repair_tool_pairing(vec![ai_calling(vec![call("", "ls")])]);
        let id = &repaired[0].as_ai().unwrap().tool_calls[0].id;
        assert_eq!(id, "antler_synthetic_tool_call_1");
        assert_eq!(repaired[1].as_tool().unwrap().tool_call_id, *id);
    }

    fn answered(call_id: &str, content: &str) -> Message {
        Message::Tool(ToolMessage::success(&call(call_id, "ls"), content))
    }

    #[test]
    fn an_id_reused_in_a_later_turn_pairs_with_its_own_turn_and_is_renamed() {
        let mut second_ai = ai_calling(vec![call("call_0", "ls")]);
        second_ai.set_id("ai-2".into());
        let repaired = repair_tool_pairing(vec![
            Message::human("first"),
            ai_calling(vec![call("call_0", "ls")]),
            answered("call_0", "first result"),
            Message::ai("done"),
            Message::human("second"),
            second_ai,
            answered("call_0", "second result"),
        ]);
        let contents: Vec<&str> = repaired.iter().map(Message::content).collect();
        assert_eq!(
            contents,
            [
                "first",
                "",
                "first result",
                "done",
                "second",
                "",
                "second result"
            ]
        );
        assert_eq!(repaired[2].as_tool().unwrap().tool_call_id, "call_0");
        assert_eq!(repaired[5].as_ai().unwrap().tool_calls[0].id, "call_0_2");
        assert_eq!(repaired[6].as_tool().unwrap().tool_call_id, "call_0_2");
    }

    #[test]
    fn results_never_pair_across_a_later_ai_message() {
        let repaired = repair_tool_pairing(vec![
            result("x"),
            ai_calling(vec![call("a", "ls")]),
            Message::ai("interrupted turn"),
            result("a"),
        ]);
        let contents: Vec<&str> = repaired.iter().map(Message::content).collect();
        assert_eq!(contents, ["", INTERRUPTED_TOOL_RESULT, "interrupted turn"]);
    }

    #[test]
    fn adjacent_human_messages_are_joined() {
        let mut note = crate::middleware::support::hidden_human("memory", "<memory>m</memory>");
        note.id = "note".into();
        let merged = merge_adjacent_human_messages(vec![
            Message::Human(note),
            Message::system("reminder"),
            Message::human("unanswered question"),
            Message::human("asked again"),
            Message::ai("answer"),
            Message::human("next"),
        ]);
        let contents: Vec<&str> = merged.iter().map(Message::content).collect();
        assert_eq!(
            contents,
            [
                "<memory>m</memory>\n\nunanswered question\n\nasked again",
                "reminder",
                "answer",
                "next"
            ]
        );
        let joined = merged[0].as_human().unwrap();
        assert!(joined.name.is_none() && !joined.meta.hide_from_ui);
    }
}
