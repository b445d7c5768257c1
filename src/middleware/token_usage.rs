//! `TokenUsageMiddleware`: keeps running token totals of the run and the thread in the state.
//!
//! Totals live in `state.extra["token_usage"]` as `{"run_id", "run": usage, "thread": usage}`;
//! the run total restarts when a new run id is seen.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use antler_store::messages::Usage;
use antler_store::state::{StateUpdate, ThreadState};

/// Key in `ThreadState::extra`.
pub const TOKEN_USAGE_KEY: &str = "token_usage";

#[derive(Debug, Default)]
pub struct TokenUsageMiddleware;

impl TokenUsageMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// Reads a usage object written by this middleware (missing or malformed ⇒ zero).
pub fn usage_at(totals: Option<&Value>, key: &str) -> Usage {
    totals
        .and_then(|t| t.get(key))
        .and_then(|u| serde_json::from_value(u.clone()).ok())
        .unwrap_or_default()
}

#[async_trait]
impl Middleware for TokenUsageMiddleware {
    fn name(&self) -> &str {
        "TokenUsageMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(usage) = state.last_ai().and_then(|ai| ai.usage) else {
            return Ok(HookResult::proceed());
        };
        let previous = state.extra.get(TOKEN_USAGE_KEY);
        let same_run = previous
            .and_then(|p| p.get("run_id"))
            .and_then(Value::as_str)
            == Some(ctx.run_id.as_str());
        let mut run = if same_run {
            usage_at(previous, "run")
        } else {
            Usage::default()
        };
        let mut thread = usage_at(previous, "thread");
        run.add(&usage);
        thread.add(&usage);
        tracing::debug!(
            thread_id = %ctx.thread_id,
            run_id = %ctx.run_id,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            run_total = run.total_tokens,
            thread_total = thread.total_tokens,
            "Model call token usage"
        );
        let mut update = StateUpdate::default();
        update.extra.insert(
            TOKEN_USAGE_KEY.to_string(),
            json!({"run_id": ctx.run_id, "run": run, "thread": thread}),
        );
        Ok(HookResult::update(update))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::AppConfig;
    use antler_store::messages::{AiMessage, Message};

    fn with_usage(state: &mut ThreadState, total: u64) {
        state.messages.push(Message::Ai(AiMessage {
            id: format!("ai-{total}").into(),
            usage: Some(Usage {
                input_tokens: total - 1,
                output_tokens: 1,
                total_tokens: total,
                ..Default::default()
            }),
            ..Default::default()
        }));
    }

    #[tokio::test]
    async fn accumulates_per_run_and_per_thread() {
        let config = Arc::new(AppConfig::default());
        let mut state = ThreadState::default();
        let first = RunContext::new("t", "u", config.clone());
        for total in [10, 20] {
            with_usage(&mut state, total);
            let result = TokenUsageMiddleware
                .after_model(&state, &first)
                .await
                .unwrap();
            state.apply(result.update).unwrap();
        }
        let second = RunContext::new("t", "u", config);
        with_usage(&mut state, 5);
        let result = TokenUsageMiddleware
            .after_model(&state, &second)
            .await
            .unwrap();
        state.apply(result.update).unwrap();
        let totals = state.extra.get(TOKEN_USAGE_KEY);
        assert_eq!(usage_at(totals, "run").total_tokens, 5);
        assert_eq!(usage_at(totals, "thread").total_tokens, 35);
        assert_eq!(usage_at(totals, "thread").output_tokens, 3);
    }
}
