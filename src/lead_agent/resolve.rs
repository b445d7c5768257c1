//! Model resolution for a run: requested `model_name` → the custom agent's `model` →
//! `models[0]`, and the downgrades of what the chosen model cannot do (thinking, vision).

use std::sync::Arc;

use crate::agent_api::RunOptions;
use crate::config::AppConfig;
use crate::lead_agent::LeadAgentError;
use crate::model::{ChatModel, ModelRegistry};

/// The model a run uses and what it can do.
pub(crate) struct ResolvedModel {
    pub(crate) name: String,
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) supports_thinking: bool,
    pub(crate) supports_vision: bool,
    /// For `fraction` summarization triggers.
    pub(crate) context_window: Option<u64>,
}

/// Picks the model: the request's name, else the agent's, else the default. A name that is not
/// configured falls back to the default with a warning (the request never fails for it).
pub(crate) fn resolve_model(
    models: &ModelRegistry,
    config: &AppConfig,
    requested: Option<&str>,
    agent_model: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<ResolvedModel, LeadAgentError> {
    let wanted = requested.or(agent_model).filter(|n| !n.trim().is_empty());
    let found = wanted.and_then(|name| models.get(name).map(|m| (name.to_string(), m)));
    let (name, model) = match found {
        Some(found) => found,
        None => {
            let name = models.default_name().ok_or(LeadAgentError::NoModel)?;
            let model = models.get(name).ok_or(LeadAgentError::NoModel)?;
            if let Some(unknown) = wanted {
                let source = if requested.is_some() {
                    "requested"
                } else {
                    "the agent's"
                };
                tracing::warn!(
                    requested = unknown,
                    default = name,
                    source,
                    "Unknown model, using the default"
                );
                warnings.push(format!(
                    "{source} model {unknown:?} is not configured; using the default model {name:?}"
                ));
            }
            (name.to_string(), model)
        }
    };
    let model_config = models.config(&name).or_else(|| config.model(&name));
    Ok(ResolvedModel {
        supports_thinking: model_config.is_some_and(|m| m.supports_thinking),
        supports_vision: model_config.is_some_and(|m| m.supports_vision),
        context_window: model_config.and_then(|m| m.context_window),
        name,
        model,
    })
}

/// Turns thinking off when the model cannot think. Only an explicit request (from the run or
/// the agent's config) earns a warning; the implicit default is switched off quietly.
pub(crate) fn downgrade_thinking(
    options: &mut RunOptions,
    model: &ResolvedModel,
    warnings: &mut Vec<String>,
) {
    if !options.thinking() || model.supports_thinking {
        return;
    }
    if options.thinking_enabled == Some(true) {
        tracing::warn!(model = %model.name, "Thinking requested but the model does not support it; disabled");
        warnings.push(format!(
            "model {:?} does not support thinking; thinking is disabled for this run",
            model.name
        ));
    } else {
        tracing::debug!(model = %model.name, "Model does not support thinking; running without it");
    }
    options.thinking_enabled = Some(false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::model::ScriptedModel;

    fn registry() -> ModelRegistry {
        let model = |name: &str| Arc::new(ScriptedModel::new(name, [])) as Arc<dyn ChatModel>;
        ModelRegistry::new()
            .with_model("plain", model("plain"), ModelConfig::default())
            .with_model(
                "thinker",
                model("thinker"),
                ModelConfig {
                    supports_thinking: true,
                    supports_vision: true,
                    ..ModelConfig::default()
                },
            )
            .with_model("small", model("small"), ModelConfig::default())
    }

    #[test]
    fn resolution_chain_and_thinking_downgrade() {
        struct Case {
            requested: Option<&'static str>,
            agent: Option<&'static str>,
            thinking: Option<bool>,
            model: &'static str,
            thinking_after: bool,
            warnings: &'static [&'static str],
        }
        #[rustfmt::skip]
        let cases = [
            // Nothing asked: the default, thinking quietly off (the model lacks it).
            Case { requested: None, agent: None, thinking: None, model: "plain", thinking_after: false, warnings: &[] },
            // The request wins over the agent's model.
            Case { requested: Some("small"), agent: Some("thinker"), thinking: None, model: "small", thinking_after: false, warnings: &[] },
            // The agent's model when the request names none; thinking kept.
            Case { requested: None, agent: Some("thinker"), thinking: Some(true), model: "thinker", thinking_after: true, warnings: &[] },
            // Unknown request: the default with a warning, even when the agent names a model.
            Case { requested: Some("gpt-nope"), agent: Some("thinker"), thinking: None, model: "plain", thinking_after: false, warnings: &["requested model \"gpt-nope\""] },
            // Unknown agent model: the default with a warning.
            Case { requested: None, agent: Some("gone"), thinking: None, model: "plain", thinking_after: false, warnings: &["the agent's model \"gone\""] },
            // Explicit thinking on a model without it: downgraded with a warning.
            Case { requested: Some("small"), agent: None, thinking: Some(true), model: "small", thinking_after: false, warnings: &["does not support thinking"] },
            // Both downgrades at once.
            Case { requested: Some("nope"), agent: None, thinking: Some(true), model: "plain", thinking_after: false, warnings: &["\"nope\"", "does not support thinking"] },
            // Thinking explicitly off stays off without a warning.
            Case { requested: Some("thinker"), agent: None, thinking: Some(false), model: "thinker", thinking_after: false, warnings: &[] },
        ];
        let models = registry();
        let config = AppConfig::default();
        for (index, case) in cases.iter().enumerate() {
            let mut warnings = Vec::new();
            let resolved =
                resolve_model(&models, &config, case.requested, case.agent, &mut warnings).unwrap();
            let mut options = RunOptions {
                thinking_enabled: case.thinking,
                ..Default::default()
            };
            downgrade_thinking(&mut options, &resolved, &mut warnings);
            assert_eq!(resolved.name, case.model, "case {index}");
            assert_eq!(resolved.model.name(), case.model, "case {index}");
            assert_eq!(options.thinking(), case.thinking_after, "case {index}");
            assert_eq!(
                warnings.len(),
                case.warnings.len(),
                "case {index}: {warnings:?}"
            );
            for (warning, expected) in warnings.iter().zip(case.warnings) {
                assert!(warning.contains(expected), "case {index}: {warning}");
            }
        }
    }

    #[test]
    fn no_configured_model_is_a_clear_error() {
        let err = resolve_model(
            &ModelRegistry::new(),
            &AppConfig::default(),
            None,
            None,
            &mut Vec::new(),
        )
        .err()
        .unwrap();
        assert!(matches!(err, LeadAgentError::NoModel));
    }
}
