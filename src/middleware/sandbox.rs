//! `SandboxMiddleware`: binds the thread to a sandbox, lazily on its first tool call by default.
//!
//! Most turns never run a tool, so acquiring up front would waste a container start; eager mode
//! (`sandbox.eager: true`) exists for deployments that prefer paying that cost before the first
//! model call, while the model thinks. An eager acquire that fails does not fail the run: the
//! first tool call tries again and tells the model why. With no provider the middleware does
//! nothing.

use std::sync::Arc;

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError, ToolNext, ToolResult};
use crate::agent_api::{ToolContext, ToolError};
use crate::sandbox::SandboxProvider;
use antler_store::messages::{ToolCall, ToolMessage};
use antler_store::state::{SandboxState, StateUpdate, ThreadState};

#[derive(Clone, Default)]
pub struct SandboxMiddleware {
    provider: Option<Arc<dyn SandboxProvider>>,
    eager: bool,
}

impl SandboxMiddleware {
    /// Lazy: acquires on the first tool call of a thread without a sandbox.
    pub fn new(provider: Option<Arc<dyn SandboxProvider>>) -> Self {
        Self {
            provider,
            eager: false,
        }
    }

    /// Eager: acquires in `before_agent`.
    pub fn eager(provider: Option<Arc<dyn SandboxProvider>>) -> Self {
        Self {
            provider,
            eager: true,
        }
    }
}

#[async_trait]
impl Middleware for SandboxMiddleware {
    fn name(&self) -> &str {
        "SandboxMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn before_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(provider) = self.provider.as_ref().filter(|_| self.eager) else {
            return Ok(HookResult::proceed());
        };
        // A bound id the provider no longer knows (another provider since a reload, or a
        // container not running since a restart) is acquired again: that is the point of eager.
        if let Some(bound) = &state.sandbox
            && provider.get(&bound.sandbox_id).is_some()
        {
            return Ok(HookResult::proceed());
        }
        match provider.acquire(&ctx.users.owner, &ctx.thread_id).await {
            Ok(sandbox_id)
                if state.sandbox.as_ref().map(|s| &s.sandbox_id) == Some(&sandbox_id) =>
            {
                Ok(HookResult::proceed())
            }
            Ok(sandbox_id) => {
                tracing::debug!(thread_id = %ctx.thread_id, %sandbox_id, "Acquired sandbox before the run (sandbox.eager)");
                Ok(HookResult::update(StateUpdate {
                    sandbox: Some(SandboxState { sandbox_id }),
                    ..Default::default()
                }))
            }
            // The run goes on: the first tool call tries again and tells the model why it fails.
            Err(error) => {
                tracing::warn!(thread_id = %ctx.thread_id, %error, "Could not acquire a sandbox before the run");
                Ok(HookResult::proceed())
            }
        }
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        let Some(provider) = self
            .provider
            .as_ref()
            .filter(|_| ctx.state.sandbox.is_none())
        else {
            return next.call(call, ctx).await;
        };
        // Acquire is idempotent per (user, thread): concurrent calls of one step get the same id.
        // This middleware sits outside ToolErrorHandling, so a failure is answered here, as a
        // tool error the model can read, instead of failing the run.
        let sandbox_id = match provider
            .acquire(&ctx.run.users.owner, &ctx.run.thread_id)
            .await
        {
            Ok(id) => id,
            Err(error) => {
                tracing::warn!(thread_id = %ctx.run.thread_id, %error, "Could not acquire a sandbox");
                return Ok(ToolResult::message(ToolMessage::error(
                    call,
                    format!(
                        "Error: Tool '{}' could not run because {error}. Continue with available context, or choose a tool that does not need the sandbox.",
                        call.name
                    ),
                )));
            }
        };
        tracing::debug!(thread_id = %ctx.run.thread_id, %sandbox_id, "Acquired sandbox on first tool call");
        let mut result = next.call(call, ctx).await?;
        let mut update = StateUpdate {
            sandbox: Some(SandboxState { sandbox_id }),
            ..Default::default()
        };
        update.merge(std::mem::take(&mut result.update));
        result.update = update;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use crate::agent_api::{Tool, ToolOutput, ToolRef};
    use crate::config::AppConfig;
    use crate::sandbox::{Sandbox, SandboxError};
    use serde_json::{Value, json};

    #[derive(Default)]
    struct CountingProvider(AtomicUsize);

    #[async_trait]
    impl SandboxProvider for CountingProvider {
        async fn acquire(&self, user: &str, thread: &str) -> Result<String, SandboxError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(format!("sb-{user}-{thread}"))
        }
        fn get(&self, _id: &str) -> Option<Arc<dyn Sandbox>> {
            None
        }
        async fn release(&self, _id: &str) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn shutdown(&self) {}
    }

    struct Echo;

    #[async_trait]
    impl Tool for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn description(&self) -> &str {
            "echo"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        async fn call(&self, _a: Value, _c: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("hi"))
        }
    }

    async fn tool_call(mw: &SandboxMiddleware, state: &ThreadState) -> ToolResult {
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let ctx = ToolContext {
            run: &run,
            state,
            tool_call_id: "c",
        };
        let tools: Vec<ToolRef> = vec![Arc::new(Echo)];
        let call = ToolCall {
            id: "c".into(),
            name: "echo".into(),
            args: json!({}),
            args_error: None,
        };
        mw.wrap_tool_call(&call, &ctx, ToolNext::new(&[], &tools))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn lazy_acquires_on_first_tool_call_only() {
        let provider = Arc::new(CountingProvider::default());
        let mw = SandboxMiddleware::new(Some(provider.clone()));
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let before = mw
            .before_agent(&ThreadState::default(), &ctx)
            .await
            .unwrap();
        assert!(
            before.update.is_empty(),
            "lazy mode acquires nothing up front"
        );
        let first = tool_call(&mw, &ThreadState::default()).await;
        assert_eq!(first.update.sandbox.unwrap().sandbox_id, "sb-u-t");
        let bound = ThreadState {
            sandbox: Some(SandboxState {
                sandbox_id: "sb-u-t".into(),
            }),
            ..Default::default()
        };
        let second = tool_call(&mw, &bound).await;
        assert!(second.update.sandbox.is_none());
        assert_eq!(provider.0.load(Ordering::SeqCst), 1);
    }

    struct Broken;

    #[async_trait]
    impl SandboxProvider for Broken {
        async fn acquire(&self, _u: &str, _t: &str) -> Result<String, SandboxError> {
            Err(SandboxError::Unavailable("docker is not running".into()))
        }
        fn get(&self, _id: &str) -> Option<Arc<dyn Sandbox>> {
            None
        }
        async fn release(&self, _id: &str) -> Result<(), SandboxError> {
            Ok(())
        }
        async fn shutdown(&self) {}
    }

    #[tokio::test]
    async fn acquire_failure_is_an_error_tool_message() {
        let result = tool_call(
            &SandboxMiddleware::new(Some(Arc::new(Broken))),
            &ThreadState::default(),
        )
        .await;
        assert_eq!(
            result.message.status,
            antler_store::messages::ToolStatus::Error
        );
        assert!(result.message.content.contains("docker is not running"));
        assert!(result.update.sandbox.is_none());
    }

    #[tokio::test]
    async fn eager_acquires_before_the_run_and_none_does_nothing() {
        let provider = Arc::new(CountingProvider::default());
        let ctx = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let result = SandboxMiddleware::eager(Some(provider))
            .before_agent(&ThreadState::default(), &ctx)
            .await
            .unwrap();
        assert!(result.update.sandbox.is_some());
        let broken = SandboxMiddleware::eager(Some(Arc::new(Broken)))
            .before_agent(&ThreadState::default(), &ctx)
            .await
            .expect("a failed eager acquire leaves the run going");
        assert!(broken.update.sandbox.is_none());
        let without = tool_call(&SandboxMiddleware::new(None), &ThreadState::default()).await;
        assert!(without.update.sandbox.is_none());
        assert_eq!(without.message.content, "hi");
    }
}
