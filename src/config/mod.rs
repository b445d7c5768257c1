//! Configuration: one typed tree (`schema`), loaded from YAML with `$ENV` resolution, validated
//! with every problem reported by key path, and hot-reloaded when the file changes.

pub mod approvals;
pub mod budgets;
pub mod channels;
pub mod check;
pub mod cluster;
mod decode;
pub mod env;
mod gateway_checks;
pub mod handle;
pub mod identities;
pub mod load;
pub mod locate;
pub mod memory;
pub mod model_sources;
mod problem;
pub mod reference;
pub mod runtime;
pub mod sandbox;
pub mod scheduler;
pub mod schema;
pub mod storage;
pub mod subagents;
pub mod summarization;
pub mod telemetry;
pub mod validate;
pub mod voice;
pub mod watch;
pub mod webhook;

pub use antler_channel::{GroupPolicy, Secret, SessionConfig};
pub use channels::{ChannelsConfig, ContextConfig, StreamConfig};
pub use check::{EXIT_CONFIG_INVALID, EXIT_OK, run_check};
pub use cluster::ClusterConfig;
pub use env::{EnvSource, MapEnv, ProcessEnv};
pub use handle::{ConfigHandle, ReloadRecord};
pub use identities::IdentityConfig;
pub use load::{
    API_TOKEN_ENV, CONFIG_FILE_NAME, ConfigError, ConfigOrigin, DEFAULT_CONFIG_YAML, LoadedConfig,
    config_candidates, load_config, load_embedded_default, load_from_file, load_from_str,
    resolve_config_path, shipped_skills_dir,
};
pub use locate::{Locator, read_locator};
pub use memory::MemoryConfig;
pub use model_sources::{ModelSetting, ModelSources};
pub use problem::ConfigProblem;
pub use runtime::RuntimeConfig;
pub use sandbox::{DockerSandboxConfig, SandboxConfig, SandboxMountConfig, SandboxProviderKind};
pub use schema::*;
pub use storage::{CacheConfig, PostgresConfig, StoreBackend, StoreConfig};
pub use telemetry::{OtlpConfig, OtlpProtocol, TelemetryConfig};
pub use watch::{
    ConfigWatcher, DEFAULT_POLL_INTERVAL, FileSignature, PollOutcome, ReloadHook, ReloadPhase,
};
