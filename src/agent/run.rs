//! The agent loop: model call → tool calls → repeat, with hooks, checkpoints and run events.
//!
//! A *step* is one model call (with its `before_model`/`after_model` hooks) or one tool batch.
//! After every step the state is checkpointed, so a crash or a cancellation loses at most the
//! step in flight. The whole turn runs behind a panic boundary: a panicking tool or middleware
//! ends the run with an error, never the process. A failed turn is closed with a hidden record,
//! so the thread's history keeps alternating user and assistant turns.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::join_all;
use tracing::Instrument;

use crate::agent::Agent;
use crate::agent::call_ids::make_call_ids_unique;
use crate::agent::failed_turn::failed_turn_record;
use crate::agent_api::{
    ErrorCode, Flow, HookResult, MiddlewareError, ModelNext, RunContext, RunEvent, StopReason,
    ToolContext, ToolError, ToolNext, ToolResult,
};
use crate::model::{ModelError, ModelRequest, ToolSpec};
use antler_store::StepCheckpoint;
use antler_store::messages::{Message, ToolCall, ToolMessage};
use antler_store::state::{StateChanges, StateError, StateUpdate, ThreadState};

#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The state after the last completed step (what the last checkpoint holds).
    pub state: ThreadState,
    pub stop: StopReason,
    /// Why the run failed, for `Error` and `RecursionLimit`.
    pub error: Option<RunFailure>,
    /// Completed steps (model calls and tool batches) in this run.
    pub steps: u32,
}

/// A run's failure: a code surfaces branch on, and a message that says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFailure {
    pub code: ErrorCode,
    pub message: String,
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// How the inner loop ended; `after_agent` and the final events are handled by the caller.
struct Stop {
    reason: StopReason,
    error: Option<RunFailure>,
}

impl Stop {
    fn new(reason: StopReason) -> Self {
        Self {
            reason,
            error: None,
        }
    }

    fn error(code: ErrorCode, message: String) -> Self {
        Self {
            reason: StopReason::Error,
            error: Some(RunFailure { code, message }),
        }
    }

    fn panicked(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|failure| failure.code == ErrorCode::Panic)
    }
}

impl From<MiddlewareError> for Stop {
    fn from(error: MiddlewareError) -> Self {
        Stop::error(ErrorCode::MiddlewareError, error.to_string())
    }
}

/// Mutable bookkeeping of one run, kept outside the panic boundary so a panic keeps the state of
/// the last applied update.
struct Turn {
    state: ThreadState,
    steps: u32,
    /// What changed since the last checkpoint, so a checkpoint writes only that.
    changes: StateChanges,
}

impl Turn {
    /// Every change to the state goes through here, so the checkpointer learns about it.
    fn apply(&mut self, update: StateUpdate) -> Result<(), StateError> {
        self.changes.record(&update);
        self.state.apply(update)
    }

    fn apply_hook(&mut self, result: HookResult) -> Result<Flow, Stop> {
        if !result.update.is_empty() {
            self.apply(result.update)
                .map_err(|e| Stop::error(ErrorCode::StateError, e.to_string()))?;
        }
        Ok(result.flow)
    }
}

impl Agent {
    /// Runs one turn: `input` is appended to `state`, then the model and tools alternate until a
    /// final answer, an interrupt, the recursion limit, cancellation or an error. With a
    /// checkpointer, `state` must be the thread's state as the checkpointer last saved it (what
    /// [`Checkpointer::latest`](antler_store::Checkpointer::latest) returns, or empty for a new
    /// thread): checkpoints record what the run changes relative to it.
    pub async fn run(
        &self,
        state: ThreadState,
        input: Vec<Message>,
        ctx: &RunContext,
    ) -> RunOutcome {
        ctx.events.emit(RunEvent::Started {
            run_id: ctx.run_id.clone(),
            thread_id: ctx.thread_id.clone(),
        });
        let mut turn = Turn {
            state,
            steps: 0,
            changes: StateChanges::new(),
        };
        let body = AssertUnwindSafe(self.run_steps(&mut turn, input, ctx)).catch_unwind();
        let mut stop = match body.await {
            Ok(stop) => stop,
            Err(panic) => Stop::error(
                ErrorCode::Panic,
                format!(
                    "the run stopped because a tool or middleware panicked: {}; the thread keeps \
                     the last completed step",
                    panic_message(panic.as_ref())
                ),
            ),
        };
        if stop.reason != StopReason::Cancelled && !stop.panicked() {
            let after = AssertUnwindSafe(self.after_agent(&mut turn, ctx)).catch_unwind();
            match after.await {
                Ok(Ok(())) => {}
                Ok(Err(failed)) if stop.error.is_none() => stop = failed,
                Ok(Err(_)) => {}
                Err(panic) => {
                    stop = Stop::error(
                        ErrorCode::Panic,
                        format!(
                            "an after_agent hook panicked: {}",
                            panic_message(panic.as_ref())
                        ),
                    )
                }
            }
        }
        if stop.reason != StopReason::Cancelled
            && let Some(failure) = &stop.error
        {
            self.record_failure(&mut turn, failure, ctx).await;
        }
        if let Some(failure) = &stop.error {
            ctx.events.emit(RunEvent::Error {
                code: failure.code,
                message: failure.message.clone(),
            });
        }
        // A cap forced the final answer: say so instead of a plain `Completed`.
        let stop_reason = match (stop.reason, ctx.stop_reason()) {
            (StopReason::Completed, Some(cap)) => cap,
            (reason, _) => reason,
        };
        ctx.events.emit(RunEvent::Finished { stop_reason });
        RunOutcome {
            state: turn.state,
            stop: stop_reason,
            error: stop.error,
            steps: turn.steps,
        }
    }

    async fn run_steps(&self, turn: &mut Turn, input: Vec<Message>, ctx: &RunContext) -> Stop {
        // A run that continues a decided approval request: the calls the last AI message left
        // unanswered run first (the approval middleware sees their decisions), then the model.
        // (Other runs without input continue a checkpointed question, as before.)
        let resuming = input.is_empty() && ctx.options.resume_approval.is_some();
        let resumed = if resuming {
            unanswered_calls(&turn.state)
        } else {
            Vec::new()
        };
        if resuming && resumed.is_empty() {
            // Nothing to continue (a decision resumed twice): no model call for nothing.
            return Stop::new(StopReason::Completed);
        }
        if !input.is_empty() {
            let update = StateUpdate {
                messages: input,
                ..Default::default()
            };
            if let Err(e) = turn.apply(update) {
                return Stop::error(ErrorCode::StateError, e.to_string());
            }
        }
        for middleware in &self.middleware {
            let result = match middleware.before_agent(&turn.state, ctx).await {
                Ok(result) => result,
                Err(e) => return e.into(),
            };
            match turn.apply_hook(result) {
                Ok(Flow::End) => return self.end_early(turn, ctx, StopReason::Interrupted).await,
                Ok(_) => {}
                Err(stop) => return stop,
            }
        }
        // The person's message is durable before the model is called: a cancelled or crashed
        // run never loses what was asked.
        if let Some(stop) = self.checkpoint(turn, ctx).await {
            return stop;
        }
        if !resumed.is_empty() {
            if let Some(stop) = self.check_limits(turn, ctx) {
                return stop;
            }
            if let Some(stop) = self.tool_step(turn, &resumed, ctx).await {
                return stop;
            }
        }
        let tool_specs: Arc<[Arc<ToolSpec>]> = self.tools.iter().map(|t| t.spec()).collect();
        loop {
            if let Some(stop) = self.check_limits(turn, ctx) {
                return stop;
            }
            match self.model_step(turn, &tool_specs, ctx).await {
                StepEnd::Continue => {}
                StepEnd::Retry => continue,
                StepEnd::Stop(stop) => return stop,
            }
            let calls = match turn.state.last_ai() {
                Some(ai) if !ai.tool_calls.is_empty() => ai.tool_calls.clone(),
                _ => return Stop::new(StopReason::Completed),
            };
            if let Some(stop) = self.check_limits(turn, ctx) {
                return stop;
            }
            if let Some(stop) = self.tool_step(turn, &calls, ctx).await {
                return stop;
            }
        }
    }

    fn check_limits(&self, turn: &Turn, ctx: &RunContext) -> Option<Stop> {
        if ctx.cancel.is_cancelled() {
            return Some(Stop::new(StopReason::Cancelled));
        }
        if turn.steps >= self.recursion_limit {
            return Some(Stop {
                reason: StopReason::RecursionLimit,
                error: Some(RunFailure {
                    code: ErrorCode::RecursionLimit,
                    message: format!(
                        "the run stopped after {} steps without a final answer (recursion_limit); \
                         raise recursion_limit in the run options or config, or split the task",
                        self.recursion_limit
                    ),
                }),
            });
        }
        None
    }

    /// `before_model` hooks, the model call through the wrap chain, then `after_model` hooks.
    async fn model_step(
        &self,
        turn: &mut Turn,
        tool_specs: &Arc<[Arc<ToolSpec>]>,
        ctx: &RunContext,
    ) -> StepEnd {
        for middleware in &self.middleware {
            let result = match middleware.before_model(&turn.state, ctx).await {
                Ok(result) => result,
                Err(e) => return StepEnd::Stop(e.into()),
            };
            match turn.apply_hook(result) {
                Ok(Flow::End) => {
                    return StepEnd::Stop(self.end_early(turn, ctx, StopReason::Interrupted).await);
                }
                Ok(_) => {}
                Err(stop) => return StepEnd::Stop(stop),
            }
        }
        let request = ModelRequest {
            system: self.system_prompt.clone(),
            messages: turn.state.messages.clone(),
            tools: tool_specs.clone(),
            thinking_enabled: ctx.options.thinking(),
            reasoning_effort: ctx.options.reasoning_effort.clone(),
            ..Default::default()
        };
        let call =
            ModelNext::new(&self.middleware, self.model.as_ref(), &turn.state, ctx).call(request);
        let called = std::time::Instant::now();
        let answer = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return StepEnd::Stop(Stop::new(StopReason::Cancelled)),
            answer = call => answer,
        };
        crate::metrics::model_call(self.model.name(), called.elapsed());
        let message = match answer {
            Ok(mut ai) => {
                make_call_ids_unique(&mut ai, &turn.state.messages);
                Message::Ai(ai)
            }
            Err(ModelError::Cancelled) => return StepEnd::Stop(Stop::new(StopReason::Cancelled)),
            Err(ModelError::BudgetExceeded { notice }) => {
                return StepEnd::Stop(self.stop_at_budget(turn, ctx, notice).await);
            }
            Err(e) => {
                return StepEnd::Stop(Stop::error(ErrorCode::of_model_error(&e), e.to_string()));
            }
        };
        if let Err(e) = turn.apply(StateUpdate::message(message.clone())) {
            return StepEnd::Stop(Stop::error(ErrorCode::StateError, e.to_string()));
        }
        ctx.events.emit(RunEvent::Message { message });
        let mut flow = Flow::Continue;
        for middleware in self.middleware.iter().rev() {
            let result = match middleware.after_model(&turn.state, ctx).await {
                Ok(result) => result,
                Err(e) => return StepEnd::Stop(e.into()),
            };
            match turn.apply_hook(result) {
                Ok(Flow::Continue) => {}
                Ok(jump) => {
                    flow = jump;
                    break;
                }
                Err(stop) => return StepEnd::Stop(stop),
            }
        }
        if let Some(stop) = self.complete_step(turn, ctx).await {
            return StepEnd::Stop(stop);
        }
        match flow {
            Flow::End => StepEnd::Stop(Stop::new(StopReason::Interrupted)),
            Flow::RetryModel => StepEnd::Retry,
            Flow::Continue => StepEnd::Continue,
        }
    }

    /// Runs one batch of tool calls concurrently; results are appended in call order.
    async fn tool_step(
        &self,
        turn: &mut Turn,
        calls: &[ToolCall],
        ctx: &RunContext,
    ) -> Option<Stop> {
        for call in calls {
            ctx.events
                .emit(RunEvent::ToolStarted { call: call.clone() });
        }
        let state = &turn.state;
        let batch = join_all(calls.iter().map(|call| async move {
            let tool_ctx = ToolContext {
                run: ctx,
                state,
                tool_call_id: &call.id,
            };
            let span = crate::telemetry::spans::tool_call(call);
            let result = ToolNext::new(&self.middleware, &self.tools)
                .call(call, &tool_ctx)
                .instrument(span.clone())
                .await;
            let result = result
                .unwrap_or_else(|error| ToolResult::message(tool_error_message(call, &error)));
            crate::telemetry::spans::record_tool_result(&span, &result.message);
            result
        }));
        let results = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => return Some(Stop::new(StopReason::Cancelled)),
            results = batch => results,
        };
        let mut update = StateUpdate::default();
        let mut end_run = false;
        let mut parked = Vec::new();
        for result in &results {
            // A parked call stays unanswered in the thread: its request holds it.
            if let Some(request) = &result.parked {
                parked.push(request.clone());
                continue;
            }
            end_run |= result.end_run;
            update.merge(StateUpdate::message(Message::Tool(result.message.clone())));
            update.merge(result.update.clone());
        }
        if let Err(e) = turn.apply(update) {
            return Some(Stop::error(ErrorCode::StateError, e.to_string()));
        }
        for result in results.into_iter().filter(|r| r.parked.is_none()) {
            ctx.events.emit(RunEvent::ToolFinished {
                result: result.message.clone(),
            });
            ctx.events.emit(RunEvent::Message {
                message: Message::Tool(result.message),
            });
        }
        if let Some(stop) = self.complete_step(turn, ctx).await {
            return Some(stop);
        }
        if !parked.is_empty() {
            // The requests are stored (by the middleware) and the other results checkpointed:
            // only now may a surface post the request and a decision resume it. A request
            // parked again by a resume was announced by the run that made it.
            for request in parked {
                if request.run_id == ctx.run_id {
                    ctx.events.emit(RunEvent::ApprovalRequested(request));
                }
            }
            return Some(Stop::new(StopReason::AwaitingApproval));
        }
        end_run.then(|| Stop::new(StopReason::Interrupted))
    }

    /// Ends the run where a budget stopped its next model call: the answer says which budget
    /// and when it resets, and everything the run did before stays (checkpointed).
    async fn stop_at_budget(&self, turn: &mut Turn, ctx: &RunContext, notice: String) -> Stop {
        let message = Message::Ai(antler_store::messages::AiMessage {
            id: antler_store::messages::new_id("ai").into(),
            content: notice.into(),
            model: Some(self.model.name().into()),
            ..Default::default()
        });
        if let Err(e) = turn.apply(StateUpdate::message(message.clone())) {
            return Stop::error(ErrorCode::StateError, e.to_string());
        }
        ctx.events.emit(RunEvent::Message { message });
        match self.complete_step(turn, ctx).await {
            Some(stop) => stop,
            None => Stop::new(StopReason::BudgetExceeded),
        }
    }

    /// Ends the run from a `before_*` hook: what the hooks changed is still checkpointed.
    async fn end_early(&self, turn: &mut Turn, ctx: &RunContext, reason: StopReason) -> Stop {
        match self.checkpoint(turn, ctx).await {
            Some(stop) => stop,
            None => Stop::new(reason),
        }
    }

    /// Counts the step, checkpoints it and publishes the new state.
    async fn complete_step(&self, turn: &mut Turn, ctx: &RunContext) -> Option<Stop> {
        turn.steps += 1;
        self.checkpoint(turn, ctx).await
    }

    async fn checkpoint(&self, turn: &mut Turn, ctx: &RunContext) -> Option<Stop> {
        let mut version = 0;
        if let Some(checkpointer) = &self.checkpointer {
            let checkpoint = StepCheckpoint {
                thread_id: &ctx.thread_id,
                run_id: &ctx.run_id,
                step: u64::from(turn.steps),
                state: &turn.state,
                changes: &turn.changes,
            };
            match checkpointer.save(checkpoint).await {
                Ok(saved) => version = saved,
                Err(e) => {
                    return Some(Stop::error(
                        ErrorCode::CheckpointError,
                        format!("could not save the thread state: {e}"),
                    ));
                }
            }
            turn.changes.clear();
        }
        if ctx.events.wants_values() {
            ctx.events.emit(RunEvent::Values {
                state: std::sync::Arc::new(turn.state.clone()),
                version,
            });
        }
        None
    }

    /// Closes a failed turn with a hidden record (see [`failed_turn`](crate::agent::failed_turn))
    /// and checkpoints it. Best effort: the run has failed already, so a failure here is logged.
    async fn record_failure(&self, turn: &mut Turn, failure: &RunFailure, ctx: &RunContext) {
        let Some(record) = failed_turn_record(&turn.state.messages, failure.code, &failure.message)
        else {
            return;
        };
        if let Err(error) = turn.apply(StateUpdate::message(Message::Ai(record))) {
            tracing::warn!(%error, thread_id = %ctx.thread_id, "Could not record the failed turn");
            return;
        }
        if let Some(stop) = self.checkpoint(turn, ctx).await {
            let detail = stop.error.map(|e| e.message).unwrap_or_default();
            tracing::warn!(thread_id = %ctx.thread_id, %detail, "Could not save the record of the failed turn");
        }
    }

    async fn after_agent(&self, turn: &mut Turn, ctx: &RunContext) -> Result<(), Stop> {
        let mut changed = false;
        for middleware in self.middleware.iter().rev() {
            let result = middleware.after_agent(&turn.state, ctx).await?;
            changed |= !result.update.is_empty();
            turn.apply_hook(result)?;
        }
        if changed && let Some(stop) = self.checkpoint(turn, ctx).await {
            return Err(stop);
        }
        Ok(())
    }
}

enum StepEnd {
    Continue,
    Retry,
    Stop(Stop),
}

/// The calls of the thread's last AI message that have no result yet (a parked run's).
pub fn unanswered_calls(state: &ThreadState) -> Vec<ToolCall> {
    let Some(at) = state
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::Ai(_)))
    else {
        return Vec::new();
    };
    let Some(Message::Ai(ai)) = state.messages.get(at) else {
        return Vec::new();
    };
    let answered: std::collections::HashSet<&str> = state.messages[at + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool(tool) => Some(tool.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    ai.tool_calls
        .iter()
        .filter(|call| !answered.contains(call.id.as_str()))
        .cloned()
        .collect()
}

/// The error text the model reads when a tool failed and no middleware handled it.
fn tool_error_message(call: &ToolCall, error: &ToolError) -> ToolMessage {
    ToolMessage::error(
        call,
        format!(
            "Error: Tool '{}' failed with {}: {error}. Continue with available context, or choose \
             an alternative tool.",
            call.name,
            error.kind()
        ),
    )
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
