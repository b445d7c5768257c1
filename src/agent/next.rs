//! Continuations handed to `wrap_*` hooks: calling `next` runs the rest of the chain.

use futures::StreamExt;

use crate::agent::{RunContext, RunEvent};
use crate::messages::{AiMessage, ToolCall, ToolMessage};
use crate::middleware::{MiddlewareRef, ToolResult};
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest};
use crate::state::ThreadState;
use crate::tools::{ToolContext, ToolError, ToolRef};

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
        match self.rest.split_first() {
            Some((first, rest)) => {
                let next = ModelNext { rest, ..self };
                first
                    .wrap_model_call(request, self.state, self.ctx, next)
                    .await
            }
            None => stream_model(self.model, request, self.ctx).await,
        }
    }
}

/// Streams one completion, forwarding deltas as run events, and returns the final message.
async fn stream_model(
    model: &dyn ChatModel,
    request: ModelRequest,
    ctx: &RunContext,
) -> Result<AiMessage, ModelError> {
    let mut stream = tokio::select! {
        _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
        started = model.stream(request) => started?,
    };
    let message_id = crate::messages::new_id("ai");
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
                message.id = message_id;
                if message.model.is_none() {
                    message.model = Some(model.name().to_string());
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
    })
}
