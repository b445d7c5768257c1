//! `read_file(description, path, start_line?, end_line?)`: a file's text, stamping it for the
//! read-before-write gate.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::sandbox::slice_lines;
use crate::tools::builtin::{SandboxAccess, ToolMeta, error_text, stamp, truncate_head};

const READ_HINT: &str = "Use start_line/end_line to read a specific range";

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ReadFileArgs {
    /// Explain why you are reading this file in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Absolute path of the file.
    pub(crate) path: String,
    /// First line to read, 1-indexed.
    #[serde(default)]
    pub(crate) start_line: Option<i64>,
    /// Last line to read, inclusive.
    #[serde(default)]
    pub(crate) end_line: Option<i64>,
}

pub struct ReadFileTool {
    meta: ToolMeta,
    access: SandboxAccess,
    /// The tool entry's `max_output_chars`, else `sandbox.read_file_output_max_chars`.
    max_output_chars: usize,
}

impl ReadFileTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess, max_output_chars: usize) -> Self {
        Self {
            meta,
            access,
            max_output_chars,
        }
    }
}

#[async_trait]
impl Tool for ReadFileTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Read a text file. Use start_line and end_line (1-indexed, inclusive) for a range of a \
         long file. Read a file before overwriting or editing it."
    }

    fn parameters(&self) -> Value {
        schema_for::<ReadFileArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: ReadFileArgs = parse_args(args)?;
        let (sandbox, mut update) = self.access.sandbox(ctx).await?;
        let max_chars = self.max_output_chars;
        let reply = |content: String, update| {
            Ok(ToolOutput {
                content,
                update,
                artifact: None,
            })
        };
        let bytes = match sandbox.download_file(&args.path).await {
            Ok(bytes) => bytes,
            Err(error) => return reply(error_text(&error), update),
        };
        // Negative numbers are clamped so the range check reports them as "< 1".
        let to_line = |n: Option<i64>| n.map(|n| usize::try_from(n).unwrap_or(0));
        let text = String::from_utf8_lossy(&bytes);
        let content = match slice_lines(&text, to_line(args.start_line), to_line(args.end_line)) {
            Ok(content) => content,
            Err(error) => return reply(format!("Error: {}: {error}", args.path), update),
        };
        stamp(&mut update, &args.path, &bytes);
        if content.is_empty() {
            return reply("(empty)".to_string(), update);
        }
        reply(truncate_head(&content, max_chars, READ_HINT), update)
    }
}
