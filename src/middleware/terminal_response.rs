//! `TerminalResponseMiddleware`: a turn that used tools must end with something to show.
//!
//! Some models stop with an empty message after tool calls. The model gets one more chance (the
//! empty message removed, a hidden recovery note added); if it is empty again, the user gets a
//! clear message instead of silence.

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use crate::middleware::support::{hidden_human, replace_ai, turn_used_tools};
use antler_store::messages::Message;
use antler_store::state::{StateUpdate, ThreadState};

/// `name` of the hidden recovery note; its presence in the turn means the retry was spent.
pub const RECOVERY_NOTE_NAME: &str = "terminal_response_recovery";
pub const RECOVERY_PROMPT: &str = "You finished the tool calls but returned an empty answer. Using the tool results above, write your final response to the user now.";
pub const NO_FINAL_RESPONSE: &str = "The model completed the tool run but returned no final response, including after one automatic retry. Please try again or use a different model.";

#[derive(Debug, Default)]
pub struct TerminalResponseMiddleware;

impl TerminalResponseMiddleware {
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Middleware for TerminalResponseMiddleware {
    fn name(&self) -> &str {
        "TerminalResponseMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(ai) = state.last_ai() else {
            return Ok(HookResult::proceed());
        };
        if !ai.tool_calls.is_empty()
            || !ai.content.trim().is_empty()
            || !turn_used_tools(&state.messages)
        {
            return Ok(HookResult::proceed());
        }
        let turn_start = state.current_turn_start().unwrap_or(0);
        let retried = state.messages[turn_start..].iter().any(
            |m| matches!(m, Message::Human(h) if h.name.as_deref() == Some(RECOVERY_NOTE_NAME)),
        );
        if retried {
            tracing::warn!(thread_id = %ctx.thread_id, "Model returned no final answer after the retry");
            let mut final_answer = ai.clone();
            final_answer.content = NO_FINAL_RESPONSE.into();
            return Ok(HookResult::update(replace_ai(final_answer)));
        }
        tracing::info!(thread_id = %ctx.thread_id, "Empty final answer after tool calls: asking the model again");
        Ok(HookResult::retry_model(StateUpdate {
            remove_messages: vec![ai.id.to_string()],
            messages: vec![Message::Human(hidden_human(
                RECOVERY_NOTE_NAME,
                RECOVERY_PROMPT,
            ))],
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::agent_api::Flow;
    use crate::config::AppConfig;
    use antler_store::messages::{AiMessage, ToolCall, ToolMessage};
    use serde_json::json;

    fn turn_with_tools() -> ThreadState {
        let call = ToolCall {
            id: "c".into(),
            name: "ls".into(),
            args: json!({}),
            args_error: None,
        };
        ThreadState {
            messages: vec![
                Message::human("list files"),
                Message::Ai(AiMessage {
                    id: "ai-0".into(),
                    tool_calls: vec![call.clone()],
                    ..Default::default()
                }),
                Message::Tool(ToolMessage::success(&call, "a.txt")),
            ]
            .into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn retries_once_then_explains() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = turn_with_tools();
        state.messages.push(Message::ai(""));
        let first = TerminalResponseMiddleware
            .after_model(&state, &ctx)
            .await
            .unwrap();
        assert_eq!(first.flow, Flow::RetryModel);
        state.apply(first.update).unwrap();
        assert!(state.last_ai().is_none(), "the empty answer was removed");
        state.messages.push(Message::ai("  "));
        let second = TerminalResponseMiddleware
            .after_model(&state, &ctx)
            .await
            .unwrap();
        assert_eq!(second.flow, Flow::Continue);
        state.apply(second.update).unwrap();
        assert_eq!(state.last_ai().unwrap().content, NO_FINAL_RESPONSE);
    }

    #[tokio::test]
    async fn ignores_answers_and_tool_free_turns() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut answered = turn_with_tools();
        answered.messages.push(Message::ai("a.txt"));
        let result = TerminalResponseMiddleware
            .after_model(&answered, &ctx)
            .await
            .unwrap();
        assert_eq!(result, HookResult::proceed());
        let chat = ThreadState {
            messages: vec![Message::human("hi"), Message::ai("")].into(),
            ..Default::default()
        };
        let result = TerminalResponseMiddleware
            .after_model(&chat, &ctx)
            .await
            .unwrap();
        assert_eq!(result, HookResult::proceed());
    }
}
