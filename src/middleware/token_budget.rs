//! `TokenBudgetMiddleware`: caps the tokens one run may spend (reference §3.2).
//!
//! Usage of every AI message of the run is summed; the highest fraction of the total, input or
//! output budget drives a one-time warning (shown at the next model call) and, at the hard
//! threshold, a forced final answer with `stop_reason = "token_capped"`.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError, ModelNext, StopReason};
use crate::config::schema::TokenBudgetConfig;
use crate::middleware::support::{forced_final, hidden_human, replace_ai};
use crate::model::{ModelError, ModelRequest};
use antler_store::messages::{AiMessage, Message, Usage};
use antler_store::state::{StateUpdate, ThreadState};

pub const TOKEN_BUDGET_KEY: &str = "token_budget";
pub const TOKEN_BUDGET_WARNING_NAME: &str = "token_budget_warning";

pub struct TokenBudgetMiddleware {
    config: TokenBudgetConfig,
    /// Warnings waiting for the run's next model call, by run id.
    pending: Mutex<HashMap<String, String>>,
}

impl TokenBudgetMiddleware {
    pub fn new(config: TokenBudgetConfig) -> Self {
        Self {
            config,
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// The most used budget: (fraction, used, budget, which).
    fn worst(&self, used: &Usage) -> (f64, u64, u64, &'static str) {
        let mut candidates = vec![(used.total_tokens, self.config.max_tokens.max(1), "total")];
        if let Some(max) = self.config.max_input_tokens {
            candidates.push((used.input_tokens, max.max(1), "input"));
        }
        if let Some(max) = self.config.max_output_tokens {
            candidates.push((used.output_tokens, max.max(1), "output"));
        }
        candidates
            .into_iter()
            .map(|(used, budget, which)| (used as f64 / budget as f64, used, budget, which))
            .fold(
                (0.0, 0, 1, "total"),
                |best, c| if c.0 > best.0 { c } else { best },
            )
    }

    fn take_pending(&self, run_id: &str) -> Option<String> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(run_id)
    }
}

use crate::agent_api::shared::group_thousands;

#[async_trait]
impl Middleware for TokenBudgetMiddleware {
    fn name(&self) -> &str {
        "TokenBudgetMiddleware"
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        if let Some(warning) = self.take_pending(&ctx.run_id) {
            request.messages.push(Message::Human(hidden_human(
                TOKEN_BUDGET_WARNING_NAME,
                warning,
            )));
        }
        next.call(request).await
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(ai) = state.last_ai() else {
            return Ok(HookResult::proceed());
        };
        let Some(usage) = ai.usage else {
            return Ok(HookResult::proceed());
        };
        let previous = state
            .extra
            .get(TOKEN_BUDGET_KEY)
            .filter(|p| p.get("run_id").and_then(Value::as_str) == Some(ctx.run_id.as_str()));
        let mut used: Usage = previous
            .and_then(|p| p.get("used"))
            .and_then(|u| serde_json::from_value(u.clone()).ok())
            .unwrap_or_default();
        let mut warned = previous
            .and_then(|p| p.get("warned"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        used.add(&usage);

        let (fraction, spent, budget, which) = self.worst(&used);
        let mut result = HookResult::proceed();
        if fraction
            >= self
                .config
                .hard_stop_threshold
                .max(self.config.warn_threshold)
        {
            if !ai.tool_calls.is_empty() {
                tracing::warn!(thread_id = %ctx.thread_id, spent, budget, which, "Token budget exceeded: forcing a final answer");
                ctx.set_stop_reason(StopReason::TokenCapped);
                let suffix = format!(
                    "\n\n[TOKEN BUDGET EXCEEDED] This run used {} of its {} {which} token budget. Producing final answer with results collected so far.",
                    group_thousands(spent),
                    group_thousands(budget)
                );
                result = HookResult::update(replace_ai(forced_final(ai, &suffix)));
            }
        } else if fraction >= self.config.warn_threshold && !warned {
            warned = true;
            let warning = format!(
                "[TOKEN BUDGET WARNING] You have used {} of your {} {which} token budget ({}%). Wrap up: avoid further exploration and produce your final answer soon.",
                group_thousands(spent),
                group_thousands(budget),
                (fraction * 100.0).round()
            );
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(ctx.run_id.clone(), warning);
        }
        let mut update = StateUpdate::default();
        update.extra.insert(
            TOKEN_BUDGET_KEY.to_string(),
            json!({"run_id": ctx.run_id, "used": used, "warned": warned}),
        );
        result.update.merge(update);
        Ok(result)
    }

    async fn after_agent(
        &self,
        _state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        self.take_pending(&ctx.run_id);
        Ok(HookResult::proceed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::AppConfig;
    use antler_store::messages::ToolCall;

    fn step(state: &mut ThreadState, input: u64, output: u64, with_call: bool) {
        state.messages.push(Message::Ai(AiMessage {
            id: antler_store::messages::new_id("ai").into(),
            usage: Some(Usage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: input + output,
                ..Default::default()
            }),
            tool_calls: if with_call {
                vec![ToolCall {
                    id: "c".into(),
                    name: "ls".into(),
                    args: json!({}),
                    args_error: None,
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        }));
    }

    fn budget(max_input: Option<u64>) -> TokenBudgetMiddleware {
        TokenBudgetMiddleware::new(TokenBudgetConfig {
            enabled: true,
            max_tokens: 1000,
            max_input_tokens: max_input,
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn warns_only_once_per_run() {
        let mw = budget(None);
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState::default();
        for _ in 0..2 {
            step(&mut state, 400, 10, true);
            let result = mw.after_model(&state, &ctx).await.unwrap();
            state.apply(result.update).unwrap();
        }
        let warning = mw.take_pending(&ctx.run_id).unwrap();
        assert!(warning.starts_with(
            "[TOKEN BUDGET WARNING] You have used 820 of your 1,000 total token budget (82%)"
        ));
        step(&mut state, 50, 10, true);
        let result = mw.after_model(&state, &ctx).await.unwrap();
        state.apply(result.update).unwrap();
        assert!(
            mw.take_pending(&ctx.run_id).is_none(),
            "already warned this run"
        );
    }

    #[tokio::test]
    async fn input_budget_hard_stop_strips_tool_calls() {
        let mw = budget(Some(100));
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState::default();
        step(&mut state, 150, 1, true);
        let result = mw.after_model(&state, &ctx).await.unwrap();
        state.apply(result.update).unwrap();
        let ai = state.last_ai().unwrap();
        assert!(ai.tool_calls.is_empty());
        assert!(
            ai.content.contains(
                "[TOKEN BUDGET EXCEEDED] This run used 150 of its 100 input token budget"
            )
        );
        assert_eq!(ctx.stop_reason(), Some(StopReason::TokenCapped));
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(1234567), "1,234,567");
        assert_eq!(group_thousands(200000), "200,000");
    }
}
