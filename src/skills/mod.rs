//! Skills: `SKILL.md` packages (the Anthropic format) the agent reads when a task calls for
//! them.
//!
//! Public skills ship inside the binary ([`bundled`], installed into the data dir) unless the
//! skills directory is set (`sandbox.skills_path`, or `skills/public` beside the config file);
//! each user installs custom skills into `{data_dir}/users/{user}/skills/custom/`. The
//! [`SkillCatalog`] says which a user sees and which are enabled (records in the store); the
//! prompt lists them (progressive disclosure), the sandbox mounts the enabled ones read-only
//! at `/mnt/skills/{dir}`, and `/skill-name task` activates one for a turn
//! ([`activation`]). Archives are unpacked by [`installer`] under its safety rules.

pub mod activation;
pub mod bundled;
pub mod catalog;
pub mod chat;
pub mod fit;
pub mod front_matter;
pub mod installer;
mod scan;
pub mod state;

pub use activation::SkillActivationMiddleware;
pub use catalog::{Skill, SkillCatalog, SkillSource};
pub use front_matter::{SkillFormatError, SkillMeta, parse_skill_md};
pub use installer::ArchiveError;
pub use scan::{ScannedSkill, SkillsLoader, load_dir, skills_dir};

use antler_store::StoreError;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// The skill a bootstrap conversation runs with.
pub const BOOTSTRAP_SKILL: &str = "bootstrap";

/// Chat and console command names: `/new` must always mean the command, so no skill may take
/// one of these names.
pub const RESERVED_NAMES: &[&str] = &[
    "agent",
    "approve",
    "bootstrap",
    "cancel",
    "deny",
    "exit",
    "forget",
    "goal",
    "help",
    "link",
    "memory",
    "model",
    "models",
    "new",
    "plan",
    "quit",
    "schedules",
    "skills",
    "start",
    "status",
    "stop",
    "unlink",
    "unschedule",
    "usage",
    "voice",
];

/// Whether `name` is a command name no skill may use.
pub fn is_reserved_name(name: &str) -> bool {
    RESERVED_NAMES.contains(&name)
}

/// Why a skill operation failed; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error(
        "no skill named '{name}' is visible to you; list them with `antler skills list` or GET /api/skills"
    )]
    NotFound { name: String },
    #[error(
        "'{name}' is a public skill shipped with Antler; it cannot be removed (disable it instead)"
    )]
    PublicReadOnly { name: String },
    #[error("only an admin can enable or disable the public skill '{name}'")]
    AdminOnly { name: String },
    #[error(
        "a skill named '{name}' is already installed; remove it first (`antler skills remove {name}`) or rename the new one"
    )]
    Exists { name: String },
    #[error("'{name}' is a chat command name (/{name}); rename the skill")]
    Reserved { name: String },
    #[error("cannot install the skill: {0}")]
    Archive(#[from] ArchiveError),
    #[error("{0}")]
    InvalidUser(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("skill files: {detail}; check that the data directory is writable")]
    Io { detail: String },
}
