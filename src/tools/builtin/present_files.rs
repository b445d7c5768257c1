//! `present_files(filepaths)`: hands finished files in `/mnt/user-data/outputs` to the user by
//! adding them to the thread's artifacts.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::paths::{ThreadPaths, VIRTUAL_OUTPUTS};
use antler_store::state::StateUpdate;

/// Arguments of `present_files`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PresentFilesArgs {
    /// Absolute paths of files under /mnt/user-data/outputs to show the user.
    pub(crate) filepaths: Vec<String>,
}

/// Needs no sandbox: it only checks paths against the thread's outputs directory.
#[derive(Debug)]
pub struct PresentFilesTool {
    /// The (absolute) data dir the threads' outputs live under.
    data_dir: PathBuf,
}

impl PresentFilesTool {
    pub fn new(data_dir: PathBuf) -> Self {
        let data_dir = std::path::absolute(&data_dir).unwrap_or(data_dir);
        Self { data_dir }
    }
}

#[async_trait]
impl Tool for PresentFilesTool {
    fn name(&self) -> &str {
        "present_files"
    }

    fn description(&self) -> &str {
        "Make files visible to the user for viewing or download. Only files in \
         /mnt/user-data/outputs can be presented: write or copy deliverables there first."
    }

    fn parameters(&self) -> Value {
        schema_for::<PresentFilesArgs>()
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: PresentFilesArgs = parse_args(args)?;
        let paths = ThreadPaths::new(&self.data_dir, &ctx.run.users.owner, &ctx.run.thread_id)
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let outputs = paths.outputs();
        let mut artifacts = Vec::with_capacity(args.filepaths.len());
        for path in &args.filepaths {
            let Some(virtual_path) = normalise(path, &outputs) else {
                return Ok(ToolOutput::text(format!(
                    "Error: Only files in {VIRTUAL_OUTPUTS} can be presented: {path}"
                )));
            };
            let host = outputs.join(
                virtual_path
                    .trim_start_matches(VIRTUAL_OUTPUTS)
                    .trim_start_matches('/'),
            );
            if !host.is_file() {
                return Ok(ToolOutput::text(format!(
                    "Error: File not found: {virtual_path}"
                )));
            }
            if !artifacts.contains(&virtual_path) {
                artifacts.push(virtual_path);
            }
        }
        Ok(ToolOutput {
            content: "Successfully presented files".into(),
            update: StateUpdate {
                artifacts,
                ..Default::default()
            },
            artifact: None,
        })
    }
}

/// The normalised virtual path of `path` (virtual, or a host path in the outputs dir) when it
/// names something strictly inside outputs, following symlinks only if they stay inside.
fn normalise(path: &str, outputs: &Path) -> Option<String> {
    let path = path.trim();
    if path.split('/').any(|segment| segment == "..") {
        return None;
    }
    let outputs_text = outputs.to_string_lossy();
    let rest = strip_root(path, VIRTUAL_OUTPUTS).or_else(|| strip_root(path, &outputs_text))?;
    let segments: Vec<&str> = rest
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.is_empty() {
        return None;
    }
    let relative = segments.join("/");
    let host: PathBuf = outputs.join(&relative);
    if let (Ok(canonical), Ok(root)) = (host.canonicalize(), outputs.canonicalize())
        && !canonical.starts_with(&root)
    {
        return None;
    }
    Some(format!("{VIRTUAL_OUTPUTS}/{relative}"))
}

fn strip_root<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(root)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}
