//! `create_agent`: the SDK-level factory (no config file, no globals).
//!
//! Builds the middleware chain from [`RuntimeFeatures`] in the fixed order of
//! [`CHAIN_ORDER`](crate::agent::features::CHAIN_ORDER), places extra middlewares by their
//! anchors (DeerFlow's `@Next` / `@Prev`), and adds the tools the middlewares bring.

use std::collections::HashMap;
use std::sync::Arc;

use crate::agent::features::{CHAIN_ORDER, Slot};
use crate::agent::{Agent, Feature, RuntimeFeatures};
use crate::agent_api::{DroppedMessagesSink, Middleware, MiddlewareRef};
use crate::agent_api::{ToolRef, dedupe_tools};
use crate::config::AppConfig;
use crate::middleware::{
    ClarificationMiddleware, DanglingToolCallMiddleware, DynamicContextMiddleware,
    GuardrailMiddleware, LoopDetectionMiddleware, ModelLengthFinishReasonMiddleware,
    SafetyFinishReasonMiddleware, SandboxMiddleware, SubagentLimitMiddleware,
    SummarizationMiddleware, SystemMessageCoalescingMiddleware, TerminalResponseMiddleware,
    ThreadDataMiddleware, TitleMiddleware, TodoMiddleware, TokenBudgetMiddleware,
    TokenUsageMiddleware, ToolErrorHandlingMiddleware, UploadsMiddleware, ViewImageMiddleware,
};
use crate::model::ChatModel;
use crate::sandbox::SandboxProvider;
use antler_store::Checkpointer;

/// Name of the middleware that always closes the chain.
pub const CLARIFICATION: &str = "ClarificationMiddleware";

#[derive(Clone, Default)]
pub struct AgentOptions {
    pub system_prompt: Option<Arc<str>>,
    /// An explicit chain, used as given. Mutually exclusive with `features`.
    pub middleware: Option<Vec<MiddlewareRef>>,
    pub features: Option<RuntimeFeatures>,
    pub extra_middleware: Vec<MiddlewareRef>,
    pub plan_mode: bool,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    pub name: Option<String>,
    pub recursion_limit: Option<u32>,
    /// Settings for the built-in middlewares (defaults when absent).
    pub config: Option<Arc<AppConfig>>,
    /// Where the built-in `SandboxMiddleware` gets sandboxes; none ⇒ it does nothing.
    pub sandbox_provider: Option<Arc<dyn SandboxProvider>>,
    /// The model the built-in `TitleMiddleware` asks for titles (`title.model_name`); none ⇒
    /// the local fallback (the start of the first message).
    pub title_model: Option<Arc<dyn ChatModel>>,
    /// The model the built-in `SummarizationMiddleware` summarizes with
    /// (`summarization.model_name`); none ⇒ the run's own model.
    pub summary_model: Option<Arc<dyn ChatModel>>,
    /// The run model's context window, for `fraction` summarization triggers.
    pub context_window: Option<u64>,
    /// Hears about messages summarization is about to drop (long-term memory).
    pub dropped_messages: Option<Arc<dyn DroppedMessagesSink>>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentBuildError {
    #[error(
        "both an explicit middleware list and runtime features were given; pass only one of them"
    )]
    MiddlewareAndFeatures,
    #[error(
        "extra middleware {middleware} only applies to the feature-assembled chain; add it to your explicit middleware list instead"
    )]
    ExtrasWithExplicitMiddleware { middleware: String },
    #[error(
        "feature '{feature}' has no built-in middleware; pass a custom instance (Feature::Custom) or leave it off"
    )]
    NoBuiltIn { feature: &'static str },
    #[error("extra middleware {middleware} sets both a next and a prev anchor; keep only one")]
    BothAnchors { middleware: String },
    #[error(
        "extra middlewares {first} and {second} both claim the position {position}; anchor one of them elsewhere"
    )]
    AnchorConflict {
        first: String,
        second: String,
        position: String,
    },
    #[error(
        "extra middleware {middleware} is anchored to {anchor}, which is not in the chain; enable that middleware or fix the anchor"
    )]
    UnresolvedAnchor { middleware: String, anchor: String },
}

pub fn create_agent(
    model: Arc<dyn ChatModel>,
    tools: Vec<ToolRef>,
    options: AgentOptions,
) -> Result<Agent, AgentBuildError> {
    let config = options.config.clone().unwrap_or_default();
    let middleware = match (options.middleware, options.features) {
        (Some(_), Some(_)) => return Err(AgentBuildError::MiddlewareAndFeatures),
        (Some(list), None) => {
            if let Some(extra) = options.extra_middleware.first() {
                return Err(AgentBuildError::ExtrasWithExplicitMiddleware {
                    middleware: extra.name().to_string(),
                });
            }
            list
        }
        (None, features) => {
            let chain = assemble_from_features(
                &features.unwrap_or_default(),
                options.plan_mode,
                &config,
                ChainDeps {
                    sandbox_provider: options.sandbox_provider.clone(),
                    title_model: options.title_model.clone(),
                    checkpointer: options.checkpointer.clone(),
                    summary_model: Some(options.summary_model.unwrap_or_else(|| model.clone())),
                    context_window: options.context_window,
                    dropped_messages: options.dropped_messages.clone(),
                },
            )?;
            insert_extras(chain, options.extra_middleware)?
        }
    };
    // User tools first: on a name clash the user's tool wins over an injected one.
    let injected: Vec<ToolRef> = middleware.iter().flat_map(|m| m.tools()).collect();
    let tools = dedupe_tools(tools.into_iter().chain(injected));
    Ok(Agent {
        name: options.name.unwrap_or_else(|| "default".to_string()),
        model,
        tools,
        middleware,
        system_prompt: options.system_prompt,
        recursion_limit: config.recursion_limit_for(options.recursion_limit),
        checkpointer: options.checkpointer,
    })
}

/// The fixed chain for `features`, without extras (the `Extras` slot is empty).
pub fn assemble_from_features(
    features: &RuntimeFeatures,
    plan_mode: bool,
    config: &AppConfig,
    deps: ChainDeps,
) -> Result<Vec<MiddlewareRef>, AgentBuildError> {
    let deps = SlotDeps { config, deps };
    let mut chain = Vec::with_capacity(CHAIN_ORDER.len());
    for slot in CHAIN_ORDER {
        if let Some(middleware) = slot_middleware(slot, features, plan_mode, &deps)? {
            chain.push(middleware);
        }
    }
    Ok(chain)
}

/// What the built-in middlewares are made from, besides the features and the config.
#[derive(Clone, Default)]
pub struct ChainDeps {
    pub sandbox_provider: Option<Arc<dyn SandboxProvider>>,
    pub title_model: Option<Arc<dyn ChatModel>>,
    /// Where a title generated after the run goes (the thread's record).
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    /// Without one the built-in summarization is unavailable (`create_agent` passes the run's
    /// model when no `summary_model` is given).
    pub summary_model: Option<Arc<dyn ChatModel>>,
    pub context_window: Option<u64>,
    pub dropped_messages: Option<Arc<dyn DroppedMessagesSink>>,
}

struct SlotDeps<'a> {
    config: &'a AppConfig,
    deps: ChainDeps,
}

fn slot_middleware(
    slot: Slot,
    features: &RuntimeFeatures,
    plan_mode: bool,
    deps: &SlotDeps<'_>,
) -> Result<Option<MiddlewareRef>, AgentBuildError> {
    let config = deps.config;
    let on = |enabled: bool, make: &dyn Fn() -> MiddlewareRef| enabled.then(make);
    let middleware = match slot {
        Slot::ThreadData => on(features.sandbox.is_on(), &|| {
            if config.sandbox.eager {
                arc(ThreadDataMiddleware::eager(config.data_dir()))
            } else {
                arc(ThreadDataMiddleware::new(config.data_dir()))
            }
        }),
        Slot::Uploads => on(features.sandbox.is_on(), &|| arc(UploadsMiddleware)),
        Slot::Sandbox => from_feature(&features.sandbox, "sandbox", || {
            Some(arc(if config.sandbox.eager {
                SandboxMiddleware::eager(deps.deps.sandbox_provider.clone())
            } else {
                SandboxMiddleware::new(deps.deps.sandbox_provider.clone())
            }))
        })?,
        Slot::DanglingToolCall => Some(arc(DanglingToolCallMiddleware)),
        Slot::Guardrail => from_feature(&features.guardrail, "guardrail", || {
            Some(arc(GuardrailMiddleware::from_config(&config.guardrails)))
        })?,
        Slot::Approvals => from_feature(&features.approvals, "approvals", || None)?,
        Slot::ToolErrorHandling => Some(arc(ToolErrorHandlingMiddleware)),
        Slot::DynamicContext => from_feature(&features.dynamic_context, "dynamic_context", || {
            Some(arc(DynamicContextMiddleware::new()))
        })?,
        Slot::SkillActivation => {
            from_feature(&features.skill_activation, "skill_activation", || None)?
        }
        Slot::Summarization => from_feature(&features.summarization, "summarization", || {
            let model = deps.deps.summary_model.clone()?;
            let summarization = SummarizationMiddleware::new(config.summarization.clone(), model)
                .with_context_window(deps.deps.context_window)
                .with_sink(deps.deps.dropped_messages.clone());
            Some(arc(summarization))
        })?,
        Slot::Todo => on(plan_mode, &|| arc(TodoMiddleware)),
        Slot::TokenUsage => on(config.token_usage.enabled, &|| arc(TokenUsageMiddleware)),
        Slot::Title => from_feature(&features.auto_title, "auto_title", || {
            let mut title = TitleMiddleware::new(config.title.clone());
            if let Some(model) = &deps.deps.title_model {
                title = title.with_model(model.clone());
            }
            if let Some(sink) = &deps.deps.checkpointer {
                title = title.with_sink(sink.clone());
            }
            Some(arc(title))
        })?,
        Slot::Memory => from_feature(&features.memory, "memory", || None)?,
        Slot::ViewImage => from_feature(&features.vision, "vision", || {
            Some(arc(ViewImageMiddleware))
        })?,
        Slot::DeferredTools => from_feature(&features.deferred_tools, "deferred_tools", || None)?,
        Slot::SystemMessageCoalescing => Some(arc(SystemMessageCoalescingMiddleware)),
        Slot::SubagentLimit => from_feature(&features.subagent, "subagent", || {
            Some(arc(SubagentLimitMiddleware::default()))
        })?,
        // A built-in whose config block is switched off is not built (a custom one still is).
        Slot::LoopDetection => match &features.loop_detection {
            Feature::BuiltIn if !config.loop_detection.enabled => None,
            feature => from_feature(feature, "loop_detection", || {
                Some(arc(LoopDetectionMiddleware::new(
                    config.loop_detection.clone(),
                )))
            })?,
        },
        Slot::TokenBudget => match &features.token_budget {
            Feature::BuiltIn if !config.token_budget.enabled => None,
            feature => from_feature(feature, "token_budget", || {
                Some(arc(TokenBudgetMiddleware::new(config.token_budget.clone())))
            })?,
        },
        Slot::Extras => None,
        Slot::TerminalResponse => Some(arc(TerminalResponseMiddleware)),
        Slot::LengthFinishReason => Some(arc(ModelLengthFinishReasonMiddleware)),
        Slot::SafetyFinishReason => on(config.safety_finish_reason.enabled, &|| {
            arc(SafetyFinishReasonMiddleware)
        }),
        Slot::Clarification => Some(arc(ClarificationMiddleware)),
    };
    Ok(middleware)
}

fn arc(middleware: impl Middleware + 'static) -> MiddlewareRef {
    Arc::new(middleware)
}

/// Resolves one feature; `built_in` returns `None` when the feature has no built-in middleware.
fn from_feature(
    feature: &Feature,
    name: &'static str,
    built_in: impl FnOnce() -> Option<MiddlewareRef>,
) -> Result<Option<MiddlewareRef>, AgentBuildError> {
    match feature {
        Feature::Off => Ok(None),
        Feature::Custom(middleware) => Ok(Some(middleware.clone())),
        Feature::BuiltIn => built_in()
            .map(Some)
            .ok_or(AgentBuildError::NoBuiltIn { feature: name }),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Direction {
    Next,
    Prev,
}

/// Places `extras` into `chain`: unanchored ones in the `Extras` slot (ahead of the closing
/// `TerminalResponse` / `LengthFinishReason` / `SafetyFinishReason` / `Clarification` tail),
/// anchored ones next to their anchor, resolved repeatedly so extras may anchor to each other.
/// Clarification ends up last.
pub fn insert_extras(
    mut chain: Vec<MiddlewareRef>,
    extras: Vec<MiddlewareRef>,
) -> Result<Vec<MiddlewareRef>, AgentBuildError> {
    let mut anchored: Vec<(MiddlewareRef, Direction, String)> = Vec::new();
    let mut unanchored = Vec::new();
    for extra in extras {
        let anchors = extra.anchors();
        match (anchors.next, anchors.prev) {
            (Some(_), Some(_)) => {
                return Err(AgentBuildError::BothAnchors {
                    middleware: extra.name().to_string(),
                });
            }
            (Some(target), None) => anchored.push((extra, Direction::Next, target)),
            (None, Some(target)) => anchored.push((extra, Direction::Prev, target)),
            (None, None) => unanchored.push(extra),
        }
    }
    let tail = [
        "TerminalResponseMiddleware",
        "ModelLengthFinishReasonMiddleware",
        "SafetyFinishReasonMiddleware",
        CLARIFICATION,
    ];
    let slot = chain
        .iter()
        .position(|m| tail.contains(&m.name()))
        .unwrap_or(chain.len());
    chain.splice(slot..slot, unanchored);
    check_conflicts(&chain, &anchored)?;

    loop {
        let before = anchored.len();
        let mut waiting = Vec::new();
        for (extra, direction, target) in anchored {
            match chain.iter().position(|m| m.name() == target) {
                Some(at) => {
                    let at = if direction == Direction::Next {
                        at + 1
                    } else {
                        at
                    };
                    chain.insert(at, extra);
                }
                None => waiting.push((extra, direction, target)),
            }
        }
        anchored = waiting;
        if anchored.is_empty() || anchored.len() == before {
            break;
        }
    }
    if let Some((extra, _, target)) = anchored.first() {
        return Err(AgentBuildError::UnresolvedAnchor {
            middleware: extra.name().to_string(),
            anchor: target.clone(),
        });
    }
    if let Some(at) = chain.iter().position(|m| m.name() == CLARIFICATION)
        && at != chain.len() - 1
    {
        let clarification = chain.remove(at);
        chain.push(clarification);
    }
    Ok(chain)
}

/// Two extras may not claim one gap: the same anchor in the same direction, or "after X" and
/// "before Y" where Y directly follows X in the chain.
fn check_conflicts(
    chain: &[MiddlewareRef],
    anchored: &[(MiddlewareRef, Direction, String)],
) -> Result<(), AgentBuildError> {
    let mut claimed: HashMap<(Direction, &str), &str> = HashMap::new();
    for (extra, direction, target) in anchored {
        if let Some(first) = claimed.insert((*direction, target.as_str()), extra.name()) {
            let side = if *direction == Direction::Next {
                "after"
            } else {
                "before"
            };
            return Err(AgentBuildError::AnchorConflict {
                first: first.to_string(),
                second: extra.name().to_string(),
                position: format!("{side} {target}"),
            });
        }
    }
    for (extra, direction, target) in anchored {
        if *direction != Direction::Next {
            continue;
        }
        let Some(at) = chain.iter().position(|m| m.name() == target) else {
            continue;
        };
        let Some(following) = chain.get(at + 1) else {
            continue;
        };
        if let Some(other) = claimed.get(&(Direction::Prev, following.name())) {
            return Err(AgentBuildError::AnchorConflict {
                first: extra.name().to_string(),
                second: other.to_string(),
                position: format!("between {target} and {}", following.name()),
            });
        }
    }
    Ok(())
}
