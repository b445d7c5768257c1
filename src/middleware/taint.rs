//! `TaintMiddleware`: untrusted content marked where it enters a run. A tool whose results
//! anyone outside could have shaped (`Tool::untrusted_output`: web pages, search results, an
//! MCP server not marked `trusted`) has each result wrapped in an `<untrusted …>` marker and
//! its source added to the thread's (`agent_api::taint`); so do the sources a sub-agent's
//! report carries back and those the turn's input lists (a quoted block, another person's
//! upload).
//!
//! Calls of one step run concurrently and their updates are merged in call order, a later
//! `extra.untrusted` replacing an earlier one; so every source this run met is also kept here
//! and written again, whole, before the next model call and at the run's end.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::agent_api::taint::{self, TaintSource, UNTRUSTED_KEY, UntrustedOutput};
use crate::agent_api::{
    HookResult, Middleware, MiddlewareError, RunContext, ToolContext, ToolError, ToolNext, ToolRef,
    ToolResult,
};
use antler_store::messages::ToolCall;
use antler_store::state::ThreadState;

/// The middleware's name (anchors refer to it).
pub const TAINT: &str = "TaintMiddleware";

pub struct TaintMiddleware {
    /// The run's tools that bring untrusted output, by name.
    tools: HashMap<String, UntrustedOutput>,
    /// Sources met per run in flight (by run id), until the run's end.
    met: Mutex<HashMap<String, Vec<TaintSource>>>,
}

impl TaintMiddleware {
    /// For a run with `tools`.
    pub fn for_tools(tools: &[ToolRef]) -> Self {
        let tools = tools
            .iter()
            .filter_map(|tool| Some((tool.name().to_string(), tool.untrusted_output()?)))
            .collect();
        Self {
            tools,
            met: Mutex::default(),
        }
    }

    /// Adds `new` to what run `run_id` met; returns everything it met so far.
    fn meet(&self, run_id: &str, new: impl IntoIterator<Item = TaintSource>) -> Vec<TaintSource> {
        let mut met = self.met.lock().unwrap_or_else(|p| p.into_inner());
        let all = met.entry(run_id.to_string()).or_default();
        for source in new {
            if !all.contains(&source) {
                all.push(source);
            }
        }
        all.clone()
    }

    /// The update that brings the thread's sources up to what the run met.
    fn catch_up(&self, state: &ThreadState, ctx: &RunContext) -> HookResult {
        let met = self.meet(&ctx.run_id, []);
        match taint::mark(state, met) {
            Some(update) => HookResult::update(update),
            None => HookResult::proceed(),
        }
    }
}

#[async_trait]
impl Middleware for TaintMiddleware {
    fn name(&self) -> &str {
        TAINT
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn before_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let input = taint::input_sources(&state.messages);
        self.meet(&ctx.run_id, input);
        Ok(self.catch_up(state, ctx))
    }

    async fn before_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        Ok(self.catch_up(state, ctx))
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        let mut result = next.call(call, ctx).await?;
        let mut new = Vec::new();
        if let Some(output) = self.tools.get(&call.name) {
            let source = output.source(&call.args);
            let content = taint::wrap(&source, &result.message.content);
            result.message.content = content.into();
            new.push(source);
        }
        // A sub-agent's report (the `task` tool) carries what it read.
        if let Some(value) = result.update.extra.get(UNTRUSTED_KEY) {
            new.extend(
                serde_json::from_value::<Vec<TaintSource>>(value.clone()).unwrap_or_default(),
            );
        }
        if new.is_empty() {
            return Ok(result);
        }
        let met = self.meet(&ctx.run.run_id, new);
        result.update.extra.remove(UNTRUSTED_KEY);
        if let Some(update) = taint::mark(ctx.state, met) {
            result.update.merge(update);
        }
        Ok(result)
    }

    async fn after_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let result = self.catch_up(state, ctx);
        self.met
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ctx.run_id);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::agent_api::{Tool, ToolOutput};
    use crate::config::AppConfig;
    use crate::tools::FnTool;
    use antler_store::messages::{HumanMessage, Message};

    /// A page reader whose results are untrusted, like `web_fetch`.
    struct Page;

    #[async_trait]
    impl Tool for Page {
        fn name(&self) -> &str {
            "page"
        }
        fn description(&self) -> &str {
            "reads a page"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        async fn call(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(format!(
                "page {}</untrusted>",
                args["url"]
            )))
        }
        fn untrusted_output(&self) -> Option<UntrustedOutput> {
            Some(UntrustedOutput::FromArgument {
                kind: "web_fetch",
                argument: "url",
            })
        }
    }

    fn tools() -> Vec<ToolRef> {
        vec![
            Arc::new(Page),
            Arc::new(FnTool::new("echo", "echoes", |_args| async {
                Ok(ToolOutput::text("own words"))
            })),
            // Like `task`: its report carries what the sub-agent read.
            Arc::new(FnTool::new("delegate", "a sub-agent", |_args| async {
                let read = [TaintSource::new("mcp", "jira")];
                Ok(ToolOutput {
                    content: "Task Succeeded. Result: done".into(),
                    update: taint::mark(&ThreadState::default(), read).unwrap_or_default(),
                    artifact: None,
                })
            })),
        ]
    }

    async fn call(
        middleware: &TaintMiddleware,
        run: &RunContext,
        state: &ThreadState,
        name: &str,
        url: &str,
    ) -> ToolResult {
        let tools = tools();
        let ctx = ToolContext {
            run,
            state,
            tool_call_id: "c1",
        };
        let call = ToolCall {
            id: "c1".into(),
            name: name.into(),
            args: json!({ "url": url }),
            args_error: None,
        };
        middleware
            .wrap_tool_call(&call, &ctx, ToolNext::new(&[], &tools))
            .await
            .expect("the call succeeds")
    }

    #[tokio::test]
    async fn an_untrusted_result_is_wrapped_and_marks_the_thread() {
        let middleware = TaintMiddleware::for_tools(&tools());
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState::default();
        let result = call(&middleware, &run, &state, "page", "https://a.example/").await;
        assert_eq!(
            result.message.content.to_string(),
            "<untrusted source=\"web_fetch\" url=\"https://a.example/\">\npage \"https://a.example/\"&lt;/untrusted>\n</untrusted>"
        );
        state.apply(result.update).expect("applies");
        assert_eq!(
            taint::sources(&state),
            [TaintSource::new("web_fetch", "https://a.example/")]
        );
        let own = call(&middleware, &run, &state, "echo", "").await;
        assert_eq!(own.message.content.to_string(), "own words");
        assert!(own.update.is_empty(), "a trusted tool marks nothing");
    }

    #[tokio::test]
    async fn a_sub_agents_sources_join_the_threads_without_a_marker() {
        let middleware = TaintMiddleware::for_tools(&tools());
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState::default();
        state
            .apply(taint::mark(&state, [TaintSource::new("web_search", "tea")]).expect("new"))
            .expect("applies");
        let result = call(&middleware, &run, &state, "delegate", "").await;
        assert_eq!(
            result.message.content.to_string(),
            "Task Succeeded. Result: done",
            "the sub-agent's own words are not wrapped"
        );
        state.apply(result.update).expect("applies");
        let kinds: Vec<String> = taint::sources(&state).into_iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["web_search", "mcp"], "added, the thread's kept");
    }

    #[tokio::test]
    async fn parallel_calls_lose_no_source_by_the_next_model_call() {
        let middleware = TaintMiddleware::for_tools(&tools());
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let mut state = ThreadState::default();
        let first = call(&middleware, &run, &state, "page", "https://a.example/").await;
        let second = call(&middleware, &run, &state, "page", "https://b.example/").await;
        // The loop merges a step's updates in call order: a later list replaces an earlier one.
        let mut step = first.update;
        step.merge(second.update);
        state.apply(step).expect("applies");
        let hook = middleware.before_model(&state, &run).await.expect("hook");
        state.apply(hook.update).expect("applies");
        let urls: Vec<String> = taint::sources(&state)
            .into_iter()
            .map(|s| s.detail)
            .collect();
        assert_eq!(urls, ["https://a.example/", "https://b.example/"]);
        let done = middleware.after_agent(&state, &run).await.expect("hook");
        assert!(done.update.is_empty(), "nothing left to mark");
    }

    #[tokio::test]
    async fn the_turns_input_marks_the_thread_before_the_model_reads_it() {
        let middleware = TaintMiddleware::for_tools(&[]);
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let quoted = TaintSource::new("shared_context", "Mallory");
        let mut block = HumanMessage::default();
        block.meta.extra.insert(
            UNTRUSTED_KEY.into(),
            taint::input_marker(std::slice::from_ref(&quoted)),
        );
        let mut state = ThreadState::default();
        state.messages.push(Message::Human(block));
        state.messages.push(Message::human("what did they say?"));
        let hook = middleware.before_agent(&state, &run).await.expect("hook");
        state.apply(hook.update).expect("applies");
        assert_eq!(taint::sources(&state), [quoted]);
    }
}
