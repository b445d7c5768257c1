//! `write_file(description, path, content, append?)`: creates or overwrites a file, behind the
//! size cap and the read-before-write gate.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::tools::builtin::{
    SandboxAccess, ToolMeta, check_read_stamp, current_content, error_text, stamp,
};

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct WriteFileArgs {
    /// Explain why you are writing this file in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Absolute path of the file; parent directories are created.
    pub(crate) path: String,
    /// The text to write.
    pub(crate) content: String,
    /// Add to the end of the file instead of replacing it.
    #[serde(default)]
    pub(crate) append: bool,
}

pub struct WriteFileTool {
    meta: ToolMeta,
    access: SandboxAccess,
    /// The tool entry's `max_bytes`, else `sandbox.write_file_max_bytes`; 0 = unlimited.
    max_bytes: usize,
    /// Says the cap in force, so the model splits a long file before it is refused.
    description: String,
}

impl WriteFileTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess, max_bytes: usize) -> Self {
        Self {
            meta,
            access,
            max_bytes,
            description: description(max_bytes),
        }
    }
}

/// The tool's description with its size cap (none when `max_bytes` is 0).
fn description(max_bytes: usize) -> String {
    let mut text = String::from(
        "Write text to a file, creating it (and its directories) if needed. To change an existing \
         file, read it first.",
    );
    if max_bytes > 0 {
        let size = if max_bytes.is_multiple_of(1024) {
            format!("{} KB", max_bytes / 1024)
        } else {
            format!("{max_bytes} bytes")
        };
        text.push_str(&format!(
            " One call writes at most {size} unless append=true: write a longer file in parts, \
             the first as usual, each following part with append=true."
        ));
    } else {
        text.push_str(" Large content: write the first part, then the rest with append=true.");
    }
    text
}

#[async_trait]
impl Tool for WriteFileTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        schema_for::<WriteFileArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: WriteFileArgs = parse_args(args)?;
        let max_bytes = self.max_bytes;
        let size = args.content.len();
        if !args.append && max_bytes > 0 && size > max_bytes {
            return Ok(ToolOutput::text(format!(
                "Error: content is {size} bytes, over the {max_bytes}-byte limit for one write_file call. \
                 Write the file in parts: write the first part, then call write_file with append=true \
                 for each following part."
            )));
        }
        let (sandbox, mut update) = self.access.sandbox(ctx).await?;
        let lock = self.access.file_lock(sandbox.id(), &args.path);
        let _guard = lock.lock().await;
        let existing = match current_content(sandbox.as_ref(), &args.path).await {
            Ok(existing) => existing,
            Err(error) => return Ok(with_update(error_text(&error), update)),
        };
        if let Some(current) = &existing
            && let Err(refusal) = check_read_stamp(ctx, &args.path, current)
        {
            return Ok(with_update(refusal, update));
        }
        if let Err(error) = sandbox
            .write_file(&args.path, &args.content, args.append)
            .await
        {
            return Ok(with_update(error_text(&error), update));
        }
        let mut written = match (&existing, args.append) {
            (Some(current), true) => current.clone(),
            _ => Vec::new(),
        };
        written.extend_from_slice(args.content.as_bytes());
        stamp(&mut update, &args.path, &written);
        Ok(with_update("OK".to_string(), update))
    }
}

fn with_update(content: String, update: antler_store::state::StateUpdate) -> ToolOutput {
    ToolOutput {
        content,
        update,
        artifact: None,
    }
}
