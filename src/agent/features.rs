//! `RuntimeFeatures`: declarative switches for the optional middlewares of the SDK factory, and
//! the fixed order the factory assembles them in.

use crate::agent_api::MiddlewareRef;

/// One feature: skipped, the built-in middleware, or a custom instance in its slot.
#[derive(Clone, Default)]
pub enum Feature {
    #[default]
    Off,
    BuiltIn,
    Custom(MiddlewareRef),
}

impl Feature {
    pub fn is_on(&self) -> bool {
        !matches!(self, Feature::Off)
    }
}

/// Defaults as in the seed: sandbox and loop detection on, the rest off.
#[derive(Clone)]
pub struct RuntimeFeatures {
    /// Also switches the sandbox infrastructure (`ThreadData`, `Uploads`), which stays built-in
    /// when a custom sandbox middleware takes the `Sandbox` slot.
    pub sandbox: Feature,
    /// No built-in implementation yet: `Off` or `Custom` only.
    pub memory: Feature,
    /// `BuiltIn` = `SummarizationMiddleware` with `summarization:` of the config (the summary
    /// model is `AgentOptions::summary_model`, else the run's model).
    pub summarization: Feature,
    pub subagent: Feature,
    pub vision: Feature,
    pub auto_title: Feature,
    /// `BuiltIn` = the allowlist/denylist guardrail of `guardrails:` in the config (built even
    /// when `guardrails.enabled` is false: callers decide whether to switch it on).
    pub guardrail: Feature,
    /// `BuiltIn` is built only while `loop_detection.enabled` is on in the config.
    pub loop_detection: Feature,
    /// `BuiltIn` is built only while `token_budget.enabled` is on in the config.
    pub token_budget: Feature,
    /// `BuiltIn` = `DynamicContextMiddleware` with the date only; `Custom` for one that also
    /// reads memory (the lead agent's).
    pub dynamic_context: Feature,
    /// No built-in implementation (it needs the run's skills): `Off` or `Custom` only.
    pub skill_activation: Feature,
    /// No built-in implementation (it needs the deferred MCP tools): `Off` or `Custom` only.
    pub deferred_tools: Feature,
    /// No built-in implementation (it needs the approvals store): `Off` or `Custom` only.
    pub approvals: Feature,
}

impl Default for RuntimeFeatures {
    fn default() -> Self {
        Self {
            sandbox: Feature::BuiltIn,
            memory: Feature::Off,
            summarization: Feature::Off,
            subagent: Feature::Off,
            vision: Feature::Off,
            auto_title: Feature::Off,
            guardrail: Feature::Off,
            loop_detection: Feature::BuiltIn,
            token_budget: Feature::Off,
            dynamic_context: Feature::Off,
            skill_activation: Feature::Off,
            deferred_tools: Feature::Off,
            approvals: Feature::Off,
        }
    }
}

impl RuntimeFeatures {
    /// Everything off except what the chain always has.
    pub fn none() -> Self {
        Self {
            sandbox: Feature::Off,
            loop_detection: Feature::Off,
            ..Self::default()
        }
    }
}

/// A position in the assembled chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    ThreadData,
    Uploads,
    Sandbox,
    DanglingToolCall,
    Guardrail,
    /// Tool calls that wait for a person (`approvals:`): after the static guardrail (a denied
    /// tool is never asked about), outside everything that runs or rewrites the call.
    Approvals,
    ToolErrorHandling,
    DynamicContext,
    SkillActivation,
    Summarization,
    Todo,
    TokenUsage,
    Title,
    Memory,
    ViewImage,
    DeferredTools,
    SystemMessageCoalescing,
    SubagentLimit,
    LoopDetection,
    TokenBudget,
    /// Where unanchored `extra_middleware` go.
    Extras,
    TerminalResponse,
    LengthFinishReason,
    SafetyFinishReason,
    Clarification,
}

/// The fixed chain order (list order: `before_*` hooks run top-down, `after_model` bottom-up,
/// and for `wrap_*` hooks the first is outermost).
///
/// It is the seed's `_assemble_from_features` list (`[0]`–`[14]`: ThreadData, Uploads, Sandbox,
/// DanglingToolCall, Guardrail, ToolErrorHandling, Summarization, Todo, Title, Memory, ViewImage,
/// SubagentLimit, LoopDetection, TokenBudget, …, Clarification), with the middlewares the seed's
/// SDK list lacks placed where the reference's production chain (`build_middlewares`, §3.1)
/// puts them. This is the one order: the lead agent fills these slots too (it used to append
/// three of them as extras, after `TokenBudget`).
/// - `Approvals` (Antler's own) right after `Guardrail`;
/// - `DynamicContext` and `SkillActivation` after the runtime part (`ToolErrorHandling`),
///   before `Summarization` (reference #14, #15);
/// - `TokenUsage` after `Todo`, before `Title` (reference #20);
/// - `DeferredTools` after `ViewImage`, before `SystemMessageCoalescing` (reference #24);
/// - `SystemMessageCoalescing` after `ViewImage`, before `SubagentLimit` (reference #25, the
///   seed's principle 1 "消息合并 → subagent");
/// - `TerminalResponse`, `LengthFinishReason` and `SafetyFinishReason` after the custom
///   middlewares and before `Clarification` (reference #30, #31 and #32, the seed's
///   "自定义中间件 → safety → clarification").
///
/// `Extras` is the seed's "unanchored ⇒ just before Clarification": the seed's SDK chain ends
/// `TokenBudget, Clarification`, so that spot is here, ahead of the closing tail
/// (`TerminalResponse`, `LengthFinishReason`, `SafetyFinishReason`, `Clarification`) which must
/// see the answer first.
pub const CHAIN_ORDER: [Slot; 25] = [
    Slot::ThreadData,
    Slot::Uploads,
    Slot::Sandbox,
    Slot::DanglingToolCall,
    Slot::Guardrail,
    Slot::Approvals,
    Slot::ToolErrorHandling,
    Slot::DynamicContext,
    Slot::SkillActivation,
    Slot::Summarization,
    Slot::Todo,
    Slot::TokenUsage,
    Slot::Title,
    Slot::Memory,
    Slot::ViewImage,
    Slot::DeferredTools,
    Slot::SystemMessageCoalescing,
    Slot::SubagentLimit,
    Slot::LoopDetection,
    Slot::TokenBudget,
    Slot::Extras,
    Slot::TerminalResponse,
    Slot::LengthFinishReason,
    Slot::SafetyFinishReason,
    Slot::Clarification,
];
