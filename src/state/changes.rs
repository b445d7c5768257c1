//! Which messages a run touched since its last checkpoint, so a checkpoint writes only those.
//!
//! The loop records every [`StateUpdate`] it applies; the checkpointer then writes the messages
//! whose ids were upserted, and finds removed and appended ones by walking ids against what it
//! stored before. Ids are kept as hashes: a collision only makes a checkpoint rewrite an
//! unchanged message, never skip a changed one.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::state::StateUpdate;

/// The message ids upserted since the last successful checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateChanges {
    touched: HashSet<u64, BuildHasherDefault<Prehashed>>,
}

impl StateChanges {
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes what `update` will change; call it for every update applied to the state.
    pub fn record(&mut self, update: &StateUpdate) {
        for message in &update.messages {
            self.touched.insert(id_hash(message.id()));
        }
    }

    /// Whether the message with `id` may have changed since the last checkpoint.
    pub fn touches(&self, id: &str) -> bool {
        !self.touched.is_empty() && self.touched.contains(&id_hash(id))
    }

    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    /// Forgets everything recorded: the checkpoint that covered it succeeded.
    pub fn clear(&mut self) {
        self.touched.clear();
    }
}

/// FNV-1a over the id's length and its last 16 bytes (the random part of generated ids): a
/// checkpoint asks about every message of the thread, so this must be cheap; it need not resist
/// attacks (a collision costs one rewritten message).
fn id_hash(id: &str) -> u64 {
    let bytes = id.as_bytes();
    let tail = &bytes[bytes.len().saturating_sub(16)..];
    tail.iter()
        .fold(0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The set's keys are hashes already: hashing them again (SipHash) cost as much as the walk.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; anything else still spreads.
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Message;

    #[test]
    fn upserted_ids_are_touched_until_cleared() {
        let mut changes = StateChanges::new();
        assert!(changes.is_empty());
        let message = Message::human("hi");
        let id = message.id().to_string();
        changes.record(&StateUpdate {
            messages: vec![message],
            remove_messages: vec!["gone".into()],
            ..Default::default()
        });
        assert!(changes.touches(&id));
        assert!(
            !changes.touches("gone"),
            "removals are found by the id walk"
        );
        changes.clear();
        assert!(!changes.touches(&id) && changes.is_empty());
    }

    #[test]
    fn ids_differing_anywhere_in_their_tail_or_length_are_told_apart() {
        let mut changes = StateChanges::new();
        changes.record(&StateUpdate::message(Message::Human(
            crate::messages::HumanMessage {
                id: "call_0".into(),
                ..Default::default()
            },
        )));
        assert!(changes.touches("call_0"));
        for other in ["call_1", "call_00", "call_", "xcall_0"] {
            assert!(!changes.touches(other), "{other}");
        }
    }
}
