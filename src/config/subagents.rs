//! `subagents.*`: the sub-agents a run may delegate to with the `task` tool (DeerFlow's
//! `SubagentsConfig`): per-type timeouts, the per-run delegation cap, and custom types.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

/// The built-in sub-agent types, in the order they are listed to the model.
pub const BUILTIN_TYPES: [&str; 2] = ["general-purpose", "bash"];
/// Seconds a sub-agent may run when `subagents.timeouts` does not name its type.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 900;
/// The `bash` type's default: command runs are short or they are stuck.
pub const BASH_TIMEOUT_SECONDS: u64 = 300;
pub const DEFAULT_MAX_TOTAL_PER_RUN: u32 = 6;
pub const MAX_TOTAL_PER_RUN_CEILING: u32 = 50;
/// The tools no sub-agent gets unless a custom type's `disallowed_tools` says otherwise
/// (`task` is never given, whatever the lists say).
pub const DEFAULT_DISALLOWED: [&str; 3] = ["task", "ask_clarification", "present_files"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SubagentsConfig {
    /// Sub-agents for chat-channel turns (chats have no per-run options); HTTP runs ask with
    /// the `subagent_enabled` run option.
    pub enabled: bool,
    /// `task` calls allowed in one run, over all its model responses (clamped to 1–50).
    pub max_total_per_run: u32,
    /// Seconds per sub-agent type (`general-purpose`, `bash` or a custom name); a custom type's
    /// own `timeout_seconds` wins.
    pub timeouts: BTreeMap<String, u64>,
    /// Extra sub-agent types by name.
    pub custom_agents: BTreeMap<String, CustomSubagentConfig>,
}

impl Default for SubagentsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_total_per_run: DEFAULT_MAX_TOTAL_PER_RUN,
            timeouts: BTreeMap::new(),
            custom_agents: BTreeMap::new(),
        }
    }
}

/// A custom sub-agent type the lead agent can pick by name in `task` calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CustomSubagentConfig {
    /// When to use it: shown to the lead model in the `task` tool's description.
    #[schemars(extend("x-required" = true))]
    pub description: String,
    /// The sub-agent's instructions.
    #[schemars(extend("x-required" = true))]
    pub system_prompt: String,
    /// Allowlist of tool names; unset = every tool the lead agent has.
    pub tools: Option<Vec<String>>,
    /// Removed after the allowlist.
    pub disallowed_tools: Vec<String>,
    /// Skills listed in its prompt; unset = every skill.
    pub skills: Option<Vec<String>>,
    /// A `models[].name`, or `inherit` (the lead run's model).
    pub model: String,
    /// Steps (model calls and tool batches) it may take (1–1000), unless the `task` call
    /// names another cap.
    pub max_turns: u32,
    /// Seconds it may run (1–86400); unset = `subagents.timeouts.<name>`, else 900.
    pub timeout_seconds: Option<u64>,
}

impl Default for CustomSubagentConfig {
    fn default() -> Self {
        Self {
            description: String::new(),
            system_prompt: String::new(),
            tools: None,
            disallowed_tools: DEFAULT_DISALLOWED.iter().map(|s| s.to_string()).collect(),
            skills: None,
            model: INHERIT.to_string(),
            max_turns: 50,
            timeout_seconds: None,
        }
    }
}

/// `model: inherit`: the sub-agent uses the lead run's model.
pub const INHERIT: &str = "inherit";

impl SubagentsConfig {
    /// `max_total_per_run` clamped to [1, 50].
    pub fn max_total(&self) -> u32 {
        clamp_total(self.max_total_per_run)
    }

    /// The timeout of `subagent_type`: the custom type's own, then `timeouts.<type>`, then
    /// 300 s for `bash` and 900 s for everything else.
    pub fn timeout_seconds(&self, subagent_type: &str) -> u64 {
        self.custom_agents
            .get(subagent_type)
            .and_then(|custom| custom.timeout_seconds)
            .or_else(|| self.timeouts.get(subagent_type).copied())
            .unwrap_or(if subagent_type == "bash" {
                BASH_TIMEOUT_SECONDS
            } else {
                DEFAULT_TIMEOUT_SECONDS
            })
    }

    /// Every problem of the section, by key path; `has_model` tells whether a model name exists.
    pub fn problems(&self, has_model: impl Fn(&str) -> bool) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut require = |ok: bool, path: String, message: String| {
            if !ok {
                problems.push(ConfigProblem::new(path, message));
            }
        };
        for (name, seconds) in &self.timeouts {
            let known =
                BUILTIN_TYPES.contains(&name.as_str()) || self.custom_agents.contains_key(name);
            require(
                known,
                format!("subagents.timeouts.{name}"),
                format!(
                    "names no sub-agent type; use one of {}",
                    self.type_names().join(", ")
                ),
            );
            require(
                (1..=86_400).contains(seconds),
                format!("subagents.timeouts.{name}"),
                "must be between 1 and 86400 seconds".into(),
            );
        }
        for (name, custom) in &self.custom_agents {
            let key = |field: &str| format!("subagents.custom_agents.{name}.{field}");
            require(
                is_type_name(name),
                format!("subagents.custom_agents.{name}"),
                "a type name is 1 to 64 lowercase letters, digits, `-` or `_`".into(),
            );
            require(
                !BUILTIN_TYPES.contains(&name.as_str()),
                format!("subagents.custom_agents.{name}"),
                "is a built-in type; choose another name (built-ins are configured under subagents.timeouts)".into(),
            );
            require(
                !custom.description.trim().is_empty(),
                key("description"),
                "must say when the lead agent should use this type".into(),
            );
            require(
                !custom.system_prompt.trim().is_empty(),
                key("system_prompt"),
                "must not be empty: it is the sub-agent's instructions".into(),
            );
            require(
                (1..=1000).contains(&custom.max_turns),
                key("max_turns"),
                "must be between 1 and 1000".into(),
            );
            if let Some(seconds) = custom.timeout_seconds {
                require(
                    (1..=86_400).contains(&seconds),
                    key("timeout_seconds"),
                    "must be between 1 and 86400 seconds".into(),
                );
            }
            require(
                custom.model == INHERIT || has_model(&custom.model),
                key("model"),
                format!(
                    "names no model `{}`; use a `name` from models, or `inherit`",
                    custom.model
                ),
            );
            if let Some(tools) = &custom.tools {
                require(
                    !tools.iter().any(|t| t == "task"),
                    key("tools"),
                    "sub-agents never get the `task` tool; remove it".into(),
                );
            }
        }
        problems
    }

    /// Built-in types first, then custom ones by name.
    pub fn type_names(&self) -> Vec<String> {
        BUILTIN_TYPES
            .iter()
            .map(|s| s.to_string())
            .chain(self.custom_agents.keys().cloned())
            .collect()
    }
}

/// `max_total_per_run` (or the run's `max_total_subagents`) clamped to [1, 50].
pub fn clamp_total(requested: u32) -> u32 {
    requested.clamp(1, MAX_TOTAL_PER_RUN_CEILING)
}

fn is_type_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(config: &SubagentsConfig) -> Vec<String> {
        config
            .problems(|name| name == "known")
            .into_iter()
            .map(|p| p.path)
            .collect()
    }

    #[test]
    fn defaults_are_valid_and_timeouts_follow_the_type() {
        let config = SubagentsConfig::default();
        assert!(keys(&config).is_empty());
        assert_eq!(config.timeout_seconds("general-purpose"), 900);
        assert_eq!(config.timeout_seconds("bash"), 300);
        assert_eq!(config.max_total(), 6);
    }

    #[test]
    fn out_of_range_totals_are_clamped() {
        let mut config = SubagentsConfig {
            max_total_per_run: 0,
            ..Default::default()
        };
        assert_eq!(config.max_total(), 1);
        config.max_total_per_run = 500;
        assert_eq!(config.max_total(), 50);
    }

    #[test]
    fn problems_name_their_keys() {
        let mut config = SubagentsConfig::default();
        config.timeouts.insert("nope".into(), 10);
        config.timeouts.insert("bash".into(), 0);
        config.custom_agents.insert(
            "Bad Name".into(),
            CustomSubagentConfig {
                description: "x".into(),
                system_prompt: "y".into(),
                ..Default::default()
            },
        );
        config.custom_agents.insert(
            "researcher".into(),
            CustomSubagentConfig {
                model: "missing".into(),
                max_turns: 0,
                tools: Some(vec!["task".into()]),
                timeout_seconds: Some(60),
                ..Default::default()
            },
        );
        let keys = keys(&config);
        for expected in [
            "subagents.timeouts.nope",
            "subagents.timeouts.bash",
            "subagents.custom_agents.Bad Name",
            "subagents.custom_agents.researcher.description",
            "subagents.custom_agents.researcher.system_prompt",
            "subagents.custom_agents.researcher.max_turns",
            "subagents.custom_agents.researcher.model",
            "subagents.custom_agents.researcher.tools",
        ] {
            assert!(keys.iter().any(|k| k == expected), "{expected} in {keys:?}");
        }
        assert_eq!(config.timeout_seconds("researcher"), 60);
    }
}
