//! What the lead-agent factory reuses across runs: the skills scan and the assembled system
//! prompts, keyed by everything a prompt depends on.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::custom_agents::{PromptOptions, apply_prompt_template};
use crate::skills::SkillsLoader;
use antler_store::lru::Lru;

/// Prompts kept unless configured (`cache.prompts`); the least recently used go first.
pub(crate) const DEFAULT_CACHED_PROMPTS: usize = 64;

/// Shared by every run of one harness.
pub struct LeadAgentCache {
    skills: Arc<SkillsLoader>,
    prompts: Mutex<Lru<[u8; 32], Arc<str>>>,
}

impl Default for LeadAgentCache {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CACHED_PROMPTS)
    }
}

impl LeadAgentCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache keeping at most `prompts` system prompts.
    pub fn with_capacity(prompts: usize) -> Self {
        Self {
            skills: Arc::new(SkillsLoader::default()),
            prompts: Mutex::new(Lru::new(prompts)),
        }
    }

    /// The skills scans, shared by every [`crate::skills::SkillCatalog`] of the harness.
    pub fn skills_loader(&self) -> Arc<SkillsLoader> {
        self.skills.clone()
    }

    /// The system prompt for `options`, assembled once per distinct set of options.
    pub fn prompt(&self, options: &PromptOptions<'_>) -> Arc<str> {
        let key = prompt_key(options);
        if let Some(prompt) = self.lock().get(&key) {
            return prompt.clone();
        }
        let prompt: Arc<str> = apply_prompt_template(options).into();
        self.lock().insert(key, prompt.clone(), 1);
        prompt
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru<[u8; 32], Arc<str>>> {
        // Entries are inserted whole, so a poisoned map is still consistent.
        self.prompts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// SHA-256 of what the options' derived `Hash` feeds: it covers every field (including the
/// soul's text), so a field added to `PromptOptions` later cannot be forgotten in the key. (Their
/// `Debug` form, hashed before, escaped every skill description char by char: ~70 K
/// instructions a run.)
fn prompt_key(options: &PromptOptions<'_>) -> [u8; 32] {
    let mut hasher = Sha256Hasher(Sha256::new());
    options.hash(&mut hasher);
    hasher.0.finalize().into()
}

/// Feeds `Hash` into SHA-256, whose 32 bytes are the key; `finish` is only there for the trait.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().expect("a digest is 32 bytes"))
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

    #[test]
    fn every_field_is_part_of_the_key() {
        let skill = [crate::custom_agents::SkillSummary {
            name: "pdf".into(),
            description: "Reads \"PDF\" files\nwell".into(),
            path: "/mnt/skills/public/pdf/SKILL.md".into(),
            allowed_tools: None,
        }];
        let deferred = ["github_search".to_string()];
        let mounts = [("/mnt/data".to_string(), true)];
        let tools = ["bash".to_string()];
        let base = PromptOptions::default();
        let variants = [
            PromptOptions {
                agent_name: Some("x"),
                ..base.clone()
            },
            PromptOptions {
                soul: Some(""),
                ..base.clone()
            },
            PromptOptions {
                is_custom_agent: true,
                ..base.clone()
            },
            PromptOptions {
                subagent_enabled: true,
                ..base.clone()
            },
            PromptOptions {
                max_concurrent_subagents: 9,
                ..base.clone()
            },
            PromptOptions {
                max_total_subagents: 9,
                ..base.clone()
            },
            PromptOptions {
                skills: &skill,
                ..base.clone()
            },
            PromptOptions {
                deferred_tools: &deferred,
                ..base.clone()
            },
            PromptOptions {
                mounts: &mounts,
                ..base.clone()
            },
            PromptOptions {
                plan_mode: true,
                ..base.clone()
            },
            PromptOptions {
                tools: &tools,
                ..base.clone()
            },
            PromptOptions {
                sandbox_network: Some(false),
                ..base.clone()
            },
            PromptOptions {
                converted_uploads: true,
                ..base.clone()
            },
            PromptOptions {
                chat: crate::custom_agents::surface::ChatSurface::for_channel(Some("slack")),
                ..base.clone()
            },
            PromptOptions {
                participants: true,
                ..base.clone()
            },
        ];
        let mut keys = std::collections::HashSet::from([prompt_key(&base)]);
        for variant in &variants {
            assert!(keys.insert(prompt_key(variant)), "{variant:?}");
        }
        assert_eq!(prompt_key(&variants[6]), prompt_key(&variants[6].clone()));
    }

    #[test]
    fn the_prompt_cache_is_bounded() {
        let cache = LeadAgentCache::with_capacity(2);
        let souls = ["one", "two", "three"];
        for soul in souls {
            cache.prompt(&PromptOptions {
                soul: Some(soul),
                ..Default::default()
            });
        }
        assert_eq!(cache.lock().len(), 2);
    }
}
