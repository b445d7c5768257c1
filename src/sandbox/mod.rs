//! The `Sandbox` / `SandboxProvider` seam: where tool commands and file operations run.
//!
//! Every provider shows the model the same virtual file system (`/mnt/user-data/*`,
//! `/mnt/skills`, configured mounts) and maps every path it prints back to that view, so the
//! model never learns a host path. Providers here: `bwrap` (bubblewrap namespaces; the default
//! where it works), `local` (host execution, path mapping only, shell off by default) and
//! `docker` (a container per thread through a Docker engine, see [`docker`]).

mod bench;
pub mod docker;
mod exec;
mod fs;
mod host_files;
mod path_mapper;
mod provider;
mod quota;
mod settings;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use bench::{BashBench, BashOverhead, bench_bash_overhead};
pub use docker::{DockerSandboxProvider, PoolTiming};
pub use exec::scrub_env;
pub use fs::{GrepMatch, GrepOptions, slice_lines};
pub use path_mapper::{MountPoint, PathMapper, ResolvedPath, VIRTUAL_SKILLS};
pub use provider::{
    ExecMode, HostSandbox, HostSandboxProvider, bwrap_available, select_host_provider,
    select_provider,
};
pub use quota::{QuotaBreach, QuotaScope};
pub use settings::{ProviderSettings, SkillMounts};

/// What a finished (or killed) command left behind; every path in it is already virtual.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOutput {
    pub stdout: String,
    pub stderr: String,
    /// `None` when the process was killed by a signal (including at its timeout).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Set when the command was killed because the thread's files passed a disk quota.
    pub quota_exceeded: Option<QuotaBreach>,
}

impl CommandOutput {
    /// The text the model reads: stdout, then stderr and a non-zero exit code (reference format).
    pub fn to_text(&self) -> String {
        let mut text = self.stdout.clone();
        if !self.stderr.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str("Std Error:\n");
            text.push_str(&self.stderr);
        }
        match self.exit_code {
            Some(0) => {}
            Some(code) => text.push_str(&format!("\nExit Code: {code}")),
            None if !self.timed_out && self.quota_exceeded.is_none() => {
                text.push_str("\nExit Code: killed by a signal")
            }
            None => {}
        }
        if text.trim().is_empty() {
            "(no output)".to_string()
        } else {
            text
        }
    }
}

/// An isolated environment bound to one (user, thread). Paths are virtual (`/mnt/user-data/…`).
#[async_trait]
pub trait Sandbox: Send + Sync {
    fn id(&self) -> &str;

    /// Runs `command` with `sh -c`. `env` adds variables (secret-looking names are dropped);
    /// `timeout` defaults to the configured one.
    async fn execute_command(
        &self,
        command: &str,
        env: &[(String, String)],
        timeout: Option<Duration>,
    ) -> Result<CommandOutput, SandboxError>;

    /// Text of a file; `start_line`/`end_line` are 1-indexed and inclusive.
    async fn read_file(
        &self,
        path: &str,
        start_line: Option<usize>,
        end_line: Option<usize>,
    ) -> Result<String, SandboxError>;

    async fn download_file(&self, path: &str) -> Result<Vec<u8>, SandboxError>;

    /// Creates parent directories as needed.
    async fn write_file(&self, path: &str, content: &str, append: bool)
    -> Result<(), SandboxError>;

    /// Replaces a file's bytes.
    async fn update_file(&self, path: &str, content: &[u8]) -> Result<(), SandboxError>;

    /// Entries under `path` down to `max_depth` levels, directories with a trailing `/`.
    async fn list_dir(&self, path: &str, max_depth: usize) -> Result<Vec<String>, SandboxError>;

    /// Paths under `path` matching `pattern`; the flag says whether results were cut.
    async fn glob(
        &self,
        path: &str,
        pattern: &str,
        include_dirs: bool,
        max_results: usize,
    ) -> Result<(Vec<String>, bool), SandboxError>;

    async fn grep(
        &self,
        path: &str,
        pattern: &str,
        options: &GrepOptions,
    ) -> Result<(Vec<GrepMatch>, bool), SandboxError>;
}

/// Why a sandbox operation failed. Messages only ever contain virtual paths.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("no sandbox with id {0}; it may have been released")]
    NotFound(String),
    #[error("could not start a sandbox: {0}")]
    Unavailable(String),
    #[error("{0}")]
    PathRejected(String),
    #[error("File not found: {0}")]
    FileNotFound(String),
    #[error("Permission denied accessing file: {0}")]
    PermissionDenied(String),
    #[error("{0} is read-only; write under /mnt/user-data/workspace or /mnt/user-data/outputs")]
    ReadOnly(String),
    #[error("{0} is a directory; give a file path")]
    IsDirectory(String),
    #[error("{0} is not a directory; give a directory path")]
    NotDirectory(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    ShellDisabled(String),
    #[error(
        "disk quota exceeded: {0}. Delete files you no longer need (for example with `rm` under \
         /mnt/user-data/workspace) or write less, then retry"
    )]
    QuotaExceeded(QuotaBreach),
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

/// Hands out sandboxes. `acquire` is idempotent per (user, thread).
#[async_trait]
pub trait SandboxProvider: Send + Sync {
    async fn acquire(&self, user_id: &str, thread_id: &str) -> Result<String, SandboxError>;
    fn get(&self, sandbox_id: &str) -> Option<Arc<dyn Sandbox>>;
    async fn release(&self, sandbox_id: &str) -> Result<(), SandboxError>;
    async fn shutdown(&self);

    /// What this provider really is and mounts, so logs, `/readyz` and the system prompt
    /// describe the sandbox a run gets rather than what the configuration says now.
    fn info(&self) -> SandboxInfo {
        SandboxInfo {
            provider: "custom".into(),
            bash: true,
            network: None,
            reason: "supplied by the embedding application".into(),
            mounts: Vec::new(),
            holds_resources: false,
        }
    }
}

/// A provider's description: its kind, whether shell commands run, why it was chosen, and the
/// extra mounts its sandboxes have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxInfo {
    /// `bwrap`, `local`, `docker`, or `custom` for an embedder's provider.
    pub provider: String,
    /// Whether the `bash` tool can run commands.
    pub bash: bool,
    /// Whether commands reach the network (`None`: unknown, an embedder's provider). The system
    /// prompt tells the model, so it does not try `pip install` in a sandbox without one.
    pub network: Option<bool>,
    /// Why this provider was chosen, e.g. `auto: bubblewrap works`.
    pub reason: String,
    /// Configured extra mounts as (virtual path, read-only).
    pub mounts: Vec<(String, bool)>,
    /// Whether the provider keeps something alive between calls (containers) that must be
    /// shut down before another provider may take over the same threads.
    pub holds_resources: bool,
}

impl SandboxInfo {
    /// The extra mounts of a sandbox configuration as the prompt lists them.
    pub fn extra_mounts(config: &crate::config::SandboxConfig) -> Vec<(String, bool)> {
        config
            .mounts
            .iter()
            .map(|m| (m.container_path.clone(), m.read_only))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_output_text_follows_the_reference_format() {
        let out = CommandOutput {
            stdout: "hi".into(),
            stderr: "oops".into(),
            exit_code: Some(2),
            ..Default::default()
        };
        assert_eq!(out.to_text(), "hi\nStd Error:\noops\nExit Code: 2");
        assert_eq!(
            CommandOutput::default().to_text(),
            "\nExit Code: killed by a signal"
        );
        let ok = CommandOutput {
            exit_code: Some(0),
            ..Default::default()
        };
        assert_eq!(ok.to_text(), "(no output)");
    }
}
