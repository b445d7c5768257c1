//! `RuntimeFeatures`: declarative switches for the optional middlewares of the SDK factory.
//! PLACEHOLDER (owned by the middleware-chain work): types only.

use crate::middleware::MiddlewareRef;

/// One feature: skipped, the built-in middleware, or a custom instance in its slot.
#[derive(Clone, Default)]
pub enum Feature {
    #[default]
    Off,
    BuiltIn,
    Custom(MiddlewareRef),
}

/// Defaults as in the seed: sandbox and loop detection on, the rest off.
#[derive(Clone)]
pub struct RuntimeFeatures {
    pub sandbox: Feature,
    pub memory: Feature,
    /// No built-in implementation: `Off` or `Custom` only.
    pub summarization: Feature,
    pub subagent: Feature,
    pub vision: Feature,
    pub auto_title: Feature,
    /// No built-in implementation: `Off` or `Custom` only.
    pub guardrail: Feature,
    pub loop_detection: Feature,
    pub token_budget: Feature,
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
        }
    }
}
