//! `create_agent`: the SDK-level factory (no config file, no globals).
//! PLACEHOLDER (owned by the middleware-chain work): signature only.

use std::sync::Arc;

use crate::agent::{Agent, RuntimeFeatures};
use crate::config::AppConfig;
use crate::middleware::MiddlewareRef;
use crate::model::ChatModel;
use crate::store::Checkpointer;
use crate::tools::ToolRef;

#[derive(Clone, Default)]
pub struct AgentOptions {
    pub system_prompt: Option<String>,
    /// An explicit chain, used as given. Mutually exclusive with `features`.
    pub middleware: Option<Vec<MiddlewareRef>>,
    pub features: Option<RuntimeFeatures>,
    pub extra_middleware: Vec<MiddlewareRef>,
    pub plan_mode: bool,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    pub name: Option<String>,
    pub recursion_limit: Option<u32>,
    /// Settings for the built-in middlewares (defaults when absent).
    pub config: Option<Arc<AppConfig>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentBuildError {
    #[error("{0}")]
    Invalid(String),
}

pub fn create_agent(
    model: Arc<dyn ChatModel>,
    tools: Vec<ToolRef>,
    options: AgentOptions,
) -> Result<Agent, AgentBuildError> {
    let _ = (model, tools, options);
    Err(AgentBuildError::Invalid("not assembled yet".into()))
}
