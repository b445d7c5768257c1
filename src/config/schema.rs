//! The typed configuration tree. Every struct has defaults.
//!
//! Unknown keys are load errors, but they are collected by the loader (`serde_ignored`) rather
//! than by `deny_unknown_fields`, which would stop at the first one: the operator should see
//! every typo at once, each with its key path.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use schemars::JsonSchema;

use crate::config::Secret;

/// The schema version this binary writes and understands.
pub const CONFIG_VERSION: u32 = 1;

/// What changed in each schema version, newest last. When bumping [`CONFIG_VERSION`], add a line
/// saying what an operator must change; the loader prints every entry newer than a file's version.
pub const CONFIG_CHANGELOG: &[(u32, &str)] = &[(
    1,
    "first versioned schema: `models` entries with `provider: openai|anthropic` and `fallback`, \
     `gateway.api_tokens`, `loop_detection`, `token_budget`, `title`, `uploads`, `agents`",
)];

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct AppConfig {
    pub config_version: u32,
    /// `error|warn|info|debug|trace` or a full `tracing` filter (`antler=debug,info`).
    pub log_level: String,
    pub log_format: LogFormat,
    /// Where threads, agents and uploads live. Default: `$ANTLER_HOME`, else `./.antler`.
    pub data_dir: Option<PathBuf>,
    /// User ids allowed to bootstrap and manage agents for anyone.
    pub admins: Vec<String>,
    /// The first entry is the default model.
    pub models: Vec<ModelConfig>,
    /// Default `recursion_limit` of a run.
    pub recursion_limit: u32,
    /// Upper clamp for a client-requested `recursion_limit`.
    pub max_recursion_limit: u32,
    pub llm_call: LlmCallConfig,
    pub loop_detection: LoopDetectionConfig,
    pub token_usage: EnabledConfig,
    pub token_budget: TokenBudgetConfig,
    pub title: TitleConfig,
    pub safety_finish_reason: EnabledConfig,
    pub gateway: GatewayConfig,
    pub uploads: UploadsConfig,
    pub agents: AgentsConfig,
    /// Where tool commands and file operations run (`auto`, `bwrap`, `local`) and their limits.
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Configured tools; empty = the built-in defaults (ls, read_file, glob, grep, write_file,
    /// str_replace, bash).
    #[serde(default)]
    pub tools: Vec<ToolConfig>,
    /// Named tool groups agents can whitelist (`web`, `file:read`, `file:write`, `bash`).
    #[serde(default)]
    pub tool_groups: Vec<ToolGroupConfig>,
    /// IM channels (Telegram, …) and how chats map to threads and runs.
    #[serde(default)]
    pub channels: crate::config::channels::ChannelsConfig,
    /// Which tools the built-in guardrail lets the agent call.
    #[serde(default)]
    pub guardrails: GuardrailsConfig,
    /// The embedded store: page cache and retention.
    pub store: crate::config::StoreConfig,
    /// Bounds of the in-memory caches (thread states, agents, prompts).
    pub cache: crate::config::CacheConfig,
    /// Long-term memory per user and agent.
    pub memory: crate::config::MemoryConfig,
    /// Condensing long threads into a summary (off by default).
    pub summarization: crate::config::summarization::SummarizationConfig,
    /// Per-user daily token budgets.
    pub budgets: crate::config::budgets::BudgetsConfig,
    /// USD per million tokens by model name, for `/usage` and `antler usage`.
    pub pricing: crate::config::budgets::PricingConfig,
    /// Sub-agents the `task` tool runs: timeouts, the per-run cap, custom types.
    pub subagents: crate::config::subagents::SubagentsConfig,
    /// Deferred MCP tools: schemas hidden until the model finds them with `tool_search`.
    pub tool_search: EnabledConfig,
}

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            config_version: CONFIG_VERSION,
            log_level: "info".into(),
            log_format: LogFormat::Text,
            data_dir: None,
            admins: Vec::new(),
            models: Vec::new(),
            recursion_limit: 100,
            max_recursion_limit: 1000,
            llm_call: LlmCallConfig::default(),
            loop_detection: LoopDetectionConfig::default(),
            token_usage: EnabledConfig { enabled: true },
            token_budget: TokenBudgetConfig::default(),
            title: TitleConfig::default(),
            safety_finish_reason: EnabledConfig { enabled: true },
            gateway: GatewayConfig::default(),
            uploads: UploadsConfig::default(),
            agents: AgentsConfig::default(),
            sandbox: SandboxConfig::default(),
            tools: Vec::new(),
            tool_groups: Vec::new(),
            channels: Default::default(),
            guardrails: GuardrailsConfig::default(),
            store: Default::default(),
            cache: Default::default(),
            memory: Default::default(),
            summarization: Default::default(),
            budgets: Default::default(),
            pricing: Default::default(),
            subagents: Default::default(),
            tool_search: EnabledConfig::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Chat Completions: OpenAI, Ollama, vLLM, DeepSeek, OpenRouter, llama.cpp …
    #[default]
    Openai,
    /// Anthropic Messages API.
    Anthropic,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ModelConfig {
    pub name: String,
    pub display_name: Option<String>,
    pub provider: Provider,
    /// The provider's model id (`gpt-4o`, `qwen2.5:7b`, `claude-sonnet-4-5`).
    pub model: String,
    /// API root, e.g. `https://api.openai.com/v1` (OpenAI) or `https://api.anthropic.com` (Anthropic).
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f64>,
    /// Seconds for the whole request (connect + first byte + stream).
    pub timeout: f64,
    pub supports_thinking: bool,
    pub supports_vision: bool,
    pub context_window: Option<u64>,
    /// Another model's `name`, tried after this one's retries fail.
    pub fallback: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            display_name: None,
            provider: Provider::Openai,
            model: String::new(),
            base_url: String::new(),
            api_key: None,
            max_tokens: None,
            temperature: None,
            timeout: 600.0,
            supports_thinking: false,
            supports_vision: false,
            context_window: None,
            fallback: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LlmCallConfig {
    /// Attempts per model call including the first (connect errors, 408/409/425/429/5xx).
    pub retry_max_attempts: u32,
    pub retry_base_delay_ms: u64,
    pub retry_cap_delay_ms: u64,
}

impl Default for LlmCallConfig {
    fn default() -> Self {
        Self {
            retry_max_attempts: 3,
            retry_base_delay_ms: 1000,
            retry_cap_delay_ms: 8000,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct EnabledConfig {
    pub enabled: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LoopDetectionConfig {
    pub enabled: bool,
    pub warn_threshold: u32,
    pub hard_limit: u32,
    pub window_size: usize,
    pub max_tracked_threads: usize,
    pub tool_freq_warn: u32,
    pub tool_freq_hard_limit: u32,
    pub tool_freq_overrides: BTreeMap<String, ToolFreqOverride>,
}

impl Default for LoopDetectionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            warn_threshold: 3,
            hard_limit: 5,
            window_size: 20,
            max_tracked_threads: 100,
            tool_freq_warn: 30,
            tool_freq_hard_limit: 50,
            tool_freq_overrides: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ToolFreqOverride {
    pub warn: u32,
    pub hard_limit: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TokenBudgetConfig {
    pub enabled: bool,
    pub max_tokens: u64,
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub warn_threshold: f64,
    pub hard_stop_threshold: f64,
}

impl Default for TokenBudgetConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_tokens: 200_000,
            max_input_tokens: None,
            max_output_tokens: None,
            warn_threshold: 0.8,
            hard_stop_threshold: 1.0,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TitleConfig {
    pub enabled: bool,
    pub max_words: u32,
    pub max_chars: usize,
    /// A model name to write titles with; unset = the run's model. Either is asked in the
    /// background on persisted threads; the first user message is the title until it answers.
    pub model_name: Option<String>,
}

impl Default for TitleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_words: 6,
            max_chars: 60,
            model_name: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct GatewayConfig {
    pub listen: String,
    pub api_tokens: Vec<ApiToken>,
    pub shutdown_grace_seconds: u64,
    /// Connections the kernel queues before the daemon accepts them (capped by
    /// `net.core.somaxconn`).
    pub backlog: u32,
    /// Connections served at once; past it, new ones wait in the backlog.
    pub max_connections: usize,
    /// Largest request head (request line and headers) in bytes; larger gets 431.
    pub max_header_bytes: usize,
    /// Seconds a connection may sit without sending a complete request head (between
    /// requests, or a slow client mid-headers) before it is closed.
    pub idle_timeout_seconds: u64,
    /// Resident memory (MiB) past which new runs are refused with a notice instead of the
    /// daemon growing until the kernel kills it; runs in flight go on. 0 turns it off.
    pub max_rss_mb: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8787".into(),
            api_tokens: Vec::new(),
            shutdown_grace_seconds: 10,
            backlog: 1024,
            max_connections: 2048,
            max_header_bytes: 32 * 1024,
            idle_timeout_seconds: 60,
            max_rss_mb: 2048,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ApiToken {
    pub token: Secret,
    pub user: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct UploadsConfig {
    pub max_files: usize,
    pub max_file_size: u64,
    pub max_total_size: u64,
    pub auto_convert_documents: bool,
}

impl Default for UploadsConfig {
    fn default() -> Self {
        Self {
            max_files: 10,
            max_file_size: 50 * 1024 * 1024,
            max_total_size: 100 * 1024 * 1024,
            auto_convert_documents: false,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct AgentsConfig {
    /// Let ordinary users bootstrap their own agents.
    pub self_service: bool,
}

/// Which sandbox provider runs tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxProviderKind {
    /// bubblewrap when it works on this host, else `local` with bash disabled.
    #[default]
    Auto,
    Bwrap,
    Local,
    /// One container per (user, thread) through the Docker Engine API; needs a running engine.
    Docker,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SandboxConfig {
    pub provider: SandboxProviderKind,
    /// Let the `local` provider run shell commands on the host (no isolation besides paths).
    pub allow_host_bash: bool,
    /// Give bwrap commands network access.
    pub network: bool,
    /// Acquire the sandbox before the first model call instead of on the first tool call.
    pub eager: bool,
    /// Extra host directories visible at `container_path`.
    pub mounts: Vec<SandboxMountConfig>,
    /// Host directory shown read-only at `/mnt/skills`; unset = `skills/public` beside the config.
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
    /// CPU seconds per command (RLIMIT_CPU).
    pub cpu_seconds: u64,
    /// Address-space cap per process in MiB (RLIMIT_AS).
    pub memory_mb: u64,
    /// Process cap (RLIMIT_NPROC).
    pub max_processes: u64,
    /// Largest file a command may write, in MiB (RLIMIT_FSIZE).
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
    pub host_path: PathBuf,
    pub container_path: String,
    #[serde(default)]
    pub read_only: bool,
}

/// One configured tool: `use` names a built-in kind, the other keys are its parameters.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ToolConfig {
    pub name: String,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(rename = "use")]
    pub use_kind: String,
    #[serde(flatten)]
    pub params: BTreeMap<String, serde_json::Value>,
}

/// The built-in allowlist/denylist guardrail. The denylist wins; an empty allowlist allows
/// every tool not denied. With `policy_url`, every call the lists allow is also put to that
/// policy service.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct GuardrailsConfig {
    pub enabled: bool,
    /// Deny a call when the policy service cannot answer (unreachable, timeout, bad answer);
    /// otherwise allow it with a warning. The local lists themselves never fail.
    pub fail_closed: bool,
    pub allowed_tools: Vec<String>,
    pub denied_tools: Vec<String>,
    /// An HTTP policy service asked about each tool call (`POST`, JSON verdict).
    pub policy_url: Option<String>,
}

impl Default for GuardrailsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            fail_closed: true,
            allowed_tools: Vec::new(),
            denied_tools: Vec::new(),
            policy_url: None,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ToolGroupConfig {
    pub name: String,
}

impl AppConfig {
    /// The data directory in force. The loader fills `data_dir` with the resolved path
    /// (`$ANTLER_HOME`, else `./.antler`); this default only applies to hand-built configs.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".antler"))
    }

    pub fn model(&self, name: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|m| m.name == name)
    }

    pub fn default_model(&self) -> Option<&ModelConfig> {
        self.models.first()
    }

    /// The effective recursion limit for a requested value, clamped to `[1, max_recursion_limit]`.
    pub fn recursion_limit_for(&self, requested: Option<u32>) -> u32 {
        requested
            .unwrap_or(self.recursion_limit)
            .clamp(1, self.max_recursion_limit.max(1))
    }
}
