//! `ModelLengthFinishReasonMiddleware`: an answer cut by the output limit says so.
//!
//! When the provider stopped because the answer reached `max_tokens` (OpenAI `finish_reason:
//! length`, Anthropic `stop_reason: max_tokens`), the final answer would otherwise reach the
//! person looking complete. A short note is appended to it, streamed as one more text delta so
//! live surfaces show it too, and the event is recorded in `meta.extra["output_limit"]`.
//! Tool calls are left alone: cut arguments fail to parse and the model sees that error.

use async_trait::async_trait;
use serde_json::json;

use crate::agent_api::{HookResult, Middleware, MiddlewareError, RunContext, RunEvent};
use crate::middleware::support::replace_ai;
use antler_store::messages::FinishReason;
use antler_store::state::ThreadState;

pub const LENGTH_NOTE: &str =
    "[The answer was cut off at the model's output limit (max_tokens); ask me to continue.]";
/// Key in the AI message's `meta.extra`.
pub const OUTPUT_LIMIT_KEY: &str = "output_limit";

#[derive(Debug, Default)]
pub struct ModelLengthFinishReasonMiddleware;

impl ModelLengthFinishReasonMiddleware {
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Middleware for ModelLengthFinishReasonMiddleware {
    fn name(&self) -> &str {
        "ModelLengthFinishReasonMiddleware"
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
        if ai.finish_reason != Some(FinishReason::Length)
            || !ai.tool_calls.is_empty()
            || ai.meta.extra.contains_key(OUTPUT_LIMIT_KEY)
        {
            return Ok(HookResult::proceed());
        }
        let separator = if ai.content.trim().is_empty() {
            ""
        } else {
            "\n\n"
        };
        let addition = format!("{separator}{LENGTH_NOTE}");
        let mut noted = ai.clone();
        noted.content = format!("{}{addition}", ai.content.trim_end()).into();
        noted.meta.extra.insert(
            OUTPUT_LIMIT_KEY.to_string(),
            json!({"finish_reason": "length"}),
        );
        tracing::info!(thread_id = %ctx.thread_id, model = ?ai.model, "The answer reached the model's output limit");
        ctx.events.emit(RunEvent::TextDelta {
            message_id: ai.id.to_string(),
            delta: addition,
        });
        Ok(HookResult::update(replace_ai(noted)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::agent_api::EventSink;
    use crate::config::AppConfig;
    use antler_store::messages::{AiMessage, Message, ToolCall};

    async fn check(ai: AiMessage) -> (AiMessage, Vec<RunEvent>) {
        let mut state = ThreadState {
            messages: vec![Message::human("write a lot"), Message::Ai(ai)].into(),
            ..Default::default()
        };
        let (events, mut rx) = EventSink::channel(false);
        let mut ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        ctx.events = events;
        let middleware = ModelLengthFinishReasonMiddleware;
        for _ in 0..2 {
            let result = middleware.after_model(&state, &ctx).await.unwrap();
            state.apply(result.update).unwrap();
        }
        let mut emitted = Vec::new();
        while let Some(event) = rx.try_recv() {
            emitted.push(event);
        }
        (state.last_ai().unwrap().clone(), emitted)
    }

    fn answer(content: &str, finish_reason: FinishReason) -> AiMessage {
        AiMessage {
            id: "ai-1".into(),
            content: content.into(),
            finish_reason: Some(finish_reason),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_cut_answer_gets_the_note_once_and_streams_it() {
        let (ai, events) = check(answer("Part one of the essay ", FinishReason::Length)).await;
        assert_eq!(
            ai.content,
            format!("Part one of the essay\n\n{LENGTH_NOTE}")
        );
        assert_eq!(events.len(), 1, "noted only once: {events:?}");
        assert!(
            matches!(&events[0], RunEvent::TextDelta { message_id, delta }
                if message_id == "ai-1" && delta == &format!("\n\n{LENGTH_NOTE}"))
        );
        let (empty, _) = check(answer("", FinishReason::Length)).await;
        assert_eq!(empty.content, LENGTH_NOTE);
    }

    #[tokio::test]
    async fn complete_answers_and_cut_tool_calls_are_left_alone() {
        let (ai, events) = check(answer("Done.", FinishReason::Stop)).await;
        assert_eq!(ai.content, "Done.");
        assert!(events.is_empty());
        let mut calling = answer("", FinishReason::Length);
        calling.tool_calls.push(ToolCall {
            id: "c".into(),
            name: "write_file".into(),
            args: serde_json::Value::String("{\"path\": \"a".into()),
            args_error: Some("cut".into()),
        });
        let (ai, _) = check(calling).await;
        assert_eq!(ai.content, "");
    }
}
