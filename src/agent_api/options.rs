//! Request-level run options (`configurable` merged with `context`, context wins).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunOptions {
    /// Model to use for this run (`model_name`, or DeerFlow's alias `model`).
    #[serde(alias = "model")]
    pub model_name: Option<String>,
    /// Defaults to on; downgraded when the model lacks `supports_thinking`.
    pub thinking_enabled: Option<bool>,
    pub reasoning_effort: Option<String>,
    pub is_plan_mode: bool,
    pub subagent_enabled: bool,
    /// `task` calls per model response (clamped to 1–4; default 3).
    pub max_concurrent_subagents: Option<u32>,
    /// `task` calls per run (clamped to 1–50; default `subagents.max_total_per_run`).
    pub max_total_subagents: Option<u32>,
    pub is_bootstrap: bool,
    pub agent_name: Option<String>,
    /// Whose custom agent `agent_name` is when it is not the speaker's: the member who chose
    /// it for a shared conversation (`/agent` in a group). Only the daemon sets it, never a
    /// request (not read from JSON), and only a shared run honours it.
    #[serde(skip)]
    pub agent_owner: Option<String>,
    pub recursion_limit: Option<u32>,
    /// The approval request this run continues (`Harness::resume_request`): the run first
    /// answers the calls its thread's last AI message left unanswered, and with none left it
    /// ends without a model call. Only the daemon sets it, never a request (not read from JSON).
    #[serde(skip)]
    pub resume_approval: Option<String>,
    /// No person is waiting: clarification questions are disabled.
    pub non_interactive: bool,
    pub channel_name: Option<String>,
    /// Anything else the caller sent, kept for middlewares that look for their own keys.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunOptions {
    /// Merges `configurable` and `context` (context wins), as DeerFlow's `_get_runtime_config`.
    pub fn merge(
        configurable: &Map<String, Value>,
        context: &Map<String, Value>,
    ) -> Result<Self, serde_json::Error> {
        let mut merged = configurable.clone();
        for (k, v) in context {
            merged.insert(k.clone(), v.clone());
        }
        serde_json::from_value(Value::Object(merged))
    }

    pub fn thinking(&self) -> bool {
        self.thinking_enabled.unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn context_wins_over_configurable() {
        let configurable = json!({"model_name": "a", "is_plan_mode": true, "x": 1});
        let context = json!({"model_name": "b"});
        let merged = RunOptions::merge(
            configurable.as_object().unwrap(),
            context.as_object().unwrap(),
        )
        .unwrap();
        assert_eq!(merged.model_name.as_deref(), Some("b"));
        assert!(merged.is_plan_mode);
        assert_eq!(merged.extra["x"], 1);
        assert!(merged.thinking());
    }
}
