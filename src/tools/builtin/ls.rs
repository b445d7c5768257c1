//! `ls(description, path)`: a two-level tree of a directory.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::tools::builtin::{SandboxAccess, ToolMeta, error_text, truncate_head};

const LS_HINT: &str = "Use a more specific path to see fewer results";
const LS_DEPTH: usize = 2;

/// Arguments of `ls`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct LsArgs {
    /// Explain why you are listing this directory in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Absolute path of the directory, e.g. /mnt/user-data/workspace.
    pub(crate) path: String,
}

pub struct LsTool {
    meta: ToolMeta,
    access: SandboxAccess,
    /// The tool entry's `max_output_chars`, else `sandbox.ls_output_max_chars`; 0 = unlimited.
    max_output_chars: usize,
}

impl LsTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess, max_output_chars: usize) -> Self {
        Self {
            meta,
            access,
            max_output_chars,
        }
    }
}

#[async_trait]
impl Tool for LsTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "List the contents of a directory up to 2 levels deep, directories ending in '/'."
    }

    fn parameters(&self) -> Value {
        schema_for::<LsArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: LsArgs = parse_args(args)?;
        let (sandbox, update) = self.access.sandbox(ctx).await?;
        let max_chars = self.max_output_chars;
        let text = match sandbox.list_dir(&args.path, LS_DEPTH).await {
            Ok(entries) if entries.is_empty() => "(empty)".to_string(),
            Ok(entries) => truncate_head(&entries.join("\n"), max_chars, LS_HINT),
            Err(error) => error_text(&error),
        };
        Ok(ToolOutput {
            content: text,
            update,
            artifact: None,
        })
    }
}
