//! The `summarization` config section: when a thread's context is condensed into a summary,
//! how much of its end stays verbatim, and which model writes the summary.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a trigger or the keep policy measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContextMeasure {
    /// Estimated tokens of the thread's messages.
    Tokens,
    /// Number of messages.
    Messages,
    /// Estimated tokens as a fraction of the model's `context_window` (triggers only; ignored
    /// for a model without one).
    Fraction,
}

/// A size of the thread: `{type: tokens|messages|fraction, value: …}`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextSize {
    #[serde(rename = "type")]
    pub measure: ContextMeasure,
    /// Tokens, messages, or a fraction between 0 and 1, as `type` says.
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SummarizationConfig {
    /// Replace the older part of long threads with a model-written summary, so they fit the
    /// model's context.
    pub enabled: bool,
    /// The model that writes summaries; unset = the run's own model.
    pub model_name: Option<String>,
    /// Summarize when any of these is reached (OR).
    pub trigger: Vec<ContextSize>,
    /// The end of the thread kept verbatim (`messages` or `tokens`).
    pub keep: ContextSize,
    /// At most this many (estimated) tokens of the older messages go to the summary model; the
    /// most recent part is kept when they are more.
    pub trim_tokens_to_summarize: u64,
}

impl Default for SummarizationConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            model_name: None,
            trigger: vec![ContextSize {
                measure: ContextMeasure::Fraction,
                value: 0.8,
            }],
            keep: ContextSize {
                measure: ContextMeasure::Messages,
                value: 20.0,
            },
            trim_tokens_to_summarize: 4000,
        }
    }
}
