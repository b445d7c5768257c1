//! What every sandbox provider is built from: the data dir, the skills, the `sandbox:` section
//! and the environment commands may inherit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{AppConfig, SandboxConfig};
use crate::paths::ThreadPaths;
use crate::sandbox::{MountPoint, PathMapper};

/// The skills one user's sandboxes show at `/mnt/skills`: decided outside the sandbox (enable
/// state, the user's own custom skills) and asked again whenever a sandbox is built.
pub trait SkillMounts: Send + Sync + std::fmt::Debug {
    /// Read-only mounts under `/mnt/skills`, the root first.
    fn mounts(&self, user_id: &str) -> Vec<MountPoint>;
}

/// What a provider needs to build sandboxes.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    pub data_dir: PathBuf,
    /// Shown read-only at `/mnt/skills` when it exists.
    pub skills_dir: Option<PathBuf>,
    /// When set, `/mnt/skills` shows only the skills this says (per user) instead of the whole
    /// `skills_dir`.
    pub skill_mounts: Option<Arc<dyn SkillMounts>>,
    pub sandbox: SandboxConfig,
    /// The environment commands may inherit from (after scrubbing); normally the process env.
    pub host_env: Vec<(String, String)>,
    /// This daemon's instance id when several daemons share the store (and maybe one Docker
    /// host): what it creates outside the data dir (containers) carries it, so instances never
    /// take over or remove each other's. `None` for a single daemon.
    pub instance: Option<String>,
}

impl ProviderSettings {
    /// Settings from the app config and the process environment. `skills_dir` falls back to
    /// `sandbox.skills_path`.
    pub fn from_config(config: &AppConfig, skills_dir: Option<PathBuf>) -> Self {
        Self {
            data_dir: config.data_dir(),
            skills_dir: config.sandbox.skills_path.clone().or(skills_dir),
            skill_mounts: None,
            sandbox: config.sandbox.clone(),
            host_env: std::env::vars().collect(),
            instance: None,
        }
    }
}

impl ProviderSettings {
    /// The skill mounts `user_id`'s sandboxes get now (`None`: the whole skills dir).
    pub fn skill_mounts_for(&self, user_id: &str) -> Option<Vec<MountPoint>> {
        self.skill_mounts
            .as_ref()
            .map(|source| source.mounts(user_id))
    }

    /// The mount table of a thread's sandbox, with `skills` from [`Self::skill_mounts_for`].
    pub fn mapper(&self, paths: &ThreadPaths, skills: Option<Vec<MountPoint>>) -> PathMapper {
        match skills {
            Some(skills) => PathMapper::with_skills(paths, skills, &self.sandbox.mounts),
            None => PathMapper::for_thread(
                paths,
                self.skills_dir.as_deref().map(Path::new),
                &self.sandbox.mounts,
            ),
        }
    }
}
