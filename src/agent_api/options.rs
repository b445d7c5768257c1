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
    /// The chat this run answers in, when a chat platform started it: where a schedule the
    /// run creates delivers (`schedule_task`'s `deliver: here`). Only the daemon sets it (the
    /// channels' turn), never a request (not read from JSON).
    #[serde(skip)]
    pub chat: Option<ChatPlace>,
    /// The schedule slot this run fires (`{schedule id}@{slot, RFC 3339}`), set by the
    /// scheduler only (not read from JSON): such a run may not create schedules itself.
    #[serde(skip)]
    pub schedule_fire: Option<String>,
    /// The run's id, fixed before it starts: a webhook delivery answers with it (202) before
    /// its run exists. Only the daemon sets it (not read from JSON); unset, a fresh one.
    #[serde(skip)]
    pub run_id: Option<String>,
    /// No person is waiting: clarification questions are disabled.
    pub non_interactive: bool,
    pub channel_name: Option<String>,
    /// Anything else the caller sent, kept for middlewares that look for their own keys.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A chat a run answers in, as the scheduler needs it to post there again later.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatPlace {
    /// The chat key's string form (`ChatKey`'s `Display`: `channel:chat[:topic]`).
    pub chat_key: String,
    /// The speaker's platform account id in that chat (who a scheduled turn is "from").
    pub sender_id: String,
    /// Their display name, when the platform gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_name: Option<String>,
    /// Whether the chat's conversation is shared (a group's).
    #[serde(default)]
    pub shared: bool,
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
