//! `ToolErrorHandlingMiddleware`: a failing tool becomes an error tool message the model can read.
//!
//! Without it one bad tool call would abort the whole run; with it the model sees what went wrong
//! and can try something else. Cancellation is not an error and passes through untouched.

use async_trait::async_trait;

use crate::agent_api::shared::truncate_chars;
use crate::agent_api::{Middleware, ToolNext, ToolResult};
use crate::agent_api::{ToolContext, ToolError};
use antler_store::messages::{ToolCall, ToolMessage};

/// Longest error detail shown to the model; tracebacks beyond this only waste context.
pub const MAX_ERROR_DETAIL_CHARS: usize = 500;

#[derive(Debug, Default)]
pub struct ToolErrorHandlingMiddleware;

impl ToolErrorHandlingMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// The message the model reads for a failed call.
pub fn tool_error_text(tool_name: &str, error: &ToolError) -> String {
    let detail = error.to_string();
    let detail = truncate_chars(&detail, MAX_ERROR_DETAIL_CHARS);
    format!(
        "Error: Tool '{tool_name}' failed with {}: {detail}. Continue with available context, or choose an alternative tool.",
        error.kind()
    )
}

#[async_trait]
impl Middleware for ToolErrorHandlingMiddleware {
    fn name(&self) -> &str {
        "ToolErrorHandlingMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        match next.call(call, ctx).await {
            Err(ToolError::Cancelled) => Err(ToolError::Cancelled),
            Err(error) => {
                tracing::warn!(tool = %call.name, tool_call_id = %call.id, %error, "Tool call failed");
                Ok(ToolResult::message(ToolMessage::error(
                    call,
                    tool_error_text(&call.name, &error),
                )))
            }
            ok => ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::agent_api::RunContext;
    use crate::agent_api::ToolRef;
    use crate::config::AppConfig;
    use crate::tools::FnTool;
    use antler_store::messages::ToolStatus;
    use antler_store::state::ThreadState;
    use serde_json::json;

    async fn run(error: fn() -> ToolError) -> Result<ToolResult, ToolError> {
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let state = ThreadState::default();
        let ctx = ToolContext {
            run: &run,
            state: &state,
            tool_call_id: "c1",
        };
        let tools: Vec<ToolRef> = vec![Arc::new(FnTool::new(
            "boom",
            "fails",
            move |_args| async move { Err(error()) },
        ))];
        let call = ToolCall {
            id: "c1".into(),
            name: "boom".into(),
            args: json!({}),
            args_error: None,
        };
        ToolErrorHandlingMiddleware
            .wrap_tool_call(&call, &ctx, ToolNext::new(&[], &tools))
            .await
    }

    #[tokio::test]
    async fn failure_becomes_an_error_message() {
        let result = run(|| ToolError::Failed("x".repeat(900))).await.unwrap();
        assert_eq!(result.message.status, ToolStatus::Error);
        let text = &result.message.content;
        assert!(text.starts_with("Error: Tool 'boom' failed with ToolFailure: xxx"));
        assert!(
            text.ends_with(". Continue with available context, or choose an alternative tool.")
        );
        assert!(text.len() < 700, "detail is capped at 500 chars");
    }

    #[tokio::test]
    async fn cancellation_passes_through() {
        assert!(matches!(
            run(|| ToolError::Cancelled).await,
            Err(ToolError::Cancelled)
        ));
    }
}
