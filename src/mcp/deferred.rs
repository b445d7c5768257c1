//! Deferred tools (`tool_search.enabled`): MCP tools are listed by name in the prompt but their
//! schemas stay out of model requests until the model finds them with `tool_search`; found
//! tools are promoted in the thread's state (`promoted_tools`) and stay available on later
//! turns. A call to a tool that was never promoted is refused with what to do instead.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent_api::{
    Middleware, ModelNext, RunContext, Tool, ToolContext, ToolError, ToolNext, ToolOutput, ToolRef,
    ToolResult, parse_args, schema_for,
};
use crate::model::{ModelError, ModelRequest, ToolSpec};
use antler_store::messages::{AiMessage, ToolCall};
use antler_store::state::{StateUpdate, ThreadState};

pub const TOOL_SEARCH: &str = "tool_search";
const DEFAULT_RESULTS: usize = 5;
const MAX_RESULTS: usize = 20;

/// The deferred tools of one run: their names and specs.
pub struct DeferredCatalog {
    specs: Vec<Arc<ToolSpec>>,
    names: BTreeSet<String>,
}

impl DeferredCatalog {
    pub fn new(tools: &[ToolRef]) -> Arc<Self> {
        let specs: Vec<Arc<ToolSpec>> = tools.iter().map(|t| t.spec()).collect();
        let names = specs.iter().map(|s| s.name.clone()).collect();
        Arc::new(Self { specs, names })
    }

    pub fn names(&self) -> Vec<String> {
        self.names.iter().cloned().collect()
    }

    fn is_hidden(&self, name: &str, state: &ThreadState) -> bool {
        self.names.contains(name) && !state.promoted_tools.contains(name)
    }

    /// `select:a,b` picks by exact name; otherwise tools are ranked by how many query words
    /// their name and description contain (name hits count double).
    fn search(&self, query: &str, limit: usize) -> Vec<&Arc<ToolSpec>> {
        let query = query.trim();
        if let Some(list) = query.strip_prefix("select:") {
            let wanted: Vec<&str> = list.split(',').map(str::trim).collect();
            return self
                .specs
                .iter()
                .filter(|s| wanted.contains(&s.name.as_str()))
                .take(limit)
                .collect();
        }
        let words: Vec<String> = query
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        let mut scored: Vec<(usize, &Arc<ToolSpec>)> = self
            .specs
            .iter()
            .filter_map(|spec| {
                let name = spec.name.to_lowercase();
                let description = spec.description.to_lowercase();
                let score: usize = words
                    .iter()
                    .map(|w| {
                        2 * usize::from(name.contains(w.as_str()))
                            + usize::from(description.contains(w.as_str()))
                    })
                    .sum();
                (score > 0 || name == query.to_lowercase()).then_some((score, spec))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        scored.into_iter().take(limit).map(|(_, s)| s).collect()
    }
}

#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// Keywords describing what you need, a tool name, or `select:name1,name2` for exact names.
    query: String,
    /// How many tools to return (default 5, at most 20).
    #[serde(default)]
    max_results: Option<usize>,
}

/// `tool_search`: finds deferred tools and makes them callable.
pub struct ToolSearchTool {
    catalog: Arc<DeferredCatalog>,
}

impl ToolSearchTool {
    pub fn new(catalog: Arc<DeferredCatalog>) -> Self {
        Self { catalog }
    }
}

#[async_trait]
impl Tool for ToolSearchTool {
    fn name(&self) -> &str {
        TOOL_SEARCH
    }

    fn description(&self) -> &str {
        "Find deferred tools (listed in <available-deferred-tools>) by keywords or name, or with `select:name1,name2`. The tools found are loaded with their full schemas and can be called from your next response on."
    }

    fn parameters(&self) -> Value {
        schema_for::<SearchArgs>()
    }

    async fn call(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: SearchArgs = parse_args(args)?;
        let limit = args
            .max_results
            .unwrap_or(DEFAULT_RESULTS)
            .clamp(1, MAX_RESULTS);
        let found = self.catalog.search(&args.query, limit);
        if found.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No deferred tool matches {:?}. The deferred tools are: {}",
                args.query,
                self.catalog.names().join(", ")
            )));
        }
        let listing: Vec<Value> = found
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "parameters": s.parameters}))
            .collect();
        let promoted: Vec<String> = found.iter().map(|s| s.name.clone()).collect();
        let mut output = ToolOutput::text(format!(
            "Loaded {} tool(s); you can call them now:\n{}",
            promoted.len(),
            serde_json::to_string_pretty(&listing).unwrap_or_default()
        ));
        output.update = StateUpdate {
            promoted_tools: promoted,
            ..Default::default()
        };
        Ok(output)
    }
}

/// Hides deferred schemas from model requests and refuses calls to unpromoted tools.
pub struct DeferredToolsMiddleware {
    catalog: Arc<DeferredCatalog>,
}

impl DeferredToolsMiddleware {
    pub fn new(catalog: Arc<DeferredCatalog>) -> Self {
        Self { catalog }
    }
}

#[async_trait]
impl Middleware for DeferredToolsMiddleware {
    fn name(&self) -> &str {
        "DeferredToolsMiddleware"
    }

    /// `tool_search` comes with the middleware: one is useless without the other.
    fn tools(&self) -> Vec<ToolRef> {
        vec![Arc::new(ToolSearchTool::new(self.catalog.clone()))]
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        if request
            .tools
            .iter()
            .any(|spec| self.catalog.is_hidden(&spec.name, state))
        {
            request.tools = request
                .tools
                .iter()
                .filter(|spec| !self.catalog.is_hidden(&spec.name, state))
                .cloned()
                .collect();
        }
        next.call(request).await
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        if self.catalog.is_hidden(&call.name, ctx.state) {
            return Err(ToolError::Denied(format!(
                "`{}` is a deferred tool whose schema is not loaded yet; call {TOOL_SEARCH} with query \"select:{}\" first, then call it",
                call.name, call.name
            )));
        }
        next.call(call, ctx).await
    }
}

#[cfg(test)]
#[path = "deferred_tests.rs"]
mod tests;
