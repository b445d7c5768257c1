//! `bash(description, command)`: one shell command in the thread's sandbox.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::tools::builtin::{SandboxAccess, ToolMeta, error_text, truncate_middle};

/// Arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct BashArgs {
    /// Explain why you are running this command in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// The bash command to run. Use absolute paths under /mnt/user-data.
    pub(crate) command: String,
}

pub struct BashTool {
    meta: ToolMeta,
    access: SandboxAccess,
    /// Overrides `sandbox.bash_output_max_chars`.
    max_output_chars: Option<usize>,
    /// Overrides `sandbox.bash_command_timeout`.
    timeout: Option<Duration>,
}

impl BashTool {
    pub fn new(
        meta: ToolMeta,
        access: SandboxAccess,
        max_output_chars: Option<usize>,
        timeout: Option<Duration>,
    ) -> Self {
        Self {
            meta,
            access,
            max_output_chars,
            timeout,
        }
    }
}

#[async_trait]
impl Tool for BashTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Execute a bash command in the sandbox. The thread's files are at /mnt/user-data/workspace \
         (scratch work), /mnt/user-data/uploads (user uploads) and /mnt/user-data/outputs (final \
         deliverables); skills are read-only at /mnt/skills. Long output is shortened in the middle."
    }

    fn parameters(&self) -> Value {
        schema_for::<BashArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: BashArgs = parse_args(args)?;
        let (sandbox, update) = self.access.sandbox(ctx).await?;
        let config = &ctx.run.config.sandbox;
        let timeout = self
            .timeout
            .unwrap_or_else(|| Duration::from_secs(config.bash_command_timeout.max(1)));
        let max_chars = self
            .max_output_chars
            .unwrap_or(config.bash_output_max_chars);
        let text = match sandbox
            .execute_command(&args.command, &[], Some(timeout))
            .await
        {
            Ok(output) if output.timed_out => {
                let partial = output.to_text();
                let note = format!(
                    "Error: Command timed out after {} seconds and was killed. Run long tasks in the background or split them up.",
                    timeout.as_secs()
                );
                if partial == "(no output)" {
                    note
                } else {
                    format!("{partial}\n{note}")
                }
            }
            Ok(output) => output.to_text(),
            Err(error) => error_text(&error),
        };
        Ok(ToolOutput {
            content: truncate_middle(&text, max_chars),
            update,
            artifact: None,
        })
    }
}
