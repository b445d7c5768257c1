//! The `sandbox:` section: which provider runs tool commands and file operations, what they may
//! reach, and the limits that keep one run from taking the host's CPU, memory or disk.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which sandbox provider runs tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxProviderKind {
    /// bubblewrap when it works on this host, else `local` with bash disabled.
    #[default]
    Auto,
    /// Commands run in bubblewrap: new namespaces, no network unless `network`, only system
    /// directories (read-only) and the thread's own directories visible.
    Bwrap,
    /// Commands would run directly on the host (refused unless `allow_host_bash`); file tools
    /// are still confined to the thread's directories by path mapping.
    Local,
    /// One container per (user, thread) through the Docker Engine API; needs a running engine.
    Docker,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SandboxConfig {
    /// Which provider runs tools.
    pub provider: SandboxProviderKind,
    /// Let the `local` provider run shell commands on the host (no isolation besides paths).
    pub allow_host_bash: bool,
    /// Give bwrap commands network access (the host's network namespace).
    pub network: bool,
    /// Acquire the sandbox before the first model call instead of on the first tool call.
    pub eager: bool,
    /// Extra host directories every thread sees at `container_path` (e.g. a shared reference
    /// folder), read-write unless `read_only`.
    pub mounts: Vec<SandboxMountConfig>,
    /// Host directory of the public skills, shown read-only at `/mnt/skills`. Unset:
    /// `skills/public` beside the config file if it exists, else the skills shipped in the
    /// binary, installed into `{data_dir}/skills/public` at start.
    pub skills_path: Option<PathBuf>,
    /// Wall-clock seconds before a command's process group is killed.
    pub bash_command_timeout: u64,
    /// Characters of bash output kept (middle-truncated); 0 disables.
    pub bash_output_max_chars: usize,
    /// Characters of `ls` output kept (head-truncated); 0 disables.
    pub ls_output_max_chars: usize,
    /// Characters of `read_file` output kept (head-truncated); 0 disables.
    pub read_file_output_max_chars: usize,
    /// Largest non-append `write_file` payload in bytes; 0 disables the cap.
    pub write_file_max_bytes: usize,
    /// CPU seconds per command (RLIMIT_CPU; `bwrap` and `local` only).
    pub cpu_seconds: u64,
    /// Address-space cap per process in MiB (RLIMIT_AS); for `docker`, the container's memory
    /// limit.
    pub memory_mb: u64,
    /// Process cap (RLIMIT_NPROC); for `docker`, the container's pids limit.
    pub max_processes: u64,
    /// Largest file a command may write, in MiB (RLIMIT_FSIZE; `bwrap` and `local` only).
    pub max_file_size_mb: u64,
    /// Disk quota of one thread's files (workspace, uploads and outputs together), in MiB;
    /// enforced for the file tools before they write and for bash while it runs. 0 disables.
    pub thread_quota_mb: u64,
    /// Disk quota of the whole data directory (every thread, the store), in MiB; sandbox writes
    /// stop when it is reached. 0 disables.
    pub data_dir_quota_mb: u64,
    /// Settings of the `docker` provider.
    pub docker: DockerSandboxConfig,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            provider: SandboxProviderKind::Auto,
            allow_host_bash: false,
            network: false,
            eager: false,
            mounts: Vec::new(),
            skills_path: None,
            bash_command_timeout: 600,
            bash_output_max_chars: 20_000,
            ls_output_max_chars: 20_000,
            read_file_output_max_chars: 50_000,
            write_file_max_bytes: 80 * 1024,
            cpu_seconds: 600,
            memory_mb: 4096,
            max_processes: 1024,
            max_file_size_mb: 1024,
            thread_quota_mb: 1024,
            data_dir_quota_mb: 20 * 1024,
            docker: DockerSandboxConfig::default(),
        }
    }
}

/// The `docker` provider: containers through the Docker Engine API.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DockerSandboxConfig {
    /// Engine address: `unix:///path/docker.sock`, or `http://127.0.0.1:PORT` / `tcp://…`
    /// (plain HTTP, no TLS). Unset = the local unix socket (`$DOCKER_HOST` when it is `unix://`).
    pub host: Option<String>,
    /// Image the containers run; it must provide `sh`, `sleep`, `timeout`, `tr` and `grep` (the
    /// last two find a command to kill when it passes the disk quota).
    pub image: String,
    /// Most containers kept (in use plus warm); released ones are evicted least recently used.
    pub replicas: usize,
    /// Seconds a released container stays warm before it is stopped and removed; 0 keeps it.
    pub idle_timeout: u64,
    /// Give containers a network (otherwise `--network none`).
    pub network: bool,
}

impl Default for DockerSandboxConfig {
    fn default() -> Self {
        Self {
            host: None,
            image: "debian:bookworm-slim".to_string(),
            replicas: 3,
            idle_timeout: 600,
            network: false,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SandboxMountConfig {
    /// The directory on the host.
    pub host_path: PathBuf,
    /// Where tools see it, e.g. `/mnt/reference`.
    pub container_path: String,
    /// Tools may read but not change it.
    #[serde(default)]
    pub read_only: bool,
}
