//! The agent: a model, its tools and a middleware chain, run as a loop over a thread's state.
//!
//! `create_agent` (in `factory`) is the SDK-level constructor; `Agent::run` (in `run`) is the
//! loop: model call → tool calls → repeat until a final answer, an interrupt or the recursion
//! limit, checkpointing after every step.

pub mod events;
pub mod factory;
pub mod features;
pub mod next;
pub mod options;
pub mod run;

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::config::AppConfig;
use crate::middleware::MiddlewareRef;
use crate::model::ChatModel;
use crate::store::Checkpointer;
use crate::tools::ToolRef;

pub use events::{EventSink, RunEvent};
pub use factory::{AgentBuildError, AgentOptions, create_agent};
pub use features::{Feature, RuntimeFeatures};
pub use options::RunOptions;
pub use run::{RunOutcome, StopReason};

/// Default `recursion_limit` of a run (model + tool steps), as in DeerFlow.
pub const DEFAULT_RECURSION_LIMIT: u32 = 100;

/// A built agent. Cheap to construct per run: it only holds shared handles.
pub struct Agent {
    pub name: String,
    pub model: Arc<dyn ChatModel>,
    pub tools: Vec<ToolRef>,
    pub middleware: Vec<MiddlewareRef>,
    pub system_prompt: Option<String>,
    pub recursion_limit: u32,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
}

/// Everything a hook or tool may know about the run it is part of; passed explicitly.
pub struct RunContext {
    pub thread_id: String,
    pub run_id: String,
    pub user_id: String,
    pub agent_name: Option<String>,
    pub options: RunOptions,
    pub cancel: CancellationToken,
    pub events: EventSink,
    /// The configuration this run uses: the live config, or a request-scoped override that
    /// sub-agents inherit (DeerFlow's ContextVar override, made explicit).
    pub config: Arc<AppConfig>,
    /// Values hooks leave for the loop and the surfaces, e.g. why the run stopped early.
    pub slots: Mutex<RunSlots>,
}

#[derive(Clone, Debug, Default)]
pub struct RunSlots {
    /// Set by a middleware that capped the run (`loop_capped`, `token_capped`, …).
    pub stop_reason: Option<String>,
}

impl RunContext {
    /// A context with fresh ids and no event consumer; handy for tests and benches.
    pub fn new(
        thread_id: impl Into<String>,
        user_id: impl Into<String>,
        config: Arc<AppConfig>,
    ) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: uuid::Uuid::new_v4().to_string(),
            user_id: user_id.into(),
            agent_name: None,
            options: RunOptions::default(),
            cancel: CancellationToken::new(),
            events: EventSink::disabled(),
            config,
            slots: Mutex::new(RunSlots::default()),
        }
    }

    pub fn set_stop_reason(&self, reason: &str) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.stop_reason = Some(reason.to_string());
        }
    }

    pub fn stop_reason(&self) -> Option<String> {
        self.slots.lock().ok().and_then(|s| s.stop_reason.clone())
    }
}
