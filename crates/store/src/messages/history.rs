//! [`History`]: a thread's messages, shared until someone changes them.
//!
//! A turn on a long thread used to copy the whole history two or three times: out of the
//! thread-state cache, into the model request and into the values event. Behind an `Arc`
//! those are reference-count increments; the first change made while the list is shared copies
//! it once (`Arc::make_mut`), so no holder ever sees another's edits. A middleware that changes
//! the request therefore still copies it: look first (the system-message coalescing marks the
//! request merged instead of taking the system messages out).
//!
//! Serializing goes through the history's [`JsonCache`], shared by its clones and copies, so
//! the messages a turn did not change are written from their kept JSON form.
//!
//! A holder that only needs the list as long as nobody changes it keeps a [`WeakHistory`]
//! (the thread-state cache, while a run has the list): the run's first change then takes the
//! list from it instead of copying, and the weak holder sees the list is gone.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};

use crate::messages::Message;
use crate::messages::json_cache::JsonCache;

/// Reads as `Vec<Message>`; any mutable access unshares it first. Serialized as the plain list.
#[derive(Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct History {
    list: Arc<Vec<Message>>,
    /// Kept with the list through clones and copies: a turn's copy still matches the messages
    /// it did not change.
    #[serde(skip)]
    json: Arc<JsonCache>,
}

impl Serialize for History {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(&self.list, serializer)
    }
}

impl History {
    /// Whether both hold the same list (not merely equal messages).
    pub fn shares_list_with(&self, other: &History) -> bool {
        Arc::ptr_eq(&self.list, &other.list)
    }

    /// A holder of the list that does not keep it (see [`WeakHistory`]).
    pub fn downgrade(&self) -> WeakHistory {
        WeakHistory {
            list: Arc::downgrade(&self.list),
            json: self.json.clone(),
        }
    }

    /// How many histories share this list (weak holders not counted).
    #[cfg(test)]
    pub(crate) fn holders(&self) -> usize {
        Arc::strong_count(&self.list)
    }

    /// The list itself: moved out when this is its only holder, copied otherwise.
    pub fn into_vec(self) -> Vec<Message> {
        Arc::try_unwrap(self.list).unwrap_or_else(|shared| (*shared).clone())
    }
}

/// A [`History`] held without keeping it: it upgrades to the very list it was made from as
/// long as nobody changed that list since (a change made while only weak holders remain takes
/// the list from them, see `deref_mut`; one made while it is shared changes a copy, and the
/// original stays as it was).
#[derive(Clone)]
pub struct WeakHistory {
    list: std::sync::Weak<Vec<Message>>,
    json: Arc<JsonCache>,
}

impl fmt::Debug for WeakHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WeakHistory(alive: {})", self.is_alive())
    }
}

impl WeakHistory {
    pub fn is_alive(&self) -> bool {
        self.list.strong_count() > 0
    }

    pub fn upgrade(&self) -> Option<History> {
        self.list.upgrade().map(|list| History {
            list,
            json: self.json.clone(),
        })
    }
}

impl Deref for History {
    type Target = Vec<Message>;

    fn deref(&self) -> &Vec<Message> {
        &self.list
    }
}

/// Room a copy leaves for the appends it is usually made for: copied at its exact length, the
/// list was copied again by the first push (measured: 75 K instructions a turn at 1,000
/// messages).
const COPY_HEADROOM: usize = 16;

impl DerefMut for History {
    fn deref_mut(&mut self) -> &mut Vec<Message> {
        if Arc::get_mut(&mut self.list).is_none() {
            if Arc::strong_count(&self.list) == 1 {
                // Only weak holders besides this one: `make_mut` moves the list out of their
                // reach (no message is cloned). Should one upgrade meanwhile, it copies instead.
                return Arc::make_mut(&mut self.list);
            }
            let mut copy = Vec::with_capacity(self.list.len() + COPY_HEADROOM);
            copy.extend(self.list.iter().cloned());
            self.list = Arc::new(copy);
        }
        Arc::get_mut(&mut self.list).expect("a list just copied has one holder")
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.shares_list_with(other) || *self.list == *other.list
    }
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.list, f)
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        History {
            list: Arc::new(messages),
            json: Arc::default(),
        }
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_list_until_one_changes() {
        let history = History::from(vec![Message::human("one")]);
        let mut copy = history.clone();
        assert!(copy.shares_list_with(&history));
        assert_eq!(copy, history);
        copy.push(Message::ai("two"));
        assert!(
            !copy.shares_list_with(&history),
            "the change copied the list"
        );
        assert_eq!(history.len(), 1, "the other holder does not see it");
        assert_eq!(copy.len(), 2);
        assert_eq!(copy[0], history[0]);
        let json = serde_json::to_value(&copy).unwrap();
        assert_eq!(json.as_array().map(Vec::len), Some(2));
        let back: History = serde_json::from_value(json).unwrap();
        assert_eq!(back, copy);
        assert!(!back.shares_list_with(&copy));
        let shared = copy.clone();
        assert_eq!(shared.into_vec().len(), 2, "copied out while shared");
        assert_eq!(copy.into_vec().len(), 2, "moved out once alone");
    }

    #[test]
    fn a_copy_writes_its_own_messages_through_the_shared_cache() {
        let history = History::from(vec![Message::human("one"), Message::ai("two")]);
        let first = serde_json::to_string(&history).unwrap();
        let mut copy = history.clone();
        copy.push(Message::human("three"));
        if let Message::Ai(ai) = &mut copy[1] {
            ai.content = "changed".into();
        }
        assert!(
            Arc::ptr_eq(&copy.json, &history.json),
            "the copy kept the cache"
        );
        let plain = |h: &History| serde_json::to_string(&*h.list).unwrap();
        for _ in 0..2 {
            assert_eq!(serde_json::to_string(&copy).unwrap(), plain(&copy));
            assert_eq!(serde_json::to_string(&history).unwrap(), first);
        }
        assert_eq!(first, plain(&history));
        let back: History = serde_json::from_str(&first).unwrap();
        assert_eq!(back, history);
        assert!(
            !Arc::ptr_eq(&back.json, &history.json),
            "a read history starts its own"
        );
    }

    #[test]
    fn a_copy_has_room_for_the_next_appends() {
        let history = History::from(vec![Message::human("one"); 100]);
        let mut copy = history.clone();
        copy.push(Message::ai("two"));
        let list = copy.as_ptr();
        for _ in 1..COPY_HEADROOM {
            copy.push(Message::ai("more"));
        }
        assert_eq!(copy.as_ptr(), list, "no reallocation within the headroom");
        assert_eq!(copy.len(), 100 + COPY_HEADROOM);
        assert_eq!(copy[..100], history[..]);
        assert_eq!(history.len(), 100);
    }

    #[test]
    fn a_weak_holder_keeps_the_list_until_it_changes() {
        let mut list = Vec::with_capacity(64);
        list.resize(50, Message::human("one"));
        let mut history = History::from(list);
        let weak = history.downgrade();
        let again = weak.upgrade().expect("alive while unchanged");
        assert!(again.shares_list_with(&history));
        drop(again);
        let messages = history.as_ptr();
        history.push(Message::ai("two"));
        assert!(weak.upgrade().is_none(), "the change took the list");
        assert_eq!(history.as_ptr(), messages, "moved, not copied");

        // Changed while also shared: the change is made on a copy, the weak holder keeps the
        // list it had, unchanged.
        let weak = history.downgrade();
        let reader = weak.upgrade().unwrap();
        history.push(Message::ai("three"));
        assert_eq!(weak.upgrade().unwrap().len(), 51);
        assert_eq!(reader.len(), 51);
        assert_eq!(history.len(), 52);
        drop(reader);
        assert!(weak.upgrade().is_none(), "nobody keeps the old list");
        let kept = history.downgrade();
        let moved = history.into_vec();
        assert!(kept.upgrade().is_none() && moved.len() == 52);
    }
}
