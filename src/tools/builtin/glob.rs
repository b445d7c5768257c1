//! `glob(description, pattern, path, include_dirs?, max_results?)`: find paths by pattern.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::tools::builtin::{SandboxAccess, ToolMeta, error_text};

const DEFAULT_MAX_RESULTS: usize = 200;
const MAX_RESULTS_CAP: usize = 1000;

/// Arguments of `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct GlobArgs {
    /// Explain why you are searching in a few words. ALWAYS PROVIDE THIS PARAMETER FIRST.
    // Only for the model (and the trace): it states its intent before acting.
    #[allow(dead_code)]
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Glob pattern relative to `path`, e.g. `**/*.py`; `*` stays within one directory.
    pub(crate) pattern: String,
    /// Absolute directory to search.
    pub(crate) path: String,
    /// Also return matching directories.
    #[serde(default)]
    pub(crate) include_dirs: bool,
    /// At most this many results (default 200, up to 1000).
    #[serde(default)]
    pub(crate) max_results: Option<usize>,
}

pub struct GlobTool {
    meta: ToolMeta,
    access: SandboxAccess,
}

impl GlobTool {
    pub fn new(meta: ToolMeta, access: SandboxAccess) -> Self {
        Self { meta, access }
    }
}

#[async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &str {
        &self.meta.name
    }

    fn description(&self) -> &str {
        "Find files whose path below a directory matches a glob pattern such as **/*.md."
    }

    fn parameters(&self) -> Value {
        schema_for::<GlobArgs>()
    }

    fn group(&self) -> Option<&str> {
        self.meta.group.as_deref()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: GlobArgs = parse_args(args)?;
        let (sandbox, update) = self.access.sandbox(ctx).await?;
        let max_results = args
            .max_results
            .unwrap_or(DEFAULT_MAX_RESULTS)
            .clamp(1, MAX_RESULTS_CAP);
        let content = match sandbox
            .glob(&args.path, &args.pattern, args.include_dirs, max_results)
            .await
        {
            Ok((paths, _)) if paths.is_empty() => format!(
                "No paths matched pattern {:?} under {}",
                args.pattern, args.path
            ),
            Ok((paths, truncated)) => {
                let mut text = paths.join("\n");
                if truncated {
                    text.push_str(&format!(
                        "\n\nResults truncated. Showing the first {} matches; use a narrower pattern \
                         or path, or raise max_results (up to {MAX_RESULTS_CAP}).",
                        paths.len()
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
