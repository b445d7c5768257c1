//! `SubagentLimitMiddleware`: at most N `task` (sub-agent) calls per model response, and at most
//! M per run.
//!
//! Extra `task` calls are dropped (the first ones kept, in order); other tool calls are
//! untouched. N comes from the run's `max_concurrent_subagents`, else the constructor, clamped
//! to [1, 4]; M from the run's `max_total_subagents`, else `subagents.max_total_per_run`,
//! clamped to [1, 50]. The run's count lives in `state.extra` (checkpointed with the step that
//! made the calls). A response asking for more once the run's delegations are spent loses all
//! its tool calls and tells the model why, so the run ends with that answer
//! (`subagent_limit_capped`).

use async_trait::async_trait;
use serde_json::json;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError, StopReason};
use crate::config::subagents::clamp_total;
use crate::middleware::support::{forced_final, replace_ai};
use antler_store::state::{StateUpdate, ThreadState};

pub const TASK_TOOL: &str = "task";
pub const DEFAULT_MAX_CONCURRENT: u32 = 3;
pub const MAX_CONCURRENT_CEILING: u32 = 4;
/// `state.extra` key: `{"run_id": …, "count": n}`, the `task` calls kept in that run so far.
pub const DELEGATIONS_KEY: &str = "subagent_delegations";
pub const LIMIT_REACHED_SUFFIX: &str = "\n\n[SUBAGENT LIMIT REACHED] The subagent delegation limit for this run has been reached. No further subagent tasks can be started in this run; the task calls beyond the limit were not executed. Give your final answer with the results collected so far.";

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

/// The `task` calls this run already made (kept ones only).
pub fn delegations_in_run(state: &ThreadState, run_id: &str) -> u32 {
    match state.extra.get(DELEGATIONS_KEY) {
        Some(entry) if entry["run_id"].as_str() == Some(run_id) => {
            entry["count"].as_u64().map_or(0, |n| n as u32)
        }
        _ => 0,
    }
}

/// The run's per-run cap: the option, else the config, clamped.
pub fn max_total(ctx: &RunContext) -> u32 {
    ctx.options
        .max_total_subagents
        .map(clamp_total)
        .unwrap_or_else(|| ctx.config.subagents.max_total())
}

#[async_trait]
impl Middleware for SubagentLimitMiddleware {
    fn name(&self) -> &str {
        "SubagentLimitMiddleware"
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
        let tasks = ai.tool_calls.iter().filter(|c| c.name == TASK_TOOL).count();
        if tasks == 0 {
            return Ok(HookResult::proceed());
        }
        let per_response = ctx
            .options
            .max_concurrent_subagents
            .map(clamp_concurrency)
            .unwrap_or(self.max_concurrent) as usize;
        let made = delegations_in_run(state, &ctx.run_id);
        let left = max_total(ctx).saturating_sub(made) as usize;
        let allowed = per_response.min(left);
        let kept = tasks.min(allowed);
        let mut update = StateUpdate::default();
        update.extra.insert(
            DELEGATIONS_KEY.to_string(),
            json!({"run_id": ctx.run_id, "count": made + kept as u32}),
        );
        if tasks <= allowed {
            return Ok(HookResult::update(update));
        }
        tracing::info!(thread_id = %ctx.thread_id, tasks, allowed, made, "Dropping task calls beyond the sub-agent limits");
        let total_spent = left < tasks.min(per_response);
        let limited = if allowed == 0 {
            ctx.set_stop_reason(StopReason::SubagentLimitCapped);
            forced_final(ai, LIMIT_REACHED_SUFFIX)
        } else {
            let mut limited = ai.clone();
            let mut seen = 0;
            limited.tool_calls.retain(|c| {
                if c.name != TASK_TOOL {
                    return true;
                }
                seen += 1;
                seen <= allowed
            });
            if total_spent {
                limited.content.push_str(LIMIT_REACHED_SUFFIX);
            }
            limited
        };
        update.merge(replace_ai(limited));
        Ok(HookResult::update(update))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::AppConfig;
    use antler_store::messages::{AiMessage, Message, ToolCall};
    use serde_json::json;

    fn response(id: &str, names: &[&str]) -> Message {
        Message::Ai(AiMessage {
            id: id.into(),
            tool_calls: names
                .iter()
                .enumerate()
                .map(|(i, n)| ToolCall {
                    id: format!("{id}-c{i}"),
                    name: n.to_string(),
                    args: json!({}),
                    args_error: None,
                })
                .collect(),
            ..Default::default()
        })
    }

    async fn limit(state: &mut ThreadState, ctx: &RunContext) -> Vec<String> {
        let result = SubagentLimitMiddleware::default()
            .after_model(state, ctx)
            .await
            .unwrap();
        state.apply(result.update).unwrap();
        let ai = state.last_ai().unwrap();
        ai.tool_calls.iter().map(|c| c.id.clone()).collect()
    }

    #[test]
    fn above_max_is_clamped_to_four() {
        assert_eq!(SubagentLimitMiddleware::new(10).max_concurrent(), 4);
        assert_eq!(SubagentLimitMiddleware::new(0).max_concurrent(), 1);
        assert_eq!(SubagentLimitMiddleware::default().max_concurrent(), 3);
    }

    #[tokio::test]
    async fn excess_task_calls_truncated_other_calls_kept() {
        let mut state = ThreadState {
            messages: vec![response(
                "a",
                &["task", "ls", "task", "task", "bash", "task"],
            )]
            .into(),
            ..Default::default()
        };
        let mut ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        ctx.options.max_concurrent_subagents = Some(2);
        assert_eq!(
            limit(&mut state, &ctx).await,
            ["a-c0", "a-c1", "a-c2", "a-c4"]
        );
        assert_eq!(delegations_in_run(&state, &ctx.run_id), 2);
    }

    #[tokio::test]
    async fn five_calls_with_the_default_limit_keep_the_first_three() {
        let mut state = ThreadState {
            messages: vec![response("a", &["task"; 5])].into(),
            ..Default::default()
        };
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        assert_eq!(limit(&mut state, &ctx).await, ["a-c0", "a-c1", "a-c2"]);
    }

    #[tokio::test]
    async fn the_run_total_spans_responses_and_ends_the_run_when_spent() {
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState {
            messages: vec![response("a", &["task"; 3])].into(),
            ..Default::default()
        };
        assert_eq!(limit(&mut state, &ctx).await.len(), 3);
        state.messages.push(response("b", &["task", "task", "ls"]));
        assert_eq!(limit(&mut state, &ctx).await, ["b-c0", "b-c1", "b-c2"]);
        assert!(!state.last_ai().unwrap().content.contains("LIMIT"));
        // One of the default 6 is left: it runs, and the model learns the total is spent.
        state
            .messages
            .push(response("c", &["task", "task", "task", "ls"]));
        assert_eq!(limit(&mut state, &ctx).await, ["c-c0", "c-c3"]);
        assert!(
            state
                .last_ai()
                .unwrap()
                .content
                .contains("[SUBAGENT LIMIT REACHED]")
        );
        // Spent: nothing runs, not even the other calls, and the run ends capped.
        state.messages.push(response("d", &["ls", "task"]));
        assert!(limit(&mut state, &ctx).await.is_empty());
        assert!(
            state
                .last_ai()
                .unwrap()
                .content
                .contains("[SUBAGENT LIMIT REACHED]")
        );
        assert_eq!(ctx.stop_reason(), Some(StopReason::SubagentLimitCapped));
        assert_eq!(delegations_in_run(&state, &ctx.run_id), 6);
        assert_eq!(delegations_in_run(&state, "another run"), 0);
    }

    #[tokio::test]
    async fn out_of_range_limits_are_clamped() {
        let mut config = AppConfig::default();
        config.subagents.max_total_per_run = 0;
        let mut ctx = RunContext::new("t", "u", Arc::new(config));
        ctx.options.max_concurrent_subagents = Some(99);
        let mut state = ThreadState {
            messages: vec![response("a", &["task"; 6])].into(),
            ..Default::default()
        };
        // Total clamped up to 1, concurrency down to 4: one runs.
        assert_eq!(limit(&mut state, &ctx).await, ["a-c0"]);
        ctx.options.max_total_subagents = Some(1000);
        ctx.options.max_concurrent_subagents = Some(0);
        let mut state = ThreadState {
            messages: vec![response("b", &["task"; 6])].into(),
            ..Default::default()
        };
        assert_eq!(limit(&mut state, &ctx).await, ["b-c0"]);
        assert_eq!(max_total(&ctx), 50);
    }
}
