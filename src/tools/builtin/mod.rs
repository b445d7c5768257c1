//! Built-in sandbox tools (`bash`, `ls`, `read_file`, `write_file`, `str_replace`, `glob`,
//! `grep`, `view_image`), `present_files` and the web tools (`web_search`, `web_fetch`), plus
//! what they share: sandbox lookup, truncation and the read-before-write gate.
//!
//! Expected failures (missing file, rejected path, gate) answer with `Error: …` text like the
//! reference does, so the model reads them as ordinary results it can act on.

mod bash;
mod glob;
mod grep;
mod ls;
mod present_files;
mod read_file;
mod str_replace;
mod view_image;
pub mod web;
mod web_fetch;
mod web_search;
mod write_file;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent_api::{ToolContext, ToolError};
use crate::sandbox::{Sandbox, SandboxError, SandboxProvider};
use antler_store::state::{SandboxState, StateUpdate};

pub use bash::BashTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use ls::LsTool;
pub use present_files::PresentFilesTool;
pub use read_file::ReadFileTool;
pub use str_replace::StrReplaceTool;
pub use view_image::{HostLayout, ViewImageTool};
pub use web_fetch::WebFetchTool;
pub use web_search::{
    SearchProvider, SearchResult, WebSearchTool, format_results, parse_duckduckgo,
};
pub use write_file::WriteFileTool;

/// `state.extra` key prefix of read stamps: `read_stamp:{virtual path}` → sha256 hex of the
/// file as last read (or written) by this thread. One key per file so parallel tool calls of a
/// step never overwrite each other's stamps.
pub const READ_STAMP_PREFIX: &str = "read_stamp:";

/// A tool's configured name and group.
#[derive(Clone, Debug)]
pub struct ToolMeta {
    pub name: String,
    pub group: Option<String>,
}

impl ToolMeta {
    pub fn new(name: impl Into<String>, group: Option<&str>) -> Self {
        Self {
            name: name.into(),
            group: group.map(str::to_string),
        }
    }
}

/// How a tool reaches its thread's sandbox, plus per-file locks shared by the writing tools.
#[derive(Clone)]
pub struct SandboxAccess {
    provider: Arc<dyn SandboxProvider>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl SandboxAccess {
    pub fn new(provider: Arc<dyn SandboxProvider>) -> Self {
        Self {
            provider,
            locks: Arc::default(),
        }
    }

    /// The thread's sandbox, acquired here when no middleware did it first. The returned update
    /// records a newly acquired id in the state.
    pub(crate) async fn sandbox(
        &self,
        ctx: &ToolContext<'_>,
    ) -> Result<(Arc<dyn Sandbox>, StateUpdate), ToolError> {
        if let Some(bound) = &ctx.state.sandbox
            && let Some(sandbox) = self.provider.get(&bound.sandbox_id)
        {
            return Ok((sandbox, StateUpdate::default()));
        }
        let id = self
            .provider
            .acquire(&ctx.run.users.owner, &ctx.run.thread_id)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let sandbox = self
            .provider
            .get(&id)
            .ok_or_else(|| ToolError::Failed(SandboxError::NotFound(id.clone()).to_string()))?;
        let mut update = StateUpdate::default();
        // A bound id of another provider (the sandbox settings were reloaded) is replaced.
        if ctx.state.sandbox.as_ref().map(|s| &s.sandbox_id) != Some(&id) {
            update.sandbox = Some(SandboxState { sandbox_id: id });
        }
        Ok((sandbox, update))
    }

    /// Serialises edits of one file of one sandbox.
    pub(crate) fn file_lock(&self, sandbox_id: &str, path: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        locks
            .entry(format!("{sandbox_id}\n{}", normalise_virtual_key(path)))
            .or_default()
            .clone()
    }
}

/// The model-facing text of a sandbox error.
pub(crate) fn error_text(error: &SandboxError) -> String {
    format!("Error: {error}")
}

/// Keeps `max_chars` characters: half from the head, half from the tail, with the exact number
/// of skipped characters in the marker; the result never exceeds `max_chars`. 0 disables.
pub fn truncate_middle(output: &str, max_chars: usize) -> String {
    let total = output.chars().count();
    if max_chars == 0 || total <= max_chars {
        return output.to_string();
    }
    let widest_marker = middle_marker(total).chars().count();
    let kept = max_chars.saturating_sub(widest_marker);
    if kept == 0 {
        return output.chars().take(max_chars).collect();
    }
    let head = kept / 2;
    let tail = kept - head;
    let head_text: String = output.chars().take(head).collect();
    let tail_text: String = output.chars().skip(total - tail).collect();
    format!("{head_text}{}{tail_text}", middle_marker(total - kept))
}

fn middle_marker(skipped: usize) -> String {
    format!("\n... [middle truncated: {skipped} chars skipped] ...\n")
}

/// Keeps the head of `output` and appends `... [truncated: showing first X of Y chars. {hint}]
/// ...`; the result never exceeds `max_chars`. 0 disables.
pub fn truncate_head(output: &str, max_chars: usize, hint: &str) -> String {
    let total = output.chars().count();
    if max_chars == 0 || total <= max_chars {
        return output.to_string();
    }
    let widest_marker = head_marker(total, total, hint).chars().count();
    let kept = max_chars.saturating_sub(widest_marker);
    if kept == 0 {
        return output.chars().take(max_chars).collect();
    }
    let head_text: String = output.chars().take(kept).collect();
    format!("{head_text}{}", head_marker(kept, total, hint))
}

fn head_marker(kept: usize, total: usize, hint: &str) -> String {
    format!("\n... [truncated: showing first {kept} of {total} chars. {hint}] ...")
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `/a//b/./c` → `/a/b/c`; relative paths are taken from the workspace, as the sandbox does.
pub(crate) fn normalise_virtual_key(path: &str) -> String {
    let path = path.trim();
    let absolute = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{}/{path}", crate::paths::VIRTUAL_WORKSPACE)
    };
    let segments: Vec<&str> = absolute
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    format!("/{}", segments.join("/"))
}

pub(crate) fn stamp_key(path: &str) -> String {
    format!("{READ_STAMP_PREFIX}{}", normalise_virtual_key(path))
}

/// Records that the thread now knows `bytes` as the content of `path`.
pub(crate) fn stamp(update: &mut StateUpdate, path: &str, bytes: &[u8]) {
    update
        .extra
        .insert(stamp_key(path), Value::String(sha256_hex(bytes)));
}

/// The read-before-write gate: an existing, non-empty file may only be changed when this
/// thread's last read of it matches its current content. `Err` holds the model-facing refusal.
pub(crate) fn check_read_stamp(
    ctx: &ToolContext<'_>,
    path: &str,
    current: &[u8],
) -> Result<(), String> {
    if current.is_empty() {
        return Ok(());
    }
    let expected = sha256_hex(current);
    match ctx
        .state
        .extra
        .get(&stamp_key(path))
        .and_then(Value::as_str)
    {
        Some(stamped) if stamped == expected => Ok(()),
        Some(_) => Err(format!(
            "Error: {} changed since you last read it. Call read_file on it again, then retry the edit.",
            normalise_virtual_key(path)
        )),
        None => Err(format!(
            "Error: {} already exists and has not been read in this thread. Call read_file on it first, then retry the edit.",
            normalise_virtual_key(path)
        )),
    }
}

/// Reads a file for an edit: `Ok(None)` when it does not exist yet.
pub(crate) async fn current_content(
    sandbox: &dyn Sandbox,
    path: &str,
) -> Result<Option<Vec<u8>>, SandboxError> {
    match sandbox.download_file(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(SandboxError::FileNotFound(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_truncation_keeps_head_and_tail_with_exact_count() {
        let output: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let truncated = truncate_middle(&output, 200);
        assert!(truncated.chars().count() <= 200);
        let marker_len = middle_marker(1000).chars().count();
        let kept = 200 - marker_len;
        let skipped = 1000 - kept;
        assert!(truncated.contains(&format!("[middle truncated: {skipped} chars skipped]")));
        assert!(truncated.starts_with(&output[..kept / 2]));
        assert!(truncated.ends_with(&output[1000 - (kept - kept / 2)..]));
        assert_eq!(truncate_middle(&output, 0), output);
        assert_eq!(truncate_middle("short", 200), "short");
        assert_eq!(truncate_middle(&output, 10), output[..10]);
    }

    #[test]
    fn head_truncation_reports_shown_and_total() {
        let output = "é".repeat(500);
        let truncated = truncate_head(&output, 300, "Use a more specific path");
        assert!(truncated.chars().count() <= 300);
        let kept = 300
            - head_marker(500, 500, "Use a more specific path")
                .chars()
                .count();
        assert!(truncated.ends_with(&format!(
            "\n... [truncated: showing first {kept} of 500 chars. Use a more specific path] ..."
        )));
        assert_eq!(truncate_head(&output, 0, "x"), output);
    }

    #[test]
    fn virtual_keys_are_normalised() {
        assert_eq!(
            normalise_virtual_key("/mnt/user-data//workspace/./a.txt"),
            "/mnt/user-data/workspace/a.txt"
        );
        assert_eq!(
            normalise_virtual_key("a.txt"),
            "/mnt/user-data/workspace/a.txt"
        );
    }
}
