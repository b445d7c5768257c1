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

/// The id's length and its last 16 bytes (the random part of generated ids), read as two words
/// and mixed: a checkpoint asks about every message of the thread, so this must be cheap (the
/// byte-at-a-time FNV it replaces was ~60 instructions of the walk's ~220 per message); it need
/// not resist attacks (a collision costs one rewritten message).
fn id_hash(id: &str) -> u64 {
    let bytes = id.as_bytes();
    let word = |eight: &[u8]| u64::from_le_bytes(eight.try_into().expect("8 bytes"));
    let (low, high) = match bytes.len() {
        // Generated ids: two loads, no copy (a copy of a variable length is a `memcpy` call).
        len @ 16.. => (word(&bytes[len - 16..len - 8]), word(&bytes[len - 8..])),
        len => {
            let mut tail = [0u8; 16];
            tail[16 - len..].copy_from_slice(bytes);
            (word(&tail[..8]), word(&tail[8..]))
        }
    };
    let mixed =
        (low ^ (bytes.len() as u64).rotate_left(48)).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ high;
    (mixed ^ (mixed >> 29)).wrapping_mul(0xff51_afd7_ed55_8ccd)
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

    #[test]
    fn generated_ids_do_not_collide() {
        let mut seen = HashSet::new();
        for prefix in [
            "human",
            "ai",
            "tool",
            "human-0123456789abcdef0123456789abcdef__user",
        ] {
            for _ in 0..2_000 {
                assert!(seen.insert(id_hash(&crate::messages::new_id(prefix))));
            }
        }
        let long = "x".repeat(40);
        assert_ne!(
            id_hash(&long),
            id_hash(&long[1..]),
            "same tail, other length"
        );
    }
}
