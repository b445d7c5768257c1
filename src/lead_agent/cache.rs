//! What the lead-agent factory reuses across runs: the skills scan and the assembled system
//! prompts, keyed by everything a prompt depends on.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::agents::{PromptOptions, SkillSummary, apply_prompt_template};
use crate::skills::SkillsLoader;

/// Prompts kept at most; past it the cache starts over (souls change rarely, agents are few).
const MAX_CACHED_PROMPTS: usize = 256;

/// Shared by every run of one harness.
#[derive(Default)]
pub struct LeadAgentCache {
    skills: SkillsLoader,
    prompts: Mutex<HashMap<[u8; 32], Arc<str>>>,
}

impl LeadAgentCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The skills of `dir`, rescanned only when something in it changed.
    pub fn skills(&self, dir: &Path) -> Arc<Vec<SkillSummary>> {
        self.skills.load(dir)
    }

    /// The system prompt for `options`, assembled once per distinct set of options.
    pub fn prompt(&self, options: &PromptOptions<'_>) -> Arc<str> {
        let key = prompt_key(options);
        if let Some(prompt) = self.lock().get(&key) {
            return prompt.clone();
        }
        let prompt: Arc<str> = apply_prompt_template(options).into();
        let mut prompts = self.lock();
        if prompts.len() >= MAX_CACHED_PROMPTS {
            prompts.clear();
        }
        prompts.insert(key, prompt.clone());
        prompt
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<str>>> {
        // Entries are inserted whole, so a poisoned map is still consistent.
        self.prompts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// SHA-256 of the options' `Debug` form: it covers every field (including the soul's text), so a
/// field added to `PromptOptions` later cannot be forgotten in the key.
fn prompt_key(options: &PromptOptions<'_>) -> [u8; 32] {
    let mut hasher = HashWriter(Sha256::new());
    let _ = write!(hasher, "{options:?}");
    hasher.0.finalize().into()
}

struct HashWriter(Sha256);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.update(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_options_share_one_prompt_and_any_change_builds_another() {
        let cache = LeadAgentCache::new();
        let options = PromptOptions {
            agent_name: Some("reviewer"),
            soul: Some("Be brief."),
            is_custom_agent: true,
            ..Default::default()
        };
        let first = cache.prompt(&options);
        assert!(Arc::ptr_eq(&first, &cache.prompt(&options.clone())));
        assert_eq!(&*first, apply_prompt_template(&options));
        let other_soul = cache.prompt(&PromptOptions {
            soul: Some("Be thorough."),
            ..options.clone()
        });
        assert!(other_soul.contains("Be thorough."));
        assert_ne!(first, other_soul);
    }
}
