//! The typed configuration tree. Every struct has defaults.
//!
//! Unknown keys are load errors, but they are collected by the loader (`serde_ignored`) rather
//! than by `deny_unknown_fields`, which would stop at the first one: the operator should see
//! every typo at once, each with its key path.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Secret;
use crate::config::sandbox::SandboxConfig;

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
    /// The schema version the file was written for; when it is older than this binary's, the
    /// loader prints what changed since. Set it to the version of the shipped `config.yaml`.
    pub config_version: u32,
    /// `error|warn|info|debug|trace` or a full `tracing` filter (`antler=debug,info`).
    pub log_level: String,
    /// Log lines as text for a terminal, or JSON for a log collector.
    pub log_format: LogFormat,
    /// Where threads, agents and uploads live. Default: `$ANTLER_HOME`, else `./.antler`.
    pub data_dir: Option<PathBuf>,
    /// Antler user ids (`local`, `telegram-123`, a `gateway.api_tokens` user, …) allowed to
    /// bootstrap and manage agents for anyone. Channel admins are listed per channel.
    pub admins: Vec<String>,
    /// The chat models runs can use; at least one is required. The first entry is the default
    /// model.
    pub models: Vec<ModelConfig>,
    /// Steps (model calls and tool batches) one run may take before it stops without a final
    /// answer; an HTTP client may ask for another value per run.
    pub recursion_limit: u32,
    /// Upper clamp for a client-requested `recursion_limit`.
    pub max_recursion_limit: u32,
    /// Retries of a failed model call, with exponential backoff.
    pub llm_call: LlmCallConfig,
    /// Stops a model that keeps repeating the same tool calls.
    pub loop_detection: LoopDetectionConfig,
    /// Keep running token totals of each run and thread in its state (`/usage` reads them).
    pub token_usage: EnabledConfig,
    /// Caps the tokens a single run may spend: a warning, then a forced final answer.
    pub token_budget: TokenBudgetConfig,
    /// Naming threads after their first exchange.
    pub title: TitleConfig,
    /// When the provider stops an answer for safety reasons, drop its half-formed tool calls
    /// and tell the user instead of running them.
    pub safety_finish_reason: EnabledConfig,
    /// The HTTP server: address, API tokens, connection limits, shutdown.
    pub gateway: GatewayConfig,
    /// Limits of files uploaded to a thread.
    pub uploads: UploadsConfig,
    /// Limits of the child process that turns uploaded documents and fetched web pages into
    /// Markdown.
    pub conversion: antler_convert::ConversionConfig,
    /// Who may create custom agents.
    pub agents: AgentsConfig,
    /// Where tool commands and file operations run (`auto`, `bwrap`, `local`, `docker`) and
    /// their limits.
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Configured tools; empty = the built-in defaults (ls, read_file, glob, grep, write_file,
    /// str_replace, bash, and web_search with DuckDuckGo and web_fetch).
    #[serde(default)]
    pub tools: Vec<ToolConfig>,
    /// Named tool groups agents can whitelist; empty = `web`, `file:read`, `file:write`, `bash`.
    #[serde(default)]
    pub tool_groups: Vec<ToolGroupConfig>,
    /// IM channels (Telegram, …) and how chats map to threads and runs.
    #[serde(default)]
    pub channels: crate::config::channels::ChannelsConfig,
    /// Which tools the built-in guardrail lets the agent call.
    #[serde(default)]
    pub guardrails: GuardrailsConfig,
    /// The async runtime: how many threads run the daemon's tasks.
    pub runtime: crate::config::RuntimeConfig,
    /// The embedded store: page cache and retention.
    pub store: crate::config::StoreConfig,
    /// Bounds of the in-memory caches (thread states, agents, prompts).
    pub cache: crate::config::CacheConfig,
    /// Several daemons on one store: this daemon's instance id and the lease length.
    pub cluster: crate::config::ClusterConfig,
    /// Long-term memory per user and agent.
    pub memory: crate::config::MemoryConfig,
    /// Condensing long threads into a summary (off by default).
    pub summarization: crate::config::summarization::SummarizationConfig,
    /// Limits in tokens and money per user and per custom agent, checked before every model call.
    pub budgets: crate::config::budgets::BudgetsConfig,
    /// Each model's price per million tokens (`input`, `output`, `cached_input`) in `currency`;
    /// the old map of model → `{input_per_million, output_per_million}` reads as USD.
    pub pricing: crate::config::budgets::PricingConfig,
    /// Sub-agents the `task` tool runs: timeouts, the per-run cap, custom types.
    pub subagents: crate::config::subagents::SubagentsConfig,
    /// Deferred MCP tools: schemas hidden until the model finds them with `tool_search`.
    pub tool_search: EnabledConfig,
    /// Accounts provisioned to one user across apps (`- user: alice` with `slack: [U…]`,
    /// `telegram: [123]`, …). They win over links made with `/link` or `antler users link`.
    pub identities: Vec<crate::config::IdentityConfig>,
    /// Tool calls that wait for a person's yes: always, or once untrusted content is in the
    /// thread; who decides and how long a request waits.
    pub approvals: crate::config::approvals::ApprovalsConfig,
    /// Scheduled tasks (the `schedule_task` tool): on by default; limits per user and slot.
    pub scheduler: crate::config::scheduler::SchedulerConfig,
    /// Voice notes transcribed before the turn; answers spoken after it.
    pub voice: crate::config::voice::VoiceConfig,
    /// OpenTelemetry traces of runs (`telemetry.otlp`), off by default.
    pub telemetry: crate::config::telemetry::TelemetryConfig,
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
            conversion: Default::default(),
            agents: AgentsConfig::default(),
            sandbox: SandboxConfig::default(),
            tools: Vec::new(),
            tool_groups: Vec::new(),
            channels: Default::default(),
            guardrails: GuardrailsConfig::default(),
            runtime: Default::default(),
            store: Default::default(),
            cache: Default::default(),
            cluster: Default::default(),
            memory: Default::default(),
            summarization: Default::default(),
            budgets: Default::default(),
            pricing: Default::default(),
            subagents: Default::default(),
            tool_search: EnabledConfig::default(),
            identities: Vec::new(),
            approvals: Default::default(),
            scheduler: Default::default(),
            voice: Default::default(),
            telemetry: Default::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
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
    /// The name runs, agents, `fallback` and `*.model_name` keys refer to; unique.
    #[schemars(extend("x-required" = true))]
    pub name: String,
    /// Shown in model pickers (`GET /api/models`, the web chat); unset = `name`.
    pub display_name: Option<String>,
    /// The wire protocol the provider speaks.
    pub provider: Provider,
    /// The provider's model id (`gpt-4o`, `qwen2.5:7b`, `claude-sonnet-4-5`).
    #[schemars(extend("x-required" = true))]
    pub model: String,
    /// API root, e.g. `https://api.openai.com/v1` (OpenAI) or `https://api.anthropic.com` (Anthropic).
    #[schemars(extend("x-required" = true))]
    pub base_url: String,
    /// The provider's API key, e.g. `$OPENAI_API_KEY`; unset for local servers that need none.
    pub api_key: Option<Secret>,
    /// Most tokens one answer may have (the request's `max_tokens`); unset = the provider's
    /// default (4096 for Anthropic, which requires one).
    pub max_tokens: Option<u32>,
    /// Sampling temperature (0–2); unset = the provider's default.
    pub temperature: Option<f64>,
    /// Seconds for the whole request (connect + first byte + stream).
    pub timeout: f64,
    /// The model can reason before answering; runs that ask for thinking get it only then.
    pub supports_thinking: bool,
    /// The model reads images: agents on it get the `view_image` tool.
    pub supports_vision: bool,
    /// The model's context size in tokens; `summarization` triggers of type `fraction` use it.
    pub context_window: Option<u64>,
    /// Another model's `name`, tried after this one's retries fail.
    pub fallback: Option<String>,
    /// The variables the settings came from (not a key: the loader fills it in).
    #[serde(skip)]
    #[schemars(skip)]
    pub sources: crate::config::ModelSources,
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
            sources: Default::default(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LlmCallConfig {
    /// Attempts per model call including the first (connect errors, 408/409/425/429/5xx).
    pub retry_max_attempts: u32,
    /// Milliseconds before the first retry; each later wait doubles, with jitter (a server's
    /// `Retry-After` wins).
    pub retry_base_delay_ms: u64,
    /// Longest wait between two attempts, in milliseconds.
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
    /// Turns the feature on.
    pub enabled: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LoopDetectionConfig {
    /// Watch runs for repeated tool calls.
    pub enabled: bool,
    /// The same batch of tool calls (same names and arguments) seen this often within
    /// `window_size` answers: the model is warned to stop and answer.
    pub warn_threshold: u32,
    /// The same batch seen this often within `window_size` answers: its tool calls are dropped
    /// and the run gives its final answer.
    pub hard_limit: u32,
    /// Recent answers of a thread compared for repeats.
    pub window_size: usize,
    /// Threads whose recent calls are remembered; the least recently active are forgotten.
    pub max_tracked_threads: usize,
    /// Calls of one tool (any arguments) within the recent window before the model is warned.
    pub tool_freq_warn: u32,
    /// Calls of one tool within the recent window before the run is made to answer.
    pub tool_freq_hard_limit: u32,
    /// Per-tool `warn` and `hard_limit` instead of `tool_freq_*`, by tool name (a tool that is
    /// legitimately called often, such as `read_file`).
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
    /// Calls of this tool before the model is warned.
    pub warn: u32,
    /// Calls of this tool before the run is made to answer; at least `warn`.
    pub hard_limit: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TokenBudgetConfig {
    /// Cap the tokens of each run.
    pub enabled: bool,
    /// Tokens (input + output, summed over the run's model calls) one run may use; at least
    /// 1000.
    pub max_tokens: u64,
    /// A separate cap on input tokens; unset = only `max_tokens`.
    pub max_input_tokens: Option<u64>,
    /// A separate cap on output tokens; unset = only `max_tokens`.
    pub max_output_tokens: Option<u64>,
    /// Fraction of a budget (0–1) at which the model is told once to wrap up.
    pub warn_threshold: f64,
    /// Fraction of a budget at which pending tool calls are dropped and the run ends with its
    /// answer so far (`stop_reason: token_capped`).
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
    /// Give threads a title after their first exchange (thread lists, `/status`).
    pub enabled: bool,
    /// Words a title may have (1–20).
    pub max_words: u32,
    /// Characters a title may have (10–200).
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
    /// Address and port of the HTTP API, web chat, webhooks, `/healthz` and `/metrics`
    /// (`localhost:PORT` means `127.0.0.1:PORT`). On an address other hosts can reach, the API
    /// answers 401 until there is a token (`api_tokens` or `ANTLER_API_TOKEN`).
    pub listen: String,
    /// Bearer tokens for the HTTP API, each acting as one user. None on a loopback `listen`:
    /// every request is the single user `local`. While this is empty, `ANTLER_API_TOKEN` (when
    /// set) is the token of the user `local`, who keeps the operator's rights.
    pub api_tokens: Vec<ApiToken>,
    /// Seconds in-flight runs get to finish after SIGTERM before they are cancelled.
    pub shutdown_grace_seconds: u64,
    /// Connections the kernel queues before the daemon accepts them (capped by
    /// `net.core.somaxconn`).
    pub backlog: u32,
    /// Connections served at once. At the cap the connection idle longest is closed to make
    /// room; with none idle, new ones wait. A few slots stay for loopback clients (health
    /// checks).
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64) may hold at once. Past it the client's
    /// idle connection is closed to make room; with none idle, the new one is refused.
    pub max_connections_per_ip: usize,
    /// Largest request head (request line and headers) in bytes; larger gets 431.
    pub max_header_bytes: usize,
    /// Seconds a connection may sit without sending a complete request head (between
    /// requests, or a slow client mid-headers) before it is closed.
    pub idle_timeout_seconds: u64,
    /// Resident memory (MiB) past which new runs are refused with a notice instead of the
    /// daemon growing until the kernel kills it; runs in flight go on. 0 turns it off.
    pub max_rss_mb: u64,
    /// Host names (or addresses) besides loopback ones and `listen`'s that requests may name
    /// in their `Host` header while `api_tokens` is empty, e.g. a reverse proxy's name. Other
    /// hosts get 421, so a web page cannot reach the API through DNS rebinding. A browser
    /// page whose origin has one of these hosts counts as the daemon's own.
    pub allowed_hosts: Vec<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8787".into(),
            api_tokens: Vec::new(),
            shutdown_grace_seconds: 10,
            backlog: 1024,
            max_connections: 2048,
            max_connections_per_ip: 256,
            max_header_bytes: 32 * 1024,
            idle_timeout_seconds: 60,
            max_rss_mb: 2048,
            allowed_hosts: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ApiToken {
    /// The bearer token clients send (`Authorization: Bearer …`); unique, e.g. `$ANTLER_TOKEN`.
    pub token: Secret,
    /// The Antler user id requests with this token act as (letters, digits, `_`, `-`).
    pub user: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct UploadsConfig {
    /// Files one upload may carry: one HTTP upload request (more are refused with 413), or one
    /// chat message (the files after these are not stored, and the reply names them). What a
    /// thread holds in all is bounded by `max_total_size`.
    pub max_files: usize,
    /// Largest single upload or chat attachment, in bytes (default 50 MiB).
    pub max_file_size: u64,
    /// All of a thread's uploads together, HTTP and chat attachments alike, in bytes (default
    /// 100 MiB).
    pub max_total_size: u64,
    /// Convert uploaded `.pdf`, `.docx`, `.xlsx` and `.pptx` files to a Markdown copy the agent
    /// can read. Off by default: parsing untrusted documents is a risk.
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

/// One configured tool: `use` names a built-in kind, the other keys are its parameters.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ToolConfig {
    /// The name the model calls the tool by; unique.
    pub name: String,
    /// A `tool_groups` name; agents that whitelist groups see only their groups' tools.
    #[serde(default)]
    pub group: Option<String>,
    /// The built-in kind: `bash`, `ls`, `read_file`, `write_file`, `str_replace`, `glob`,
    /// `grep`, `view_image`, `web_search` or `web_fetch`.
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
    /// Check every tool call against the lists (and `policy_url`) before it runs.
    pub enabled: bool,
    /// Deny a call when the policy service cannot answer (unreachable, timeout, bad answer);
    /// otherwise allow it with a warning. The local lists themselves never fail.
    pub fail_closed: bool,
    /// Tool names the agent may call; empty = every tool not denied.
    pub allowed_tools: Vec<String>,
    /// Tool names the agent may never call; wins over `allowed_tools`.
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
    /// The group's name, as `tools[].group` and an agent's `tool_groups` refer to it.
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

    /// The problems of the sections that check themselves (`runtime`, `conversion`).
    pub(crate) fn section_problems(&self) -> Vec<crate::config::ConfigProblem> {
        let conversion = self
            .conversion
            .problems()
            .into_iter()
            .map(|(key, message)| {
                crate::config::ConfigProblem::new(format!("conversion.{key}"), message)
            });
        self.runtime
            .problems()
            .into_iter()
            .chain(conversion)
            .chain(self.cluster.problems())
            .collect()
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
