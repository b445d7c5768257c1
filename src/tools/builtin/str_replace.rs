//! `str_replace(description, path, old_str, new_str, replace_all?)`: an exact-text edit, behind
//! the read-before-write gate.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::sandbox::SandboxError;
use crate::tools::builtin::{
    SandboxAccess, ToolMeta, check_read_stamp, current_content, error_text, normalise_virtual_key,
    stamp,
};

/// Arguments of `str_replace`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct StrReplaceArgs {
    /// Explain why you are editing this file in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Absolute path of the file.
    pub(crate) path: String,
    /// The exact text to replace; it must occur once unless replace_all is true.
    pub(crate) old_str: String,
    /// The replacement text.
    pub(crate) new_str: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub(crate) replace_all: bool,
}

pub struct StrReplaceTool {
    meta: ToolMeta,
    access: SandboxAccess,
}

impl StrReplaceTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess) -> Self {
        Self { meta, access }
    }
}

#[async_trait]
impl Tool for StrReplaceTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Replace exact text in a file you have read. old_str must match exactly once (include \
         surrounding lines to make it unique), or set replace_all=true."
    }

    fn parameters(&self) -> Value {
        schema_for::<StrReplaceArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: StrReplaceArgs = parse_args(args)?;
        let (sandbox, mut update) = self.access.sandbox(ctx).await?;
        let reply = |content: String, update| ToolOutput {
            content,
            update,
            artifact: None,
        };
        let lock = self.access.file_lock(sandbox.id(), &args.path);
        let _guard = lock.lock().await;
        let path = normalise_virtual_key(&args.path);
        let current = match current_content(sandbox.as_ref(), &args.path).await {
            Ok(Some(current)) => current,
            Ok(None) => return Ok(reply(error_text(&SandboxError::FileNotFound(path)), update)),
            Err(error) => return Ok(reply(error_text(&error), update)),
        };
        if args.old_str.is_empty() {
            return Ok(reply("OK".to_string(), update));
        }
        if let Err(refusal) = check_read_stamp(ctx, &args.path, &current) {
            return Ok(reply(refusal, update));
        }
        let text = String::from_utf8_lossy(&current);
        let occurrences = text.matches(&args.old_str).count();
        if occurrences == 0 {
            return Ok(reply(
                format!("Error: String to replace not found in file: {path}"),
                update,
            ));
        }
        if occurrences > 1 && !args.replace_all {
            return Ok(reply(
                format!(
                    "Error: String to replace occurs {occurrences} times in file: {path}. Include more \
                     surrounding text to make it unique, or set replace_all=true."
                ),
                update,
            ));
        }
        let replaced = if args.replace_all {
            text.replace(&args.old_str, &args.new_str)
        } else {
            text.replacen(&args.old_str, &args.new_str, 1)
        };
        if let Err(error) = sandbox.update_file(&args.path, replaced.as_bytes()).await {
            return Ok(reply(error_text(&error), update));
        }
        stamp(&mut update, &args.path, replaced.as_bytes());
        Ok(reply("OK".to_string(), update))
    }
}
