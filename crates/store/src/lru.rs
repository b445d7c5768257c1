//! A small least-recently-used cache bounded by a total weight (bytes, or 1 per entry).
//!
//! Every cache that a user or a platform can inflate (thread states, custom agents, system
//! prompts) uses this one type, so each has a bound from the config and the same eviction rule.
//! Lookups and inserts are `O(log n)`: recency is a `BTreeMap` from a tick to the key.
//! Entries also remember when they were last used, so a cache can drop what nobody touched for
//! a while ([`Lru::evict_idle`]) instead of holding it until something newer pushes it out.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// The cache. Not synchronised: callers wrap it in a `Mutex` held for the call only.
#[derive(Debug)]
pub struct Lru<K, V> {
    entries: HashMap<K, Slot<V>>,
    recency: BTreeMap<u64, K>,
    tick: u64,
    weight: usize,
    capacity: usize,
    /// Where "last used" times come from: the monotonic clock, or a test's.
    now: fn() -> Instant,
}

#[derive(Debug)]
struct Slot<V> {
    value: V,
    weight: usize,
    tick: u64,
    used: Instant,
}

impl<K: Clone + Eq + Hash, V> Lru<K, V> {
    /// A cache holding at most `capacity` units of weight (0 keeps nothing).
    pub fn new(capacity: usize) -> Self {
        Self::with_clock(capacity, Instant::now)
    }

    /// [`Lru::new`] reading the time from `now`, so idle eviction can be tested without
    /// waiting.
    pub fn with_clock(capacity: usize, now: fn() -> Instant) -> Self {
        Self {
            entries: HashMap::new(),
            recency: BTreeMap::new(),
            tick: 0,
            weight: 0,
            capacity,
            now,
        }
    }

    /// The value of `key`, marked as the most recently used.
    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let tick = self.next_tick();
        let slot = self.entries.get_mut(key)?;
        let owned = self.recency.remove(&slot.tick)?;
        slot.tick = tick;
        slot.used = (self.now)();
        self.recency.insert(tick, owned);
        Some(&slot.value)
    }

    /// Like [`Lru::get`], mutable; the caller reports a changed weight with [`Lru::reweigh`].
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let tick = self.next_tick();
        let slot = self.entries.get_mut(key)?;
        let owned = self.recency.remove(&slot.tick)?;
        slot.tick = tick;
        slot.used = (self.now)();
        self.recency.insert(tick, owned);
        Some(&mut slot.value)
    }

    /// Inserts or replaces `key`, then evicts the least recently used entries until the total
    /// weight fits. A value heavier than the whole capacity is kept alone: dropping it would
    /// make its next use rebuild all of it, and whoever uses it holds it that whole time anyway
    /// (a thread's run holds its state), so the bound becomes the larger of the capacity and
    /// that one value. A zero capacity keeps nothing.
    pub fn insert(&mut self, key: K, value: V, weight: usize) {
        self.remove(&key);
        if self.capacity == 0 {
            return;
        }
        let tick = self.next_tick();
        self.recency.insert(tick, key.clone());
        let used = (self.now)();
        self.entries.insert(
            key,
            Slot {
                value,
                weight,
                tick,
                used,
            },
        );
        self.weight += weight;
        self.evict();
    }

    /// Sets the weight of an entry changed in place (through [`Lru::get_mut`]), evicting the
    /// least recently used others to fit (an entry that alone outgrew the capacity stays alone).
    pub fn reweigh<Q>(&mut self, key: &Q, weight: usize)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(slot) = self.entries.get_mut(key) else {
            return;
        };
        self.weight = self.weight - slot.weight + weight;
        slot.weight = weight;
        self.evict();
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.entries.remove(key)?;
        self.recency.remove(&slot.tick);
        self.weight -= slot.weight;
        Some(slot.value)
    }

    /// Keeps only the entries whose key `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        let doomed: Vec<K> = self.entries.keys().filter(|k| !keep(k)).cloned().collect();
        for key in doomed {
            self.remove(&key);
        }
    }

    /// Drops the entries unused for longer than `max_idle`, oldest first; returns how many.
    /// Recency order is use order, so the walk stops at the first entry still in use.
    pub fn evict_idle(&mut self, max_idle: Duration) -> usize {
        let now = (self.now)();
        let mut evicted = 0;
        while let Some((_, key)) = self.recency.first_key_value() {
            let idle = self
                .entries
                .get(key)
                .is_none_or(|slot| now.saturating_duration_since(slot.used) > max_idle);
            if !idle {
                break;
            }
            if let Some((_, key)) = self.recency.pop_first()
                && let Some(slot) = self.entries.remove(&key)
            {
                self.weight -= slot.weight;
                evicted += 1;
            }
        }
        evicted
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The total weight of the entries kept.
    pub fn weight(&self) -> usize {
        self.weight
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The most recently used entry is never evicted here, whatever its weight.
    fn evict(&mut self) {
        while self.weight > self.capacity && self.entries.len() > 1 {
            let Some((_, key)) = self.recency.pop_first() else {
                break;
            };
            if let Some(slot) = self.entries.remove(&key) {
                self.weight -= slot.weight;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut lru = Lru::new(3);
        for key in ["a", "b", "c"] {
            lru.insert(key.to_string(), key.len(), 1);
        }
        assert!(lru.get("a").is_some());
        lru.insert("d".to_string(), 1, 1);
        assert!(lru.get("b").is_none(), "b was the least recently used");
        assert!(lru.get("a").is_some() && lru.get("c").is_some() && lru.get("d").is_some());
        assert_eq!((lru.len(), lru.weight()), (3, 3));
    }

    #[test]
    fn weights_bound_the_total_and_an_oversized_value_is_kept_alone() {
        let mut lru = Lru::new(10);
        lru.insert(1, "six", 6);
        lru.insert(2, "four", 4);
        assert_eq!(lru.weight(), 10);
        lru.insert(3, "three", 3);
        assert!(lru.get(&1).is_none());
        assert_eq!(lru.weight(), 7);
        *lru.get_mut(&2).unwrap() = "grown";
        lru.reweigh(&2, 9);
        assert!(lru.get(&3).is_none(), "3 made room for the grown entry");
        assert_eq!(lru.weight(), 9);
        lru.insert(5, "one", 1);
        lru.insert(4, "huge", 11);
        assert_eq!(lru.get(&4), Some(&"huge"), "the oversized value is kept");
        assert_eq!((lru.len(), lru.weight()), (1, 11), "and alone");
        lru.insert(6, "small", 2);
        assert!(lru.get(&4).is_none(), "the next insert pushes it out");
        assert_eq!((lru.len(), lru.weight()), (1, 2));
        lru.reweigh(&6, 12);
        assert_eq!(
            (lru.len(), lru.weight()),
            (1, 12),
            "an entry that outgrew it stays alone"
        );
    }

    #[test]
    fn replace_remove_and_retain_keep_the_weight_exact() {
        let mut lru = Lru::new(100);
        lru.insert("x", 1, 10);
        lru.insert("x", 2, 20);
        assert_eq!((lru.len(), lru.weight()), (1, 20));
        lru.insert("y", 3, 5);
        lru.retain(|k| *k != "x");
        assert_eq!((lru.len(), lru.weight()), (1, 5));
        assert_eq!(lru.remove("y"), Some(3));
        assert_eq!(lru.weight(), 0);
        let mut none = Lru::new(0);
        none.insert("k", 1, 0);
        assert!(none.is_empty(), "a zero capacity keeps nothing");
        assert_eq!(none.capacity(), 0);
    }

    thread_local! {
        /// How far a test moved its clock past [`BASE`].
        static ELAPSED: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
    }

    static BASE: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

    /// The test's clock: [`BASE`] plus what [`advance`] added on this thread.
    fn test_now() -> Instant {
        *BASE + ELAPSED.get()
    }

    fn advance(by: Duration) {
        ELAPSED.set(ELAPSED.get() + by);
    }

    #[test]
    fn entries_unused_for_longer_than_the_limit_are_dropped_oldest_first() {
        let mut lru = Lru::with_clock(10, test_now);
        lru.insert("old", 1, 1);
        lru.insert("used", 2, 1);
        advance(Duration::from_millis(30));
        lru.insert("new", 3, 1);
        assert!(lru.get("used").is_some());
        assert_eq!(
            lru.evict_idle(Duration::from_millis(30)),
            0,
            "not past the limit"
        );
        advance(Duration::from_millis(1));
        assert_eq!(lru.evict_idle(Duration::from_millis(20)), 1);
        assert!(lru.get("old").is_none());
        assert_eq!((lru.len(), lru.weight()), (2, 2));
        assert_eq!(lru.evict_idle(Duration::from_secs(60)), 0);
    }
}
