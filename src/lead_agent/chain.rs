//! The lead agent's middlewares: which features a run gets, each in its slot of the one chain
//! order (`agent::features::CHAIN_ORDER`), the few extras that have no slot, and the models the
//! built-in ones call (titles, summaries).

use std::sync::Arc;

use crate::agent::{AgentOptions, Feature, RuntimeFeatures};
use crate::agent_api::{DroppedMessagesSink, MiddlewareRef, ToolRef};
use crate::config::AppConfig;
use crate::custom_agents::AgentConfig;
use crate::lead_agent::LeadAgentDeps;
use crate::lead_agent::model_settings::AgentModelSettingsMiddleware;
use crate::lead_agent::resolve::ResolvedModel;
use crate::mcp::{DeferredCatalog, DeferredToolsMiddleware};
use crate::memory::inject::{MemoryInjector, TurnMemoryMiddleware};
use crate::memory::{DroppedToMemory, MemoryMiddleware, MemoryService};
use crate::middleware::sender_names::SenderNamesMiddleware;
use crate::middleware::{DynamicContextMiddleware, TaintMiddleware};
use crate::model::{ChatModel, ModelRegistry};

/// What the run brings to its chain besides the config and the factory's dependencies.
pub(super) struct ChainParts<'a> {
    pub(super) model: &'a ResolvedModel,
    pub(super) agent_config: Option<&'a AgentConfig>,
    pub(super) deferred: Option<Arc<DeferredCatalog>>,
    pub(super) skill_activation: MiddlewareRef,
    pub(super) subagents: bool,
    /// The approval gate over the run's tools, when the harness has an approvals store.
    pub(super) approvals: Option<MiddlewareRef>,
    /// The run's tools: those that bring untrusted content are marked (`TaintMiddleware`).
    pub(super) tools: &'a [ToolRef],
}

/// The middleware half of the run's [`AgentOptions`] (features, extras and the models the
/// built-in middlewares call); the caller adds the model, tools and prompt.
pub(super) fn chain_options(
    deps: &LeadAgentDeps<'_>,
    config: &Arc<AppConfig>,
    parts: ChainParts<'_>,
) -> AgentOptions {
    let memory = deps.memory.filter(|_| config.memory.enabled);
    let injector = memory.map(|memory| {
        Arc::new(MemoryInjector::new(
            memory.repo.clone(),
            config.memory.max_injection_tokens,
        ))
    });
    AgentOptions {
        features: Some(features(deps, config, &parts, memory, injector.as_ref())),
        extra_middleware: extras(deps, config, &parts, injector),
        title_model: title_model(
            deps.models,
            config,
            &parts.model.model,
            deps.checkpointer.is_some(),
        ),
        summary_model: config
            .summarization
            .model_name
            .as_deref()
            .and_then(|name| deps.models.get(name)),
        context_window: parts.model.context_window,
        // What summarization drops goes to memory first.
        dropped_messages: memory.map(|memory| {
            Arc::new(DroppedToMemory::new(memory.queue.clone())) as Arc<dyn DroppedMessagesSink>
        }),
        ..Default::default()
    }
}

/// Every slotted middleware of the lead chain; the order is `CHAIN_ORDER`'s, not this list's.
fn features(
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    parts: &ChainParts<'_>,
    memory: Option<&MemoryService>,
    injector: Option<&Arc<MemoryInjector>>,
) -> RuntimeFeatures {
    let on = |enabled: bool| {
        if enabled {
            Feature::BuiltIn
        } else {
            Feature::Off
        }
    };
    // A thread of one person keeps its memory block in the history from its first turn on; a
    // shared one never does (the next speaker would read it), and gets the speaker's memory
    // for their own turn only (an extra), when `memory.inject_in_groups` allows it at all.
    let dynamic_context = match injector {
        Some(injector) if !deps.users.shared => {
            DynamicContextMiddleware::new().with_memory(injector.clone())
        }
        _ => DynamicContextMiddleware::new(),
    };
    RuntimeFeatures {
        auto_title: Feature::BuiltIn,
        vision: on(parts.model.supports_vision),
        guardrail: on(config.guardrails.enabled),
        // Built only while `token_budget.enabled` (and `loop_detection.enabled`) are on.
        token_budget: Feature::BuiltIn,
        memory: match memory {
            Some(memory) => Feature::Custom(Arc::new(MemoryMiddleware::new(memory.queue.clone()))),
            None => Feature::Off,
        },
        summarization: on(config.summarization.enabled),
        subagent: on(parts.subagents),
        dynamic_context: Feature::Custom(Arc::new(dynamic_context)),
        skill_activation: Feature::Custom(parts.skill_activation.clone()),
        approvals: match &parts.approvals {
            Some(gate) => Feature::Custom(gate.clone()),
            None => Feature::Off,
        },
        deferred_tools: match &parts.deferred {
            Some(catalog) => {
                Feature::Custom(Arc::new(DeferredToolsMiddleware::new(catalog.clone())))
            }
            None => Feature::Off,
        },
        ..RuntimeFeatures::default()
    }
}

/// The lead's middlewares that the seed's chain has no slot for: a group's sender names (it
/// anchors itself before `DanglingToolCall`), a speaker's memory and a custom agent's model
/// settings, which only change the model request, and the untrusted-content marks, which wrap
/// tool results before the outer middlewares see them (in the `Extras` slot, after
/// `TokenBudget`).
fn extras(
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    parts: &ChainParts<'_>,
    injector: Option<Arc<MemoryInjector>>,
) -> Vec<MiddlewareRef> {
    let agent_config = parts.agent_config;
    let mut extras: Vec<MiddlewareRef> = vec![Arc::new(TaintMiddleware::for_tools(parts.tools))];
    if deps.users.shared {
        extras.push(Arc::new(SenderNamesMiddleware));
        if let Some(injector) = injector.filter(|_| config.memory.inject_in_groups) {
            extras.push(Arc::new(TurnMemoryMiddleware::new(injector)));
        }
    }
    if let Some(agent) = agent_config
        && !agent.model_settings.is_empty()
    {
        extras.push(Arc::new(AgentModelSettingsMiddleware::new(
            agent.model_settings.clone(),
        )));
    }
    extras
}

/// The model named by `title.model_name`, else the run's model. The loader already rejects a
/// name that is not among `models`; a registry built by hand may still lack it, and then titles
/// fall back to the first message. The run's model only titles a persisted thread: there the
/// title is asked in the background, and without a checkpointer the answer would wait for it.
fn title_model(
    models: &ModelRegistry,
    config: &AppConfig,
    run_model: &Arc<dyn ChatModel>,
    persisted: bool,
) -> Option<Arc<dyn ChatModel>> {
    let Some(name) = config.title.model_name.as_deref() else {
        return persisted.then(|| run_model.clone());
    };
    let model = models.get(name);
    if model.is_none() {
        tracing::warn!(
            model = name,
            "title.model_name names no configured model; titles use the first message"
        );
    }
    model
}
