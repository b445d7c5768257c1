//! The bounded, expiring cache of display names every adapter's [`crate::UserNames`] keeps, so
//! a busy conversation (and the history fetched before a mention) costs one platform call per
//! person and hour, not one per message.
//!
//! The clock is the caller's: adapters pass `tokio::time::Instant::now().into_std()`, so tests
//! run on paused time, and this crate needs no runtime.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a name is used before the platform is asked again (people rename themselves).
pub const NAME_KEEP_FOR: Duration = Duration::from_secs(60 * 60);
/// People whose names one adapter keeps; past that the older half is forgotten.
pub const NAME_MAX_KEPT: usize = 1024;

/// Names by platform user id, each with when it was learnt. `None` names are kept too: a
/// platform that knows no name for someone is not asked again for each of their messages.
pub struct NameCache {
    names: Mutex<HashMap<String, (Option<String>, Instant)>>,
    keep_for: Duration,
    max_kept: usize,
}

impl Default for NameCache {
    fn default() -> Self {
        Self::new(NAME_KEEP_FOR, NAME_MAX_KEPT)
    }
}

impl NameCache {
    pub fn new(keep_for: Duration, max_kept: usize) -> Self {
        Self {
            names: Mutex::default(),
            keep_for,
            max_kept: max_kept.max(2),
        }
    }

    /// The name learnt for `user_id` less than `keep_for` before `now`; `Some(None)` when the
    /// platform said it knows none, `None` when it must be asked.
    pub fn get(&self, user_id: &str, now: Instant) -> Option<Option<String>> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let (name, at) = names.get(user_id)?;
        (now.saturating_duration_since(*at) < self.keep_for).then(|| name.clone())
    }

    /// Remembers `name` for `user_id` as of `now` (a lookup's answer, or a name an event
    /// carried).
    pub fn put(&self, user_id: &str, name: Option<String>, now: Instant) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.len() >= self.max_kept && !names.contains_key(user_id) {
            let mut ages: Vec<Instant> = names.values().map(|(_, at)| *at).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            names.retain(|_, (_, at)| *at > cut);
        }
        names.insert(user_id.to_string(), (name, now));
    }

    /// How many people are kept (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_expire_and_the_cache_stays_bounded() {
        let cache = NameCache::new(Duration::from_secs(60), 8);
        let start = Instant::now();
        cache.put("U1", Some("Ann".into()), start);
        cache.put("U2", None, start);
        assert_eq!(cache.get("U1", start), Some(Some("Ann".into())));
        assert_eq!(
            cache.get("U2", start),
            Some(None),
            "no name is an answer too"
        );
        assert_eq!(cache.get("U3", start), None);
        let later = start + Duration::from_secs(60);
        assert_eq!(cache.get("U1", later), None, "asked again once expired");
        for n in 0..20u64 {
            cache.put(&format!("P{n}"), None, start + Duration::from_millis(n));
            assert!(cache.len() <= 8, "{}", cache.len());
        }
        assert_eq!(cache.get("P19", start), Some(None), "the newest is kept");
        assert_eq!(cache.get("U1", start), None, "the oldest went first");
    }

    #[test]
    fn refreshing_a_known_person_evicts_nobody() {
        let cache = NameCache::new(Duration::from_secs(60), 2);
        let now = Instant::now();
        cache.put("U1", Some("Ann".into()), now);
        cache.put("U2", Some("Bob".into()), now);
        cache.put("U1", Some("Annie".into()), now);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("U2", now), Some(Some("Bob".into())));
    }
}
