//! `bash(description, command)`: one shell command in the thread's sandbox.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::sandbox::QuotaBreach;
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
    /// Longer output is shortened in the middle; 0 = unlimited.
    max_output_chars: usize,
    /// The command's process group is killed after this long.
    timeout: Duration,
}

impl BashTool {
    /// Limits come from the tool's config entry, else `sandbox.bash_output_max_chars` and
    /// `sandbox.bash_command_timeout` (the registry resolves them when it builds the tool).
    pub fn new(
        meta: ToolMeta,
        access: SandboxAccess,
        max_output_chars: usize,
        timeout: Duration,
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
         deliverables); skills are read-only at /mnt/skills. Long output is shortened in the middle. \
         Every process a command starts ends with it (no background jobs), and the thread's files \
         share a disk quota."
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
        let (timeout, max_chars) = (self.timeout, self.max_output_chars);
        let text = match sandbox
            .execute_command(&args.command, &[], Some(timeout))
            .await
        {
            Ok(output) => {
                let note = if output.timed_out {
                    Some(timeout_note(timeout))
                } else {
                    output.quota_exceeded.as_ref().map(quota_note)
                };
                match note {
                    Some(note) => with_note(&output.to_text(), &note),
                    None => output.to_text(),
                }
            }
            Err(error) => error_text(&error),
        };
        Ok(ToolOutput {
            content: truncate_middle(&text, max_chars),
            update,
            artifact: None,
        })
    }
}

/// What the model reads after a timeout. The whole process group is killed, background jobs
/// included, so the only advice that works is to make each command finish in time.
fn timeout_note(timeout: Duration) -> String {
    let seconds = timeout.as_secs();
    format!(
        "Error: Command timed out after {seconds} seconds and was killed, together with every \
         process it started (background jobs and `nohup` included: nothing outlives the call). \
         Split the work into steps that each finish within {seconds} seconds (for example, \
         process part of the input per call and save progress to files under \
         /mnt/user-data/workspace), or make the command faster."
    )
}

/// What the model reads after the quota watchdog killed a command.
fn quota_note(breach: &QuotaBreach) -> String {
    format!(
        "Error: Command was killed because {breach}. Every process it started was stopped; files \
         written so far are kept. Delete files you no longer need (for example `rm -r` of \
         scratch data under /mnt/user-data/workspace) or write less, then continue."
    )
}

/// Partial output (if any) followed by the note.
fn with_note(partial: &str, note: &str) -> String {
    if partial == "(no output)" {
        note.to_string()
    } else {
        format!("{partial}\n{note}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::QuotaScope;

    #[test]
    fn the_timeout_note_does_not_promise_background_jobs() {
        let note = timeout_note(Duration::from_secs(30));
        assert!(note.contains("30 seconds"), "{note}");
        assert!(note.contains("background jobs"), "{note}");
        assert!(note.contains("nothing outlives the call"), "{note}");
        assert!(!note.contains("Run long tasks in the background"), "{note}");
    }

    #[test]
    fn the_quota_note_says_what_happened_and_what_to_do() {
        let note = quota_note(&QuotaBreach {
            scope: QuotaScope::Thread,
            used: 1100 * 1024 * 1024,
            limit: 1024 * 1024 * 1024,
            writing: 0,
        });
        assert!(note.contains("1.1 GiB"), "{note}");
        assert!(
            note.contains("1.0 GiB quota (sandbox.thread_quota_mb)"),
            "{note}"
        );
        assert!(note.contains("Delete files"), "{note}");
        assert_eq!(with_note("(no output)", "n"), "n");
        assert_eq!(with_note("partial", "n"), "partial\nn");
    }
}
