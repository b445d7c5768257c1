//! `SubagentLimitMiddleware`: at most N `task` (sub-agent) calls per model response.
//!
//! Extra `task` calls are dropped (the first N kept, in order); other tool calls are untouched.
//! N comes from the run's `max_concurrent_subagents`, else the constructor, clamped to [1, 4].

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use crate::middleware::support::replace_ai;
use crate::state::ThreadState;

pub const TASK_TOOL: &str = "task";
pub const DEFAULT_MAX_CONCURRENT: u32 = 3;
pub const MAX_CONCURRENT_CEILING: u32 = 4;

pub struct SubagentLimitMiddleware {
    max_concurrent: u32,
}

impl Default for SubagentLimitMiddleware {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_CONCURRENT)
    }
}

impl SubagentLimitMiddleware {
    pub fn new(max_concurrent: u32) -> Self {
        Self {
            max_concurrent: clamp_concurrency(max_concurrent),
        }
    }

    pub fn max_concurrent(&self) -> u32 {
        self.max_concurrent
    }
}

pub fn clamp_concurrency(requested: u32) -> u32 {
    requested.clamp(1, MAX_CONCURRENT_CEILING)
}

#[async_trait]
impl Middleware for SubagentLimitMiddleware {
    fn name(&self) -> &str {
        "SubagentLimitMiddleware"
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(ai) = state.last_ai() else {
            return Ok(HookResult::proceed());
        };
        let limit = ctx
            .options
            .max_concurrent_subagents
            .map(clamp_concurrency)
            .unwrap_or(self.max_concurrent) as usize;
        let tasks = ai.tool_calls.iter().filter(|c| c.name == TASK_TOOL).count();
        if tasks <= limit {
            return Ok(HookResult::proceed());
        }
        tracing::info!(thread_id = %ctx.thread_id, tasks, limit, "Dropping task calls beyond the sub-agent limit");
        let mut limited = ai.clone();
        let mut kept = 0;
        limited.tool_calls.retain(|c| {
            if c.name != TASK_TOOL {
                return true;
            }
            kept += 1;
            kept <= limit
        });
        Ok(HookResult::update(replace_ai(limited)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::AppConfig;
    use crate::messages::{AiMessage, Message, ToolCall};
    use serde_json::json;

    #[test]
    fn above_max_is_clamped_to_four() {
        assert_eq!(SubagentLimitMiddleware::new(10).max_concurrent(), 4);
        assert_eq!(SubagentLimitMiddleware::new(0).max_concurrent(), 1);
        assert_eq!(SubagentLimitMiddleware::default().max_concurrent(), 3);
    }

    #[tokio::test]
    async fn excess_task_calls_truncated_other_calls_kept() {
        let names = ["task", "ls", "task", "task", "bash", "task"];
        let ai = AiMessage {
            id: "ai-1".into(),
            tool_calls: names
                .iter()
                .enumerate()
                .map(|(i, n)| ToolCall {
                    id: format!("c{i}"),
                    name: n.to_string(),
                    args: json!({}),
                    args_error: None,
                })
                .collect(),
            ..Default::default()
        };
        let mut state = ThreadState {
            messages: vec![Message::Ai(ai)],
            ..Default::default()
        };
        let mut ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        ctx.options.max_concurrent_subagents = Some(2);
        let result = SubagentLimitMiddleware::default()
            .after_model(&state, &ctx)
            .await
            .unwrap();
        state.apply(result.update).unwrap();
        let ids: Vec<&str> = state
            .last_ai()
            .unwrap()
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["c0", "c1", "c2", "c4"]);
    }
}
