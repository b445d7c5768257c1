//! What every sandbox provider is built from: the data dir, the skills, the `sandbox:` section
//! and the environment commands may inherit.

use std::path::PathBuf;

use crate::config::{AppConfig, SandboxConfig};

/// What a provider needs to build sandboxes.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    pub data_dir: PathBuf,
    /// Shown read-only at `/mnt/skills` when it exists.
    pub skills_dir: Option<PathBuf>,
    pub sandbox: SandboxConfig,
    /// The environment commands may inherit from (after scrubbing); normally the process env.
    pub host_env: Vec<(String, String)>,
}

impl ProviderSettings {
    /// Settings from the app config and the process environment. `skills_dir` falls back to
    /// `sandbox.skills_path`.
    pub fn from_config(config: &AppConfig, skills_dir: Option<PathBuf>) -> Self {
        Self {
            data_dir: config.data_dir(),
            skills_dir: config.sandbox.skills_path.clone().or(skills_dir),
            sandbox: config.sandbox.clone(),
            host_env: std::env::vars().collect(),
        }
    }
}
