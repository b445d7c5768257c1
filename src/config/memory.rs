//! `memory.*`: the long-term memory (DeerFlow's `MemoryConfig`): whether it runs, which model
//! updates it, how long the queue waits, and how much of it reaches the prompt.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct MemoryConfig {
    /// Memory is read into the first turn of a thread and updated after runs. On by default
    /// (a core feature); each update is one extra model call, made off the answer's path once
    /// a thread has been quiet for `debounce_seconds`.
    pub enabled: bool,
    /// The model that writes memory updates; unset = the run's model.
    pub model_name: Option<String>,
    /// Quiet time after a thread's last turn before its memory update runs (1–300).
    pub debounce_seconds: u64,
    /// Token budget of the `<memory>` block (100–8000).
    pub max_injection_tokens: usize,
    /// Facts below this confidence are not stored (0–1).
    pub fact_confidence_threshold: f64,
    /// Facts kept per user and agent; the least confident go first (10–500).
    pub max_facts: usize,
    /// Earlier versions of each memory document kept for `/memory history` and reverts (0–100;
    /// 0 keeps none).
    pub history_limit: usize,
    /// Give the speaker's memory to their turns in group chats too. Off by default: whatever
    /// reaches the model there can end up in an answer everyone in the chat reads. When on, a
    /// person's memory goes with their own turn only, never into the shared history; either
    /// way memory still learns from what each person writes there.
    pub inject_in_groups: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            model_name: None,
            debounce_seconds: 30,
            max_injection_tokens: 2000,
            fact_confidence_threshold: 0.7,
            max_facts: 100,
            history_limit: 20,
            inject_in_groups: false,
        }
    }
}
