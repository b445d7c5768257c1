//! Custom agents: per-user personas (SOUL.md + config.yaml), their versioned storage, the
//! `setup_agent`/`update_agent` tools and the static system prompt they are run with.
//!
//! Layout under the data dir: `users/{user}/agents/{name}/{config.yaml,SOUL.md,history/}` and
//! the default agent's soul at `SOUL.md`. Names are validated before any path is built.

pub mod authorship;
pub mod bootstrap;
mod cache;
pub mod capabilities;
pub mod changes;
pub mod config;
mod durable;
mod file_names;
mod history;
pub mod prompt;
mod prompt_sections;
pub(crate) use prompt_sections::UNTRUSTED_CONTENT;
pub mod store;
pub mod surface;
pub mod tools;

pub use authorship::VersionAuthor;
pub use bootstrap::{DEFAULT_AGENT_KEYWORD, SetupTarget};
pub use cache::DEFAULT_CACHED_AGENTS;
pub use capabilities::{KnownCapabilities, UnknownCapabilities};
pub use config::{AgentConfig, AgentConfigError, ModelSettings, ReasoningEffort};
pub use prompt::{DEFAULT_AGENT_NAME, PromptOptions, SkillSummary, apply_prompt_template};
pub use store::{
    AgentStore, AgentStoreError, AgentUpdate, Changed, StoredAgent, VersionContent, VersionInfo,
};
pub use tools::{SETUP_AGENT, SetupAgentTool, UPDATE_AGENT, UpdateAgentTool};

/// Longest accepted agent name; it becomes a directory name.
pub const MAX_AGENT_NAME_LEN: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AgentNameError {
    #[error(
        "invalid agent name {0:?}: use 1 to 64 characters from letters, digits and '-' (no spaces, dots, slashes or underscores)"
    )]
    Invalid(String),
}

/// Checks a name against `^[A-Za-z0-9-]+$` (at most 64 characters) and returns it lower-cased,
/// the form it has on disk.
pub fn normalize_agent_name(name: &str) -> Result<String, AgentNameError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_AGENT_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if valid {
        Ok(name.to_ascii_lowercase())
    } else {
        Err(AgentNameError::Invalid(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_and_lower_cased() {
        assert_eq!(
            normalize_agent_name("Code-Reviewer2").unwrap(),
            "code-reviewer2"
        );
        for bad in ["", "a_b", "a.b", "../x", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(normalize_agent_name(bad).is_err(), "{bad:?}");
        }
    }
}
