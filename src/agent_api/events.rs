//! Run events: the one stream every surface (SSE, chat REPL, channels) consumes, and the typed
//! reasons a run stops or fails.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::agent_api::task::{CapReason, TaskEnd};
use antler_store::messages::{Message, ToolCall, ToolMessage, Usage};
use antler_store::state::{ThreadState, Todo};

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum RunEvent {
    /// First event of every run.
    Started {
        run_id: String,
        thread_id: String,
    },
    /// A fragment of assistant text, keyed by the AI message it belongs to.
    TextDelta {
        message_id: String,
        delta: String,
    },
    ReasoningDelta {
        message_id: String,
        delta: String,
    },
    /// A message was added to the thread (AI answers, tool results, injected notes).
    Message {
        message: Message,
    },
    ToolStarted {
        call: ToolCall,
    },
    ToolFinished {
        result: ToolMessage,
    },
    /// The plan changed (`write_todos`): the whole new list.
    TodosUpdated {
        todos: Vec<Todo>,
    },
    /// Older messages were summarized; what the summary call cost, metered like the run's own.
    Summarized {
        model: String,
        usage: Usage,
    },
    /// A sub-agent started on a task the lead delegated.
    TaskStarted {
        task_id: String,
        description: String,
        subagent_type: String,
        prompt: String,
    },
    /// A sub-agent wrote its `message_index`-th AI message.
    TaskRunning {
        task_id: String,
        message: Message,
        message_index: usize,
    },
    /// A sub-agent's task ended (boxed: it is the largest event and the rarest).
    TaskEnded(Box<TaskEnd>),
    /// A tool call needs a person's yes: the run parks after this (stop reason
    /// `awaiting_approval`). Boxed like `TaskEnded`.
    ApprovalRequested(Box<crate::agent_api::approval::ApprovalRequest>),
    /// Progress an extension defines, under a name of its own; the built-in progress has the
    /// typed variants above.
    Custom {
        name: String,
        data: Value,
    },
    /// The state after a completed step.
    Values {
        state: Arc<ThreadState>,
        /// The checkpoint it was saved as (the thread head's version; 0: not checkpointed), so
        /// a stream names checkpoints as `/threads/{id}/state/{checkpoint_id}` resolves them.
        version: u64,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// Last event of every run.
    Finished {
        stop_reason: StopReason,
    },
}

/// How a run ended; serialized as its snake_case name in events, answers and thread listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave a final answer.
    Completed,
    /// A hook ended the run to wait for the user (e.g. a clarification question).
    Interrupted,
    RecursionLimit,
    Cancelled,
    Error,
    /// The loop detector forced a final answer.
    LoopCapped,
    /// The token budget forced a final answer.
    TokenCapped,
    /// The run's sub-agent delegations were spent; the model was told and the run ended.
    SubagentLimitCapped,
    /// A tool call waits for a person's decision (`approvals:`); the decision resumes the run.
    AwaitingApproval,
    /// The user's or agent's budget (`budgets:`) was reached before a model call; what the run
    /// produced is kept and the answer says which budget and when it resets.
    BudgetExceeded,
}

impl StopReason {
    /// Every stop reason (the label values of `antler_runs_finished_total`).
    pub const ALL: [StopReason; 10] = [
        StopReason::Completed,
        StopReason::Interrupted,
        StopReason::RecursionLimit,
        StopReason::Cancelled,
        StopReason::Error,
        StopReason::LoopCapped,
        StopReason::TokenCapped,
        StopReason::SubagentLimitCapped,
        StopReason::AwaitingApproval,
        StopReason::BudgetExceeded,
    ];

    /// The snake_case name used in `RunEvent::Finished`, `/runs/wait` and thread status.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::Interrupted => "interrupted",
            StopReason::RecursionLimit => "recursion_limit",
            StopReason::Cancelled => "cancelled",
            StopReason::Error => "error",
            StopReason::LoopCapped => "loop_capped",
            StopReason::TokenCapped => "token_capped",
            StopReason::SubagentLimitCapped => "subagent_limit_capped",
            StopReason::AwaitingApproval => "awaiting_approval",
            StopReason::BudgetExceeded => "budget_exceeded",
        }
    }

    /// The run ended with an answer or a question for the person (possibly forced by a cap).
    pub fn is_answered(self) -> bool {
        matches!(
            self,
            StopReason::Completed
                | StopReason::Interrupted
                | StopReason::LoopCapped
                | StopReason::TokenCapped
                | StopReason::SubagentLimitCapped
                | StopReason::BudgetExceeded
        )
    }
}

impl CapReason {
    /// The cap a sub-agent's run hit, from how it stopped.
    pub fn of(stop: StopReason) -> Option<Self> {
        match stop {
            StopReason::TokenCapped => Some(CapReason::TokenCapped),
            StopReason::RecursionLimit => Some(CapReason::TurnCapped),
            StopReason::LoopCapped => Some(CapReason::LoopCapped),
            _ => None,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a run failed. Surfaces branch on it (an HTTP status per cause), never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The model endpoint could not be reached, or kept refusing with rate limits.
    ModelUnavailable,
    /// The model did not answer in time.
    ModelTimeout,
    /// The model answered, but with an error or a broken stream.
    ModelError,
    MiddlewareError,
    StateError,
    CheckpointError,
    RecursionLimit,
    /// A tool or middleware panicked; the thread keeps its last completed step.
    Panic,
}

impl ErrorCode {
    /// Every error code (the label values of `antler_runs_failed_total`).
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::ModelUnavailable,
        ErrorCode::ModelTimeout,
        ErrorCode::ModelError,
        ErrorCode::MiddlewareError,
        ErrorCode::StateError,
        ErrorCode::CheckpointError,
        ErrorCode::RecursionLimit,
        ErrorCode::Panic,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ModelUnavailable => "model_unavailable",
            ErrorCode::ModelTimeout => "model_timeout",
            ErrorCode::ModelError => "model_error",
            ErrorCode::MiddlewareError => "middleware_error",
            ErrorCode::StateError => "state_error",
            ErrorCode::CheckpointError => "checkpoint_error",
            ErrorCode::RecursionLimit => "recursion_limit",
            ErrorCode::Panic => "panic",
        }
    }

    /// The code of a failed model call.
    pub fn of_model_error(error: &crate::model::ModelError) -> Self {
        use crate::model::ModelError as E;
        match error {
            E::Connect { .. } | E::RateLimited { .. } => ErrorCode::ModelUnavailable,
            E::Timeout { .. } => ErrorCode::ModelTimeout,
            _ => ErrorCode::ModelError,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The receiving end of a run's event stream.
///
/// Events travel boxed. A tokio channel allocates its first block of 32 slots when it is
/// created, so with 200-byte events every run paid 6 KiB per channel before it emitted
/// anything; with boxes that block is 256 bytes, and an event costs only its own size.
#[derive(Debug)]
pub struct RunEvents(mpsc::UnboundedReceiver<Box<RunEvent>>);

impl RunEvents {
    /// The sending half is what an [`EventSink`] or a relay writes into.
    pub fn channel() -> (mpsc::UnboundedSender<Box<RunEvent>>, Self) {
        let (tx, rx) = mpsc::unbounded_channel();
        (tx, Self(rx))
    }

    /// The next event; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<RunEvent> {
        self.0.recv().await.map(|event| *event)
    }

    /// The next event as it travels, for relays that pass it on unopened.
    pub async fn recv_boxed(&mut self) -> Option<Box<RunEvent>> {
        self.0.recv().await
    }

    /// An event already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<RunEvent> {
        self.0.try_recv().ok().map(|event| *event)
    }

    pub fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<RunEvent>> {
        self.0.poll_recv(cx).map(|event| event.map(|event| *event))
    }
}

/// Sender side of a run's event stream. Emitting never blocks and never fails the run: a
/// consumer that went away simply stops receiving.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<Box<RunEvent>>>,
    values: bool,
    /// When the run began, for the run-duration metric.
    created: std::time::Instant,
}

impl EventSink {
    pub fn disabled() -> Self {
        Self {
            tx: None,
            values: false,
            created: std::time::Instant::now(),
        }
    }

    /// A sink and its receiver. `values` asks for state snapshots after every step.
    pub fn channel(values: bool) -> (Self, RunEvents) {
        let (tx, rx) = RunEvents::channel();
        (
            Self {
                tx: Some(tx),
                values,
                created: std::time::Instant::now(),
            },
            rx,
        )
    }

    pub fn emit(&self, event: RunEvent) {
        self.record_metrics(&event);
        if let Some(tx) = &self.tx {
            let _ = tx.send(Box::new(event));
        }
    }

    /// Every run's events pass here, whoever consumes them: the one place run metrics are taken.
    fn record_metrics(&self, event: &RunEvent) {
        match event {
            RunEvent::Started { .. } => crate::metrics::run_started(),
            RunEvent::ToolFinished { result } => crate::metrics::tool_call(
                &result.name,
                result.status == antler_store::messages::ToolStatus::Error,
            ),
            RunEvent::Error { code, .. } => crate::metrics::run_failed(code.as_str()),
            RunEvent::Finished { stop_reason } => {
                crate::metrics::run_finished(stop_reason.as_str(), self.created.elapsed());
            }
            _ => {}
        }
    }

    /// Whether anyone wants `Values` snapshots (cloning the state is skipped otherwise).
    pub fn wants_values(&self) -> bool {
        self.values && self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    pub fn is_enabled(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }
}
