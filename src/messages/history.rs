//! [`History`]: a thread's messages, shared until someone changes them.
//!
//! A turn on a long thread used to copy the whole history two or three times: out of the
//! thread-state cache, into the model request and into the values event. Behind an `Arc`
//! those are reference-count increments; the first change made while the list is shared copies
//! it once (`Arc::make_mut`), so no holder ever sees another's edits. A middleware that changes
//! the request therefore still copies it: look first (the system-message coalescing marks the
//! request merged instead of taking the system messages out).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::messages::Message;

/// Reads as `Vec<Message>`; any mutable access unshares it first. Serialized as the plain list.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct History(Arc<Vec<Message>>);

impl History {
    /// Whether both hold the same list (not merely equal messages).
    pub fn shares_list_with(&self, other: &History) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The list itself: moved out when this is its only holder, copied otherwise.
    pub fn into_vec(self) -> Vec<Message> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl Deref for History {
    type Target = Vec<Message>;

    fn deref(&self) -> &Vec<Message> {
        &self.0
    }
}

/// Room a copy leaves for the appends it is usually made for: copied at its exact length, the
/// list was copied again by the first push (measured: 75 K instructions a turn at 1,000
/// messages).
const COPY_HEADROOM: usize = 16;

impl DerefMut for History {
    fn deref_mut(&mut self) -> &mut Vec<Message> {
        if Arc::get_mut(&mut self.0).is_none() {
            let mut copy = Vec::with_capacity(self.0.len() + COPY_HEADROOM);
            copy.extend(self.0.iter().cloned());
            self.0 = Arc::new(copy);
        }
        Arc::get_mut(&mut self.0).expect("a list just copied has one holder")
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.shares_list_with(other) || *self.0 == *other.0
    }
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        History(Arc::new(messages))
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
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
}
