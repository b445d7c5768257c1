//! The `Tool` contract: what the model can call, with JSON-schema arguments and an explicit
//! context.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent_api::ToolContext;
use crate::agent_api::taint::UntrustedOutput;
use crate::model::ToolSpec;
use antler_store::state::StateUpdate;

/// A capability the model may invoke. Closed by default: an agent only sees the tools it is given.
#[async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object (generate it with [`schema_for`]).
    fn parameters(&self) -> Value;
    /// Tool group (`web`, `file:read`, `file:write`, `bash`, …) used by agents' `tool_groups`.
    fn group(&self) -> Option<&str> {
        None
    }
    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError>;

    /// Where this tool's results come from when anyone outside could have shaped them (a web
    /// page, an MCP server's output): they reach the model inside an `<untrusted>` marker and
    /// mark the thread (`middleware::taint`). `None`: the workspace's own results.
    fn untrusted_output(&self) -> Option<UntrustedOutput> {
        None
    }

    /// What the model is shown. Building it generates the JSON schema (about a hundred
    /// allocations); tools in a registry are wrapped in [`MemoSpec`] to do that once.
    fn spec(&self) -> Arc<ToolSpec> {
        Arc::new(ToolSpec {
            name: self.name().to_string(),
            description: self.description().to_string(),
            parameters: self.parameters().into(),
        })
    }
}

/// A tool with its spec built once. Specs go into every model request of every run; without
/// this, each run rebuilt every tool's schema (measured: ~60 KiB of short-lived allocations a
/// run, most of a run's footprint while it waits for the model).
pub struct MemoSpec {
    inner: ToolRef,
    spec: Arc<ToolSpec>,
}

impl MemoSpec {
    /// Builds `tool`'s spec now, once.
    pub fn wrap(tool: ToolRef) -> ToolRef {
        let spec = tool.spec();
        Arc::new(Self { inner: tool, spec })
    }
}

#[async_trait]
impl Tool for MemoSpec {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn parameters(&self) -> Value {
        Value::clone(&self.spec.parameters)
    }

    fn group(&self) -> Option<&str> {
        self.inner.group()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        self.inner.call(args, ctx).await
    }

    fn untrusted_output(&self) -> Option<UntrustedOutput> {
        self.inner.untrusted_output()
    }

    fn spec(&self) -> Arc<ToolSpec> {
        self.spec.clone()
    }
}

/// A tool's successful result: text for the model plus an optional state change.
#[derive(Debug, Default)]
pub struct ToolOutput {
    pub content: String,
    pub update: StateUpdate,
    /// Structured payload for surfaces; never sent to the model.
    pub artifact: Option<Value>,
}

impl ToolOutput {
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Default::default()
        }
    }
}

/// Why a tool call failed. The loop turns these into error tool messages the model can read.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("{0}")]
    Failed(String),
    #[error("denied: {0}")]
    Denied(String),
    #[error("tool '{0}' does not exist; call one of the tools you were given")]
    Unknown(String),
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error("cancelled")]
    Cancelled,
}

impl ToolError {
    /// Short kind name used in the error text shown to the model.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidArguments(_) => "InvalidArguments",
            ToolError::Failed(_) => "ToolFailure",
            ToolError::Denied(_) => "PermissionDenied",
            ToolError::Unknown(_) => "UnknownTool",
            ToolError::Timeout(_) => "Timeout",
            ToolError::Cancelled => "Cancelled",
        }
    }
}

/// JSON Schema for an argument struct, as the model sees it (see [`tool_schema`]): inlined,
/// in declared order, plain.
///
/// [`tool_schema`]: crate::agent_api::tool_schema
pub fn schema_for<T: JsonSchema + 'static>() -> Value {
    use std::any::TypeId;
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    // Generating a schema costs far more than cloning it, and every run asks every tool for its
    // schema: generate once per argument type.
    static CACHE: OnceLock<Mutex<HashMap<TypeId, Value>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(cached) = cache
        .lock()
        .ok()
        .and_then(|c| c.get(&TypeId::of::<T>()).cloned())
    {
        return cached;
    }
    let value = crate::agent_api::tool_schema::generate::<T>();
    if let Ok(mut cache) = cache.lock() {
        cache.insert(TypeId::of::<T>(), value.clone());
    }
    value
}

/// Parses tool arguments into their typed struct with an error message the model can act on.
pub fn parse_args<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

pub type ToolRef = Arc<dyn Tool>;

/// Merges tool lists: the first occurrence of a name wins (user tools before injected ones).
pub fn dedupe_tools(tools: impl IntoIterator<Item = ToolRef>) -> Vec<ToolRef> {
    let mut seen = std::collections::HashSet::new();
    tools
        .into_iter()
        .filter(|t| seen.insert(t.name().to_string()))
        .collect()
}
