//! `DanglingToolCallMiddleware`: repairs the tool-call/tool-result pairing before a model call.
//!
//! Providers reject a history where an AI tool call has no result (a run was cancelled or crashed
//! mid-tool) or a result has no call. The fix is request-only: the stored thread is untouched.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{Middleware, ModelNext};
use crate::messages::{AiMessage, Message, MessageMeta, ToolMessage, ToolStatus};
use crate::model::{ModelError, ModelRequest};
use crate::state::ThreadState;

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
        request.messages = repair_tool_pairing(std::mem::take(&mut request.messages));
        next.call(request).await
    }
}

/// Puts every tool result right after the AI message that called it, answers calls without a
/// result with [`INTERRUPTED_TOOL_RESULT`], and drops results no call asked for.
pub fn repair_tool_pairing(messages: Vec<Message>) -> Vec<Message> {
    let mut synthetic_ids = 0usize;
    let mut messages = messages;
    // Empty call ids cannot be matched; give them stable synthetic ones first.
    for message in &mut messages {
        if let Message::Ai(ai) = message {
            sanitize_calls(ai, &mut synthetic_ids);
        }
    }
    let called: HashSet<String> = messages
        .iter()
        .filter_map(Message::as_ai)
        .flat_map(|ai| ai.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let mut results: HashMap<String, ToolMessage> = HashMap::new();
    let mut others = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::Tool(mut tool) => {
                if called.contains(&tool.tool_call_id) {
                    if tool.name.trim().is_empty() {
                        tool.name = UNKNOWN_TOOL_NAME.to_string();
                    }
                    // A duplicate result for the same call: the first one answered it.
                    results.entry(tool.tool_call_id.clone()).or_insert(tool);
                } else {
                    tracing::debug!(tool_call_id = %tool.tool_call_id, "Dropped a tool result without a matching call");
                }
            }
            other => others.push(other),
        }
    }
    let mut repaired = Vec::with_capacity(others.len() + results.len());
    for message in others {
        let calls = match &message {
            Message::Ai(ai) => ai.tool_calls.clone(),
            _ => Vec::new(),
        };
        repaired.push(message);
        for call in calls {
            match results.remove(&call.id) {
                Some(result) => repaired.push(Message::Tool(result)),
                None => repaired.push(Message::Tool(ToolMessage {
                    id: format!("dangling:{}", call.id),
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: INTERRUPTED_TOOL_RESULT.to_string(),
                    status: ToolStatus::Error,
                    artifact: None,
                    meta: MessageMeta::default(),
                })),
            }
        }
    }
    repaired
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
    use crate::messages::ToolCall;
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
}
