//! `FnTool`: a tool from a name, a description and an async closure — for embedders that want a
//! quick capability without a struct, for the benchmark, and for the fakes in tests.

use std::future::Future;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput};

/// A tool whose behaviour is a closure over its JSON arguments.
pub struct FnTool<F> {
    name: String,
    description: String,
    parameters: Value,
    call: F,
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send,
{
    /// A tool taking any JSON object (schema `{"type": "object"}`).
    pub fn new(name: impl Into<String>, description: impl Into<String>, call: F) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}),
            call,
        }
    }

    /// Replaces the argument schema.
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    async fn call(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        (self.call)(args).await
    }
}
