//! The lead agent: the app-level agent every run of the daemon and the embedded client uses.
//!
//! This is the seed of DeerFlow's `make_lead_agent`: it resolves the model for a run, downgrades
//! options the model cannot honour, and assembles the agent through the SDK factory. Custom
//! agents, SOUL.md, skills and the full prompt assembly grow here later.

use std::sync::Arc;

use crate::agent::{
    Agent, AgentBuildError, AgentOptions, Feature, RunOptions, RuntimeFeatures, create_agent,
};
use crate::config::AppConfig;
use crate::model::ModelRegistry;
use crate::sandbox::SandboxProvider;
use crate::store::Checkpointer;
use crate::tools::registry::ToolRegistry;

/// The static system prompt; dynamic context (date, memory) is injected as messages, not here,
/// so the prompt stays cacheable by providers.
pub const LEAD_SYSTEM_PROMPT: &str = "You are Antler, a self-hosted AI assistant. Answer clearly and \
concisely. When a request is ambiguous or missing information you need, ask a clarifying question \
instead of guessing. Use the tools you are given when they help, and say plainly when you cannot do \
something.";

pub const LEAD_AGENT_NAME: &str = "lead_agent";

#[derive(Debug, thiserror::Error)]
pub enum LeadAgentError {
    #[error("no model is configured; add an entry under `models:` in config.yaml")]
    NoModel,
    #[error("could not assemble the lead agent: {0}")]
    Build(#[from] AgentBuildError),
}

/// A built lead agent and the options the run must use (model resolved, thinking downgraded).
pub struct LeadAgent {
    pub agent: Agent,
    pub options: RunOptions,
    /// Why requested options were changed; surfaces may show these to the user.
    pub warnings: Vec<String>,
}

/// What the factory builds from, besides the request and the config.
#[derive(Clone)]
pub struct LeadAgentDeps<'a> {
    pub models: &'a ModelRegistry,
    /// The configured tools; `None` builds an agent without tools.
    pub tools: Option<&'a ToolRegistry>,
    pub sandbox: Option<Arc<dyn SandboxProvider>>,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
}

impl<'a> LeadAgentDeps<'a> {
    /// Just a model registry: no tools, no sandbox, no checkpoints (tests, benches).
    pub fn models_only(models: &'a ModelRegistry) -> Self {
        Self {
            models,
            tools: None,
            sandbox: None,
            checkpointer: None,
        }
    }
}

/// Builds the lead agent for one run.
///
/// Model: the requested `model_name` if configured, else `models[0]` (an unknown name falls back
/// with a warning). Thinking is turned off, with a warning, when the model lacks
/// `supports_thinking`.
pub fn make_lead_agent(
    options: &RunOptions,
    config: &Arc<AppConfig>,
    deps: LeadAgentDeps<'_>,
) -> Result<LeadAgent, LeadAgentError> {
    let models = deps.models;
    let mut options = options.clone();
    let mut warnings = Vec::new();
    let requested = options.model_name.as_deref();
    let (model_name, model) = match requested
        .and_then(|name| models.get(name).map(|m| (name.to_string(), m)))
    {
        Some(found) => found,
        None => {
            let fallback = models.resolve(None).ok_or(LeadAgentError::NoModel)?;
            if let Some(unknown) = requested {
                let warning = format!(
                    "model {unknown:?} is not configured; using the default model {:?}",
                    fallback.0
                );
                tracing::warn!(requested = unknown, default = %fallback.0, "Unknown model requested, using the default");
                warnings.push(warning);
            }
            fallback
        }
    };
    let supports_thinking = models
        .config(&model_name)
        .or_else(|| config.model(&model_name))
        .is_some_and(|m| m.supports_thinking);
    if options.thinking() && !supports_thinking {
        if options.thinking_enabled == Some(true) {
            tracing::warn!(model = %model_name, "Thinking requested but the model does not support it; disabled");
            warnings.push(format!(
                "model {model_name:?} does not support thinking; thinking is disabled for this run"
            ));
        } else {
            tracing::debug!(model = %model_name, "Model does not support thinking; running without it");
        }
        options.thinking_enabled = Some(false);
    }
    options.model_name = Some(model_name);
    let features = RuntimeFeatures {
        auto_title: Feature::BuiltIn,
        ..RuntimeFeatures::default()
    };
    let tools = deps
        .tools
        .map(|registry| registry.tools_for_groups(None))
        .unwrap_or_default();
    let agent = create_agent(
        model,
        tools,
        AgentOptions {
            system_prompt: Some(LEAD_SYSTEM_PROMPT.to_string()),
            features: Some(features),
            plan_mode: options.is_plan_mode,
            checkpointer: deps.checkpointer,
            sandbox_provider: deps.sandbox,
            name: Some(LEAD_AGENT_NAME.to_string()),
            recursion_limit: Some(config.recursion_limit_for(options.recursion_limit)),
            config: Some(config.clone()),
            ..Default::default()
        },
    )?;
    Ok(LeadAgent {
        agent,
        options,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::model::ScriptedModel;

    fn registry() -> ModelRegistry {
        let thinking = ModelConfig {
            supports_thinking: true,
            ..ModelConfig::default()
        };
        ModelRegistry::new()
            .with_model(
                "plain",
                Arc::new(ScriptedModel::new("plain", [])),
                ModelConfig::default(),
            )
            .with_model(
                "thinker",
                Arc::new(ScriptedModel::new("thinker", [])),
                thinking,
            )
    }

    fn build(options: RunOptions) -> LeadAgent {
        let models = registry();
        make_lead_agent(
            &options,
            &Arc::new(AppConfig::default()),
            LeadAgentDeps::models_only(&models),
        )
        .unwrap()
    }

    #[test]
    fn the_requested_model_is_used_and_thinking_kept_when_supported() {
        let lead = build(RunOptions {
            model_name: Some("thinker".into()),
            thinking_enabled: Some(true),
            ..Default::default()
        });
        assert_eq!(lead.agent.model.name(), "thinker");
        assert_eq!(lead.options.model_name.as_deref(), Some("thinker"));
        assert!(lead.options.thinking());
        assert!(lead.warnings.is_empty());
        assert_eq!(
            lead.agent.system_prompt.as_deref(),
            Some(LEAD_SYSTEM_PROMPT)
        );
        assert_eq!(
            lead.agent.recursion_limit,
            AppConfig::default().recursion_limit
        );
    }

    #[test]
    fn an_unknown_model_falls_back_to_the_default_with_a_warning() {
        let lead = build(RunOptions {
            model_name: Some("gpt-nope".into()),
            ..Default::default()
        });
        assert_eq!(lead.agent.model.name(), "plain");
        assert_eq!(lead.options.model_name.as_deref(), Some("plain"));
        assert!(lead.warnings[0].contains("gpt-nope"));
    }

    #[test]
    fn thinking_is_downgraded_when_the_model_lacks_it() {
        let lead = build(RunOptions {
            thinking_enabled: Some(true),
            ..Default::default()
        });
        assert!(!lead.options.thinking());
        assert!(lead.warnings[0].contains("does not support thinking"));
        let silent = build(RunOptions::default());
        assert!(
            !silent.options.thinking(),
            "the default is downgraded too, without a warning"
        );
        assert!(silent.warnings.is_empty());
    }

    #[test]
    fn no_configured_model_is_a_clear_error() {
        let models = ModelRegistry::new();
        let err = make_lead_agent(
            &RunOptions::default(),
            &Arc::new(AppConfig::default()),
            LeadAgentDeps::models_only(&models),
        )
        .err()
        .unwrap();
        assert!(matches!(err, LeadAgentError::NoModel));
    }
}
