//! The `Middleware` seam: hooks around the agent loop, assembled in a fixed order.
//!
//! Order semantics (as in LangChain's `create_agent`): `before_*` hooks run in list order,
//! `after_*` hooks in reverse order, and for `wrap_*` hooks the first middleware is outermost.

use std::sync::Arc;

use async_trait::async_trait;

use crate::agent::RunContext;
use crate::messages::{AiMessage, ToolCall, ToolMessage};
use crate::model::{ModelError, ModelRequest};
use crate::state::{StateUpdate, ThreadState};
use crate::tools::{ToolContext, ToolError, ToolRef};

pub use crate::agent::next::{ModelNext, ToolNext};

pub mod clarification;
pub mod dangling_tool_call;
pub mod dynamic_context;
pub mod guardrail;
pub mod loop_detection;
pub mod safety_finish_reason;
pub mod sandbox;
pub mod subagent_limit;
pub mod system_message_coalescing;
pub mod terminal_response;
pub mod thread_data;
pub mod title;
pub mod todo;
pub mod token_budget;
pub mod token_usage;
pub mod tool_error_handling;
pub mod uploads;
pub mod view_image;

pub(crate) mod support;

pub use clarification::{AskClarificationTool, ClarificationMiddleware};
pub use dangling_tool_call::DanglingToolCallMiddleware;
pub use dynamic_context::DynamicContextMiddleware;
pub use guardrail::{AllowlistProvider, Decision, GuardrailMiddleware, GuardrailProvider};
pub use loop_detection::LoopDetectionMiddleware;
pub use safety_finish_reason::SafetyFinishReasonMiddleware;
pub use sandbox::SandboxMiddleware;
pub use subagent_limit::SubagentLimitMiddleware;
pub use system_message_coalescing::SystemMessageCoalescingMiddleware;
pub use terminal_response::TerminalResponseMiddleware;
pub use thread_data::ThreadDataMiddleware;
pub use title::TitleMiddleware;
pub use todo::{TodoMiddleware, WriteTodosTool};
pub use token_budget::TokenBudgetMiddleware;
pub use token_usage::TokenUsageMiddleware;
pub use tool_error_handling::ToolErrorHandlingMiddleware;
pub use uploads::UploadsMiddleware;
pub use view_image::ViewImageMiddleware;

/// What the loop does after a hook.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flow {
    /// Go on with the next hook / step.
    #[default]
    Continue,
    /// End the run now (an interrupt: the thread waits for the next human message).
    End,
    /// Call the model again instead of routing to tools or ending (only meaningful in
    /// `after_model`).
    RetryModel,
}

/// A hook's result: an optional state change and where the loop goes next.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HookResult {
    pub update: StateUpdate,
    pub flow: Flow,
}

impl HookResult {
    pub fn proceed() -> Self {
        Self::default()
    }

    pub fn update(update: StateUpdate) -> Self {
        Self {
            update,
            flow: Flow::Continue,
        }
    }

    pub fn end(update: StateUpdate) -> Self {
        Self {
            update,
            flow: Flow::End,
        }
    }

    pub fn retry_model(update: StateUpdate) -> Self {
        Self {
            update,
            flow: Flow::RetryModel,
        }
    }
}

/// The outcome of one tool call after the `wrap_tool_call` chain.
#[derive(Clone, Debug)]
pub struct ToolResult {
    pub message: ToolMessage,
    pub update: StateUpdate,
    /// End the run after this tool step (e.g. a clarification question was asked).
    pub end_run: bool,
}

impl ToolResult {
    pub fn message(message: ToolMessage) -> Self {
        Self {
            message,
            update: StateUpdate::default(),
            end_run: false,
        }
    }
}

/// Where an extra middleware asks to be placed in the fixed chain, by another middleware's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Anchors {
    /// Insert directly after the named middleware (DeerFlow's `@Next`).
    pub next: Option<String>,
    /// Insert directly before the named middleware (DeerFlow's `@Prev`).
    pub prev: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MiddlewareError {
    #[error("middleware {middleware} failed: {detail}")]
    Failed { middleware: String, detail: String },
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

/// A hook into the agent loop. Every hook has a no-op default; implement only what you need.
#[async_trait]
pub trait Middleware: Send + Sync {
    /// Stable name, e.g. `"ClarificationMiddleware"`; anchors refer to it.
    fn name(&self) -> &str;

    /// Placement for extra (user-supplied) middleware; ignored for built-ins.
    fn anchors(&self) -> Anchors {
        Anchors::default()
    }

    /// Tools this middleware brings (e.g. `ask_clarification`). User tools win on name clashes.
    fn tools(&self) -> Vec<ToolRef> {
        Vec::new()
    }

    async fn before_agent(
        &self,
        _state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        Ok(HookResult::proceed())
    }

    async fn before_model(
        &self,
        _state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        Ok(HookResult::proceed())
    }

    /// Wraps the model call. Changes made to `request` here are request-only: never persisted.
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        state: &ThreadState,
        ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        let _ = (state, ctx);
        next.call(request).await
    }

    /// Runs after the AI message was appended to the state (it is `state.last_ai()`).
    async fn after_model(
        &self,
        _state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        Ok(HookResult::proceed())
    }

    /// Wraps one tool call; may short-circuit (never calling `next`) or rewrite the result.
    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        next.call(call, ctx).await
    }

    async fn after_agent(
        &self,
        _state: &ThreadState,
        _ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        Ok(HookResult::proceed())
    }
}

pub type MiddlewareRef = Arc<dyn Middleware>;
