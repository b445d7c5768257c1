//! `SafetyFinishReasonMiddleware`: a provider safety stop never runs half-formed tool calls.
//!
//! When the provider filtered or refused the answer (`content_filter`, `refusal`), any tool calls
//! in it are cut off mid-thought; they are stripped, an empty answer gets an explanation for the
//! user, and the event is recorded in `meta.extra["safety_termination"]`.

use async_trait::async_trait;
use serde_json::json;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use crate::middleware::support::replace_ai;
use antler_store::state::ThreadState;

pub const SAFETY_EXPLANATION: &str = "The model provider stopped this response for safety reasons. Please rephrase your request and try again.";
/// Key in the AI message's `meta.extra`.
pub const SAFETY_TERMINATION_KEY: &str = "safety_termination";

#[derive(Debug, Default)]
pub struct SafetyFinishReasonMiddleware;

impl SafetyFinishReasonMiddleware {
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Middleware for SafetyFinishReasonMiddleware {
    fn name(&self) -> &str {
        "SafetyFinishReasonMiddleware"
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
        let Some(reason) = ai.finish_reason.as_ref().filter(|r| r.is_safety()) else {
            return Ok(HookResult::proceed());
        };
        if ai.meta.extra.contains_key(SAFETY_TERMINATION_KEY) {
            return Ok(HookResult::proceed());
        }
        let mut safe = ai.clone();
        let stripped = safe.tool_calls.len();
        safe.tool_calls.clear();
        let backfilled = safe.content.trim().is_empty();
        if backfilled {
            safe.content = SAFETY_EXPLANATION.into();
        }
        let reason = serde_json::to_value(reason).unwrap_or_default();
        tracing::info!(thread_id = %ctx.thread_id, %reason, stripped, backfilled, "Provider stopped the answer for safety reasons");
        safe.meta.extra.insert(
            SAFETY_TERMINATION_KEY.to_string(),
            json!({
                "finish_reason": reason,
                "stripped_tool_calls": stripped,
                "backfilled": backfilled,
            }),
        );
        Ok(HookResult::update(replace_ai(safe)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::AppConfig;
    use antler_store::messages::{AiMessage, FinishReason, Message, ToolCall};

    async fn check(finish_reason: FinishReason, content: &str) -> (ThreadState, AiMessage) {
        let ai = AiMessage {
            id: "ai-1".into(),
            content: content.into(),
            finish_reason: Some(finish_reason),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "bash".into(),
                args: json!({}),
                args_error: None,
            }],
            ..Default::default()
        };
        let mut state = ThreadState {
            messages: vec![Message::Ai(ai)].into(),
            ..Default::default()
        };
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let result = SafetyFinishReasonMiddleware
            .after_model(&state, &ctx)
            .await
            .unwrap();
        state.apply(result.update).unwrap();
        let ai = state.last_ai().unwrap().clone();
        (state, ai)
    }

    #[tokio::test]
    async fn strips_tool_calls_and_backfills_empty_content() {
        let (state, ai) = check(FinishReason::ContentFilter, " ").await;
        assert_eq!(state.messages.len(), 1, "replaced in place");
        assert!(ai.tool_calls.is_empty());
        assert_eq!(ai.content, SAFETY_EXPLANATION);
        assert_eq!(
            ai.meta.extra[SAFETY_TERMINATION_KEY]["finish_reason"],
            "content_filter"
        );
        assert_eq!(
            ai.meta.extra[SAFETY_TERMINATION_KEY]["stripped_tool_calls"],
            1
        );
    }

    #[tokio::test]
    async fn keeps_existing_text_and_ignores_normal_stops() {
        let (_, ai) = check(FinishReason::Refusal, "I can't help with that.").await;
        assert_eq!(ai.content, "I can't help with that.");
        assert!(ai.tool_calls.is_empty());
        let (_, ai) = check(FinishReason::Stop, "").await;
        assert_eq!(ai.tool_calls.len(), 1);
    }
}
