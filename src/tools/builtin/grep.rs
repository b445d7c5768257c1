//! `grep(description, pattern, path, glob?, literal?, case_sensitive?, max_results?)`: search
//! file contents.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::sandbox::GrepOptions;
use crate::tools::builtin::{SandboxAccess, ToolMeta, error_text};

const DEFAULT_MAX_RESULTS: usize = 100;
const MAX_RESULTS_CAP: usize = 500;

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct GrepArgs {
    /// Explain why you are searching in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Regular expression (or plain text with literal=true).
    pub(crate) pattern: String,
    /// Absolute file or directory to search.
    pub(crate) path: String,
    /// Only search files matching this glob, e.g. `*.py`.
    #[serde(default)]
    pub(crate) glob: Option<String>,
    /// Treat the pattern as plain text.
    #[serde(default)]
    pub(crate) literal: bool,
    /// Match case exactly (default: case-insensitive).
    #[serde(default)]
    pub(crate) case_sensitive: bool,
    /// At most this many matching lines (default 100, up to 500).
    #[serde(default)]
    pub(crate) max_results: Option<usize>,
}

pub struct GrepTool {
    meta: ToolMeta,
    access: SandboxAccess,
}

impl GrepTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess) -> Self {
        Self { meta, access }
    }
}

#[async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Search file contents for a regular expression; returns path:line: text for each match."
    }

    fn parameters(&self) -> Value {
        schema_for::<GrepArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: GrepArgs = parse_args(args)?;
        let (sandbox, update) = self.access.sandbox(ctx).await?;
        let options = GrepOptions {
            glob: args.glob.clone(),
            literal: args.literal,
            case_sensitive: args.case_sensitive,
            max_results: args
                .max_results
                .unwrap_or(DEFAULT_MAX_RESULTS)
                .clamp(1, MAX_RESULTS_CAP),
        };
        let content = match sandbox.grep(&args.path, &args.pattern, &options).await {
            Ok((matches, _)) if matches.is_empty() => {
                format!("No matches for {:?} under {}", args.pattern, args.path)
            }
            Ok((matches, truncated)) => {
                let mut text = matches
                    .iter()
                    .map(|m| format!("{}:{}: {}", m.path, m.line_number, m.line))
                    .collect::<Vec<_>>()
                    .join("\n");
                if truncated {
                    text.push_str(&format!(
                        "\n\nResults truncated. Showing the first {} matches; use a narrower pattern, \
                         path or glob, or raise max_results (up to {MAX_RESULTS_CAP}).",
                        matches.len()
                    ));
                }
                text
            }
            Err(error) => error_text(&error),
        };
        Ok(ToolOutput {
            content,
            update,
            artifact: None,
        })
    }
}
