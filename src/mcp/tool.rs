//! [`McpTool`]: one tool of an MCP server as an agent tool (group `mcp`).

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use crate::agent_api::taint::{TaintSource, UntrustedOutput};
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput};
use crate::mcp::result::to_tool_output;
use crate::mcp::server::ServerSlot;

/// The tool group MCP tools belong to: a custom agent with `tool_groups` sees them only when
/// the list names `mcp`.
pub const MCP_GROUP: &str = "mcp";

pub struct McpTool {
    server: Arc<ServerSlot>,
    exposed: String,
    remote: String,
    description: String,
    schema: Value,
}

impl McpTool {
    pub(crate) fn new(server: Arc<ServerSlot>, exposed: String, tool: rmcp::model::Tool) -> Self {
        let mut description = tool
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .unwrap_or("")
            .to_string();
        if description.is_empty() {
            description = format!(
                "Tool `{}` of the MCP server `{}`.",
                tool.name, server.config.name
            );
        }
        let schema = Value::Object((*tool.input_schema).clone());
        Self {
            server,
            exposed,
            remote: tool.name.to_string(),
            description,
            schema,
        }
    }

    pub fn server_name(&self) -> &str {
        &self.server.config.name
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.exposed
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn group(&self) -> Option<&str> {
        Some(MCP_GROUP)
    }

    fn untrusted_output(&self) -> Option<UntrustedOutput> {
        let config = &self.server.config;
        (!config.trusted).then(|| UntrustedOutput::Fixed(TaintSource::new("mcp", &config.name)))
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "expected a JSON object of arguments, got {other}"
                )));
            }
        };
        let server = &self.server.config.name;
        let peer = self.server.peer().await.map_err(|e| {
            ToolError::Failed(format!("the MCP server `{server}` is unavailable: {e}"))
        })?;
        let mut params = CallToolRequestParams::new(self.remote.clone());
        params.arguments = arguments;
        let timeout = self.server.config.tool_call_timeout;
        let result = tokio::select! {
            result = tokio::time::timeout(timeout, peer.call_tool(params)) => result,
            () = ctx.run.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        match result {
            Err(_) => Err(ToolError::Timeout(timeout)),
            Ok(Err(error)) => {
                let closed = matches!(
                    error,
                    rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
                ) || peer.is_transport_closed();
                if closed {
                    self.server.drop_session().await;
                    return Err(ToolError::Failed(format!(
                        "the MCP server `{server}` went away during the call ({error}); it is restarted on the next call"
                    )));
                }
                Err(ToolError::Failed(format!(
                    "the MCP server `{server}` returned an error: {error}"
                )))
            }
            Ok(Ok(result)) => to_tool_output(result, ctx).await,
        }
    }
}
