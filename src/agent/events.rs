//! Run events: the one stream every surface (SSE, chat REPL, channels) consumes.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::messages::{Message, ToolCall, ToolMessage};
use crate::state::ThreadState;

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
    /// Middleware- or tool-defined progress (todos, sub-agent events, …).
    Custom {
        name: String,
        data: Value,
    },
    /// The state after a completed step.
    Values {
        state: Arc<ThreadState>,
    },
    Error {
        code: String,
        message: String,
    },
    /// Last event of every run.
    Finished {
        stop_reason: String,
    },
}

/// Sender side of a run's event stream. Emitting never blocks and never fails the run: a
/// consumer that went away simply stops receiving.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<RunEvent>>,
    values: bool,
}

impl EventSink {
    pub fn disabled() -> Self {
        Self {
            tx: None,
            values: false,
        }
    }

    /// A sink and its receiver. `values` asks for state snapshots after every step.
    pub fn channel(values: bool) -> (Self, mpsc::UnboundedReceiver<RunEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                tx: Some(tx),
                values,
            },
            rx,
        )
    }

    pub fn emit(&self, event: RunEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
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
