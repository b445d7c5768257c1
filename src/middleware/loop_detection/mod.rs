//! `LoopDetectionMiddleware`: notices a model repeating the same tool calls and stops it.
//!
//! Two layers (reference §3.2): the same batch of calls (by hash of name + salient args) seen
//! `warn_threshold` times in the last `window_size` responses ⇒ a warning, `hard_limit` times ⇒
//! a forced final answer; and one tool name called too often overall (`tool_freq_*`). Warnings
//! are queued and shown to the model at its next call; they are never persisted.

mod key;

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError, ModelNext, StopReason};
use crate::config::schema::LoopDetectionConfig;
use crate::middleware::support::{forced_final, hidden_human, replace_ai};
use crate::model::{ModelError, ModelRequest};
use antler_store::lru::Lru;
use antler_store::messages::{AiMessage, Message};
use antler_store::state::ThreadState;

pub use key::{call_key, calls_hash};

/// `name` of the hidden human message carrying warnings to the model.
pub const LOOP_WARNING_NAME: &str = "loop_warning";
pub const REPEAT_WARNING: &str = "[LOOP DETECTED] You are repeating the same tool calls. Stop calling tools and produce your final answer now. If you cannot complete the task, summarize what you accomplished so far.";
pub const FORCED_STOP_SUFFIX: &str = "\n\n[FORCED STOP] Repeated tool calls exceeded the safety limit. Producing final answer with results collected so far.";

pub struct LoopDetectionMiddleware {
    config: LoopDetectionConfig,
    /// Per-thread tracks, bounded by `max_tracked_threads`: the least recently used thread is
    /// forgotten first.
    threads: Mutex<Lru<String, ThreadTrack>>,
}

impl LoopDetectionMiddleware {
    pub fn new(config: LoopDetectionConfig) -> Self {
        let capacity = config.max_tracked_threads.max(1);
        Self {
            config,
            threads: Mutex::new(Lru::new(capacity)),
        }
    }

    /// Warn and hard limits for one tool name (an override's hard limit never undercuts its warn).
    fn freq_limits(&self, tool: &str) -> (u32, u32) {
        match self.config.tool_freq_overrides.get(tool) {
            Some(o) => (o.warn, o.hard_limit.max(o.warn)),
            None => (
                self.config.tool_freq_warn,
                self.config
                    .tool_freq_hard_limit
                    .max(self.config.tool_freq_warn),
            ),
        }
    }

    fn name_window(&self) -> usize {
        let overrides = self
            .config
            .tool_freq_overrides
            .values()
            .map(|o| o.hard_limit);
        let hard = overrides
            .chain([self.config.tool_freq_hard_limit, self.config.hard_limit])
            .max()
            .unwrap_or(0);
        self.config.window_size.max(hard as usize).max(1)
    }

    /// Records one response's tool calls and decides: nothing, a queued warning, or a stop.
    fn observe(&self, thread_id: &str, ai: &AiMessage) -> Option<String> {
        let hash = calls_hash(&ai.tool_calls);
        let name_window = self.name_window();
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        if threads.get(thread_id).is_none() {
            threads.insert(thread_id.to_string(), ThreadTrack::default(), 1);
        }
        let track = threads.get_mut(thread_id)?;

        track.hashes.push_back(hash.clone());
        while track.hashes.len() > self.config.window_size.max(1) {
            track.hashes.pop_front();
        }
        let repeats = track.hashes.iter().filter(|h| **h == hash).count() as u32;
        if repeats >= self.config.hard_limit {
            tracing::warn!(thread_id, %hash, repeats, "Loop detected: forcing a final answer");
            return Some(FORCED_STOP_SUFFIX.to_string());
        }
        if repeats >= self.config.warn_threshold && track.warned_hashes.insert(hash.clone()) {
            tracing::info!(thread_id, %hash, repeats, "Loop suspected: warning the model");
            track.pending.push(REPEAT_WARNING.to_string());
        }

        let mut names: Vec<&str> = Vec::new();
        for call in &ai.tool_calls {
            track.names.push_back(call.name.clone());
            if !names.contains(&call.name.as_str()) {
                names.push(&call.name);
            }
        }
        while track.names.len() > name_window {
            track.names.pop_front();
        }
        for name in names {
            let count = track.names.iter().filter(|n| *n == name).count() as u32;
            let (warn, hard) = self.freq_limits(name);
            if count >= hard {
                tracing::warn!(
                    thread_id,
                    tool = name,
                    count,
                    "Tool called too often: forcing a final answer"
                );
                return Some(format!(
                    "\n\n[FORCED STOP] Tool {name} was called {count} times, exceeding the per-tool safety limit. Producing final answer with results collected so far."
                ));
            }
            if count >= warn {
                if track.warned_names.insert(name.to_string()) {
                    track.pending.push(format!(
                        "[LOOP DETECTED] You have called {name} {count} times without producing a final answer. Stop calling {name} and produce your final answer now with the results you already have. If you cannot complete the task, summarize what you accomplished so far."
                    ));
                }
            } else {
                // The count decayed below the threshold: a later burst deserves a new warning.
                track.warned_names.remove(name);
            }
        }
        None
    }

    fn take_pending(&self, thread_id: &str) -> Vec<String> {
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        match threads.get_mut(thread_id) {
            Some(track) => std::mem::take(&mut track.pending),
            None => Vec::new(),
        }
    }
}

#[async_trait]
impl Middleware for LoopDetectionMiddleware {
    fn name(&self) -> &str {
        "LoopDetectionMiddleware"
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        let mut warnings = self.take_pending(&ctx.thread_id);
        if !warnings.is_empty() {
            let mut seen = HashSet::new();
            warnings.retain(|w| seen.insert(w.clone()));
            request.messages.push(Message::Human(hidden_human(
                LOOP_WARNING_NAME,
                warnings.join("\n\n"),
            )));
        }
        next.call(request).await
    }

    async fn after_model(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let Some(ai) = state.last_ai().filter(|ai| !ai.tool_calls.is_empty()) else {
            return Ok(HookResult::proceed());
        };
        match self.observe(&ctx.thread_id, ai) {
            Some(suffix) => {
                ctx.set_stop_reason(StopReason::LoopCapped);
                Ok(HookResult::update(replace_ai(forced_final(ai, &suffix))))
            }
            None => Ok(HookResult::proceed()),
        }
    }

    async fn after_agent(
        &self,
        _state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        // A warning nobody saw belongs to the run that ended; the next run starts clean.
        self.take_pending(&ctx.thread_id);
        Ok(HookResult::proceed())
    }
}

#[derive(Default)]
struct ThreadTrack {
    hashes: VecDeque<String>,
    warned_hashes: HashSet<String>,
    names: VecDeque<String>,
    warned_names: HashSet<String>,
    pending: Vec<String>,
}

#[cfg(test)]
mod tests;
