//! The agent: a model, its tools and a middleware chain, run as a loop over a thread's state.
//!
//! `create_agent` (in `factory`) is the SDK-level constructor; `Agent::run` (in `run`) is the
//! loop: model call → tool calls → repeat until a final answer, an interrupt or the recursion
//! limit, checkpointing after every step. The contracts the loop drives (`RunContext`, `Tool`,
//! `Middleware`, `RunEvent`, …) live in [`crate::agent_api`].

mod call_ids;
pub mod factory;
pub mod failed_turn;
pub mod features;
pub mod run;

use std::sync::Arc;

use crate::agent_api::{MiddlewareRef, ToolRef};
use crate::model::ChatModel;
use antler_store::Checkpointer;

pub use factory::{AgentBuildError, AgentOptions, create_agent};
pub use features::{Feature, RuntimeFeatures};
pub use run::{RunFailure, RunOutcome};

/// Default `recursion_limit` of a run (model + tool steps), as in DeerFlow.
pub const DEFAULT_RECURSION_LIMIT: u32 = 100;

/// A built agent. Cheap to construct per run: it only holds shared handles.
pub struct Agent {
    pub name: String,
    pub model: Arc<dyn ChatModel>,
    pub tools: Vec<ToolRef>,
    pub middleware: Vec<MiddlewareRef>,
    pub system_prompt: Option<Arc<str>>,
    pub recursion_limit: u32,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
}
