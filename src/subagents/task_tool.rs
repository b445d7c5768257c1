//! The `task` tool: how the lead agent delegates one task to a sub-agent and waits for its
//! result. Bound only to runs with `subagent_enabled`; sub-agents never get it.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::taint;
use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::subagents::executor::{SubagentRunner, TaskRequest};
use crate::subagents::registry::TASK_TOOL;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskArgs {
    /// A short (3-5 word) description of the task, shown to the user while it runs.
    pub description: String,
    /// The task for the sub-agent: complete, specific instructions. It sees nothing of this
    /// conversation but what you write here.
    pub prompt: String,
    /// Which sub-agent type runs the task (see the tool description).
    pub subagent_type: String,
    /// Optional cap on the sub-agent's turns, overriding its type's default.
    #[serde(default)]
    pub max_turns: Option<u32>,
}

pub struct TaskTool {
    runner: Arc<SubagentRunner>,
    description: String,
}

impl TaskTool {
    pub fn new(runner: Arc<SubagentRunner>) -> Self {
        let types: Vec<String> = runner
            .registry()
            .specs()
            .iter()
            .map(|spec| format!("- {}: {}", spec.name, spec.description))
            .collect();
        let description = format!(
            "Delegate one bounded part of the work to a sub-agent, which does it alone, in its \
             own context, and returns its final result (the call waits for it). Use it only \
             when that clearly pays: independent parts running in parallel (several task calls \
             in one response), a sub-agent type suited to the part, or a long investigation \
             that would crowd your context. Do the work yourself when it is quick, depends on \
             other parts, or changes the same files. The sub-agent cannot see this \
             conversation: put everything it needs in `prompt`. Available subagent_type \
             values:\n{}",
            types.join("\n")
        );
        Self {
            runner,
            description,
        }
    }
}

#[async_trait]
impl Tool for TaskTool {
    fn name(&self) -> &str {
        TASK_TOOL
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        schema_for::<TaskArgs>()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: TaskArgs = parse_args(args)?;
        if args.prompt.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "`prompt` is empty; give the sub-agent complete instructions".into(),
            ));
        }
        let request = TaskRequest {
            task_id: ctx.tool_call_id.to_string(),
            description: args.description.trim().to_string(),
            prompt: args.prompt,
            subagent_type: args.subagent_type.trim().to_string(),
            max_turns: args.max_turns,
        };
        let report = self.runner.run(request, ctx.run, ctx.state).await;
        Ok(ToolOutput {
            content: report.text(),
            artifact: Some(report.metadata()),
            // What it read taints this thread too (`TaintMiddleware` keeps parallel tasks' apart).
            update: taint::mark(ctx.state, report.untrusted).unwrap_or_default(),
        })
    }
}
