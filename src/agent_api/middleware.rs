//! The `Middleware` contract: hooks around the agent loop, assembled in a fixed order, and the
//! continuations (`ModelNext`, `ToolNext`) handed to `wrap_*` hooks. The two are one file because
//! they are one recursion: a hook calls `next`, which calls the next hook.
//!
//! Order semantics (as in LangChain's `create_agent`): `before_*` hooks run in list order,
//! `after_*` hooks in reverse order, and for `wrap_*` hooks the first middleware is outermost.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use tracing::Instrument;

use crate::agent_api::{RunContext, RunEvent, ToolContext, ToolError, ToolRef};
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest};
use antler_store::messages::{AiMessage, ToolCall, ToolMessage};
use antler_store::state::{StateUpdate, ThreadState};

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
    /// The call waits for a person's decision (`approvals:`): the request, stored already.
    /// `message` is not recorded; the call stays unanswered in the thread until the run that
    /// continues after the decision answers it.
    pub parked: Option<Box<crate::agent_api::approval::ApprovalRequest>>,
}

impl ToolResult {
    pub fn message(message: ToolMessage) -> Self {
        Self {
            message,
            update: StateUpdate::default(),
            end_run: false,
            parked: None,
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
    State(#[from] antler_store::state::StateError),
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

    /// Whether this middleware overrides [`wrap_model_call`](Self::wrap_model_call). The
    /// model-call chain skips the ones that do not: each layer it enters is a boxed future held
    /// for the whole model call, ~300 bytes per run in flight. `true` is always correct; answer
    /// `false` only while `wrap_model_call` is the default.
    fn wraps_model_call(&self) -> bool {
        true
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

/// The rest of the model-call chain; the innermost step streams from the model.
pub struct ModelNext<'a> {
    pub(crate) rest: &'a [MiddlewareRef],
    pub(crate) model: &'a dyn ChatModel,
    pub(crate) state: &'a ThreadState,
    pub(crate) ctx: &'a RunContext,
}

impl<'a> ModelNext<'a> {
    pub fn new(
        rest: &'a [MiddlewareRef],
        model: &'a dyn ChatModel,
        state: &'a ThreadState,
        ctx: &'a RunContext,
    ) -> Self {
        Self {
            rest,
            model,
            state,
            ctx,
        }
    }

    pub async fn call(self, request: ModelRequest) -> Result<AiMessage, ModelError> {
        let mut rest = self.rest;
        while let Some((first, after)) = rest.split_first() {
            if first.wraps_model_call() {
                let next = ModelNext {
                    rest: after,
                    ..self
                };
                return first
                    .wrap_model_call(request, self.state, self.ctx, next)
                    .await;
            }
            rest = after;
        }
        if !crate::telemetry::enabled() {
            // Boxed: every layer's future embeds this one's type, so inline it would make each
            // of the chain's (boxed) layers as large as the whole streaming state.
            return Box::pin(stream_model(self.model, request, self.ctx)).await;
        }
        let span =
            crate::telemetry::spans::model_call(self.model.name(), &self.ctx.config, &request);
        let answer = Box::pin(stream_model(self.model, request, self.ctx))
            .instrument(span.clone())
            .await;
        crate::telemetry::spans::record_model_answer(&span, &answer);
        answer
    }
}

/// Streams one completion, forwarding deltas as run events, and returns the final message.
async fn stream_model(
    model: &dyn ChatModel,
    request: ModelRequest,
    ctx: &RunContext,
) -> Result<AiMessage, ModelError> {
    if let Some(meter) = &ctx.meter {
        meter.admit(ctx.usage_kind)?;
    }
    let mut stream = tokio::select! {
        _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
        started = model.stream(&request) => started?,
    };
    // The provider sent its own encoding: the copy of the history is not kept while the answer
    // streams.
    drop(request);
    let message_id = antler_store::messages::new_id("ai");
    loop {
        let event = tokio::select! {
            _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
            event = stream.next() => event,
        };
        match event {
            Some(Ok(ModelEvent::TextDelta(delta))) => ctx.events.emit(RunEvent::TextDelta {
                message_id: message_id.clone(),
                delta,
            }),
            Some(Ok(ModelEvent::ReasoningDelta(delta))) => {
                ctx.events.emit(RunEvent::ReasoningDelta {
                    message_id: message_id.clone(),
                    delta,
                })
            }
            Some(Ok(ModelEvent::Completed(mut message))) => {
                message.id = message_id.into();
                if message.model.is_none() {
                    message.model = Some(model.name().into());
                }
                if let (Some(meter), Some(usage)) = (&ctx.meter, &message.usage) {
                    let model = message.model.as_deref().unwrap_or_default();
                    if let Some(warning) = meter.record(ctx.usage_kind, model, usage, true) {
                        ctx.events.emit(RunEvent::Custom {
                            name: crate::agent_api::metering::BUDGET_WARNING_EVENT.to_string(),
                            data: serde_json::json!({ "message": warning }),
                        });
                    }
                }
                return Ok(message);
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ModelError::Stream {
                    model: model.name().to_string(),
                    detail: "the stream ended before the message was complete".into(),
                });
            }
        }
    }
}

/// The rest of the tool-call chain; the innermost step invokes the tool itself.
pub struct ToolNext<'a> {
    pub(crate) rest: &'a [MiddlewareRef],
    pub(crate) tools: &'a [ToolRef],
}

impl<'a> ToolNext<'a> {
    pub fn new(rest: &'a [MiddlewareRef], tools: &'a [ToolRef]) -> Self {
        Self { rest, tools }
    }

    pub async fn call(
        self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
    ) -> Result<ToolResult, ToolError> {
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ToolNext { rest, ..self };
                first.wrap_tool_call(call, ctx, next).await
            }
            None => invoke_tool(self.tools, call, ctx).await,
        }
    }
}

async fn invoke_tool(
    tools: &[ToolRef],
    call: &ToolCall,
    ctx: &ToolContext<'_>,
) -> Result<ToolResult, ToolError> {
    let tool = tools
        .iter()
        .find(|t| t.name() == call.name)
        .ok_or_else(|| ToolError::Unknown(call.name.clone()))?;
    if let Some(problem) = &call.args_error {
        return Err(ToolError::InvalidArguments(format!(
            "the arguments were not valid JSON ({problem}); send a JSON object matching the schema"
        )));
    }
    let output = tokio::select! {
        _ = ctx.run.cancel.cancelled() => return Err(ToolError::Cancelled),
        output = tool.call(call.args.clone(), ctx) => output?,
    };
    let mut message = ToolMessage::success(call, output.content);
    message.artifact = output.artifact;
    Ok(ToolResult {
        message,
        update: output.update,
        end_run: false,
        parked: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::config::AppConfig;
    use crate::model::{ScriptedModel, ScriptedTurn};

    /// Logs its name when its `wrap_model_call` runs; `wraps` is what it answers.
    struct Wrapper {
        name: &'static str,
        wraps: bool,
        log: Arc<Mutex<Vec<&'static str>>>,
    }

    #[async_trait]
    impl Middleware for Wrapper {
        fn name(&self) -> &str {
            self.name
        }

        fn wraps_model_call(&self) -> bool {
            self.wraps
        }

        async fn wrap_model_call(
            &self,
            request: ModelRequest,
            _state: &ThreadState,
            _ctx: &RunContext,
            next: ModelNext<'_>,
        ) -> Result<AiMessage, ModelError> {
            self.log.lock().unwrap().push(self.name);
            next.call(request).await
        }
    }

    #[tokio::test]
    async fn the_model_call_chain_skips_middlewares_that_do_not_wrap_it_and_keeps_the_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let wrapper = |name, wraps| -> MiddlewareRef {
            Arc::new(Wrapper {
                name,
                wraps,
                log: log.clone(),
            })
        };
        let chain = [
            wrapper("A", true),
            wrapper("skipped", false),
            wrapper("B", true),
            wrapper("skipped last", false),
        ];
        let model = ScriptedModel::new("m", [ScriptedTurn::Text(vec!["ok".into()])]);
        let state = ThreadState::default();
        let ctx = RunContext::new("t1", "u1", Arc::new(AppConfig::default()));
        let answer = ModelNext::new(&chain, &model, &state, &ctx)
            .call(ModelRequest::default())
            .await
            .expect("the model answers");
        assert_eq!(answer.content, "ok");
        assert_eq!(*log.lock().unwrap(), ["A", "B"]);
    }
}
