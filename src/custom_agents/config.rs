//! `AgentConfig`: what one custom agent may use (model, tool groups, skills, model settings),
//! stored as `config.yaml` next to its SOUL.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Highest accepted `model_settings.max_tokens`.
pub const MAX_AGENT_MAX_TOKENS: u32 = 200_000;

/// One agent's configuration. Absent lists mean "everything the server offers"; an empty list
/// means "nothing".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    /// The agent's (lower-cased) name; on disk it always equals the directory name.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Preferred model (a `models[].name`); a run's requested model still wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Allowed tool groups; `None` = all groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_groups: Option<Vec<String>>,
    /// Enabled skills; `None` = all enabled skills, `[]` = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "ModelSettings::is_empty")]
    pub model_settings: ModelSettings,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Tool patterns this agent adds to the daemon's `approvals.tools` and
    /// `approvals.when_untrusted` (never removes any).
    #[serde(
        default,
        skip_serializing_if = "crate::config::approvals::ApprovalAdditions::is_empty"
    )]
    pub approvals: crate::config::approvals::ApprovalAdditions,
    /// Keys Antler does not manage (e.g. integration bindings), kept verbatim across updates.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// Per-agent overrides of the model's sampling settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// 0.0 ..= 2.0
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// 1 ..= 200000
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

impl ModelSettings {
    pub fn is_empty(&self) -> bool {
        self.temperature.is_none() && self.max_tokens.is_none()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentConfigError {
    #[error("config.yaml is not valid: {0}; fix the file or revert to an earlier version")]
    Parse(String),
    #[error("could not write config.yaml: {0}")]
    Serialize(String),
    #[error("model_settings.temperature must be between 0 and 2, got {0}")]
    Temperature(f64),
    #[error("model_settings.max_tokens must be between 1 and {MAX_AGENT_MAX_TOKENS}, got {0}")]
    MaxTokens(u32),
}

impl AgentConfig {
    /// A config with just a name and description (everything else: server defaults).
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            ..Default::default()
        }
    }

    /// Checks value ranges (names are checked by the store, which owns the directory layout).
    pub fn validate(&self) -> Result<(), AgentConfigError> {
        if let Some(t) = self.model_settings.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(AgentConfigError::Temperature(t));
        }
        if let Some(m) = self.model_settings.max_tokens
            && !(1..=MAX_AGENT_MAX_TOKENS).contains(&m)
        {
            return Err(AgentConfigError::MaxTokens(m));
        }
        Ok(())
    }

    /// Parses and validates `config.yaml` text.
    pub fn from_yaml(text: &str) -> Result<Self, AgentConfigError> {
        let config: AgentConfig =
            serde_saphyr::from_str(text).map_err(|e| AgentConfigError::Parse(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Renders `config.yaml` (fields in declaration order, unicode kept as is).
    pub fn to_yaml(&self) -> Result<String, AgentConfigError> {
        self.validate()?;
        serde_saphyr::to_string(self).map_err(|e| AgentConfigError::Serialize(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_round_trips_and_keeps_unknown_keys() {
        let text = "name: rev\ndescription: \"Reviews: code\"\nskills: []\nmodel_settings:\n  temperature: 0.5\nreasoning_effort: high\ngithub:\n  repo: a/b\n";
        let config = AgentConfig::from_yaml(text).unwrap();
        assert_eq!(config.skills, Some(vec![]));
        assert_eq!(config.tool_groups, None);
        assert_eq!(config.reasoning_effort, Some(ReasoningEffort::High));
        assert_eq!(config.extra["github"]["repo"], "a/b");
        let again = AgentConfig::from_yaml(&config.to_yaml().unwrap()).unwrap();
        assert_eq!(again, config);
    }

    #[test]
    fn writes_readable_yaml_in_field_order() {
        let mut config = AgentConfig::new("rev", "Reviews code");
        config.skills = Some(vec![]);
        config.model_settings.max_tokens = Some(4096);
        assert_eq!(
            config.to_yaml().unwrap(),
            "name: rev\ndescription: Reviews code\nskills: []\nmodel_settings:\n  max_tokens: 4096\n"
        );
    }

    #[test]
    fn quoting_survives_awkward_descriptions() {
        let mut config = AgentConfig::new("x", "a: b # c\n- d 'e' \"f\" 中文 yes");
        config.model = Some("null".into());
        let again = AgentConfig::from_yaml(&config.to_yaml().unwrap()).unwrap();
        assert_eq!(again, config);
    }

    #[test]
    fn out_of_range_settings_are_rejected() {
        let mut config = AgentConfig::new("x", "");
        config.model_settings.temperature = Some(2.5);
        assert!(matches!(
            config.validate(),
            Err(AgentConfigError::Temperature(_))
        ));
        config.model_settings.temperature = Some(2.0);
        config.model_settings.max_tokens = Some(0);
        assert!(matches!(
            config.validate(),
            Err(AgentConfigError::MaxTokens(0))
        ));
        assert!(AgentConfig::from_yaml("name: x\nmodel_settings:\n  top_k: 3\n").is_err());
    }
}
