//! How many turns other bots started in a row in one conversation, so two bots that answer
//! each other stop after `bot_turn_limit` until a person speaks.
//!
//! Tree `channel_bot_turns`: `ChatKey` string → the count (decimal). Several daemons may
//! receive one conversation's messages, so every change is a compare-and-set on the stored
//! count; a person's message deletes it. A conversation with no bot turn has no key, so
//! people's messages cost one read and no write.

use antler_channel::ChatKey;
use antler_store::{BatchOp, Expect, StoreError, StoreRef};

const BOT_TURNS: &str = "channel_bot_turns";
/// Compare-and-set rounds before a bot's message is left unanswered (only under a storm of
/// concurrent bot messages in one conversation).
const MAX_ATTEMPTS: usize = 16;

/// Whether a bot's message starts a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BotTurn {
    Answer,
    /// The conversation reached its limit; `first` for the first message refused since (the
    /// one worth a log line).
    Refuse {
        first: bool,
    },
}

#[derive(Clone)]
pub(crate) struct BotTurns {
    store: StoreRef,
}

impl BotTurns {
    pub(crate) fn new(store: StoreRef) -> Self {
        Self { store }
    }

    /// A person spoke in the conversation: bots may be answered again.
    pub(crate) fn person_spoke(&self, key: &ChatKey) -> Result<(), StoreError> {
        let key = key.to_string();
        if self.store.get(BOT_TURNS, key.as_bytes())?.is_some() {
            self.store.delete(BOT_TURNS, key.as_bytes())?;
        }
        Ok(())
    }

    /// Counts a bot's message in the conversation: answered while fewer than `limit` bot turns
    /// ran since a person last spoke (`0`: no limit, nothing counted).
    pub(crate) fn bot_spoke(&self, key: &ChatKey, limit: u32) -> Result<BotTurn, StoreError> {
        if limit == 0 {
            return Ok(BotTurn::Answer);
        }
        let key = key.to_string().into_bytes();
        for _ in 0..MAX_ATTEMPTS {
            let stored = self.store.get(BOT_TURNS, &key)?;
            let count = stored.as_deref().map_or(0, parse_count);
            // One past the limit marks "refused and logged": later refusals stay quiet.
            let (next, turn) = if count < limit {
                (count + 1, BotTurn::Answer)
            } else if count == limit {
                (limit + 1, BotTurn::Refuse { first: true })
            } else {
                return Ok(BotTurn::Refuse { first: false });
            };
            let expect = Expect {
                tree: BOT_TURNS,
                key: key.clone(),
                value: stored,
            };
            let put = BatchOp::Put {
                tree: BOT_TURNS,
                key: key.clone(),
                value: next.to_string().into_bytes(),
            };
            if self.store.apply_batch_if(&expect, vec![put])? {
                return Ok(turn);
            }
        }
        Ok(BotTurn::Refuse { first: false })
    }
}

/// A stored count; an unreadable one counts as none (it only ever bounds bots).
fn parse_count(bytes: &[u8]) -> u32 {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use antler_store::MemoryStore;

    fn turns() -> (BotTurns, ChatKey) {
        let store: StoreRef = Arc::new(MemoryStore::new());
        (
            BotTurns::new(store),
            ChatKey::new("slack", "C1", Some("1.0".into())),
        )
    }

    #[test]
    fn bots_are_answered_up_to_the_limit_until_a_person_speaks() {
        let (turns, key) = turns();
        for _ in 0..3 {
            assert_eq!(turns.bot_spoke(&key, 3).unwrap(), BotTurn::Answer);
        }
        assert_eq!(
            turns.bot_spoke(&key, 3).unwrap(),
            BotTurn::Refuse { first: true }
        );
        assert_eq!(
            turns.bot_spoke(&key, 3).unwrap(),
            BotTurn::Refuse { first: false }
        );
        turns.person_spoke(&key).unwrap();
        assert_eq!(turns.bot_spoke(&key, 3).unwrap(), BotTurn::Answer);
        let other = ChatKey::new("slack", "C1", Some("2.0".into()));
        assert_eq!(turns.bot_spoke(&other, 1).unwrap(), BotTurn::Answer);
        assert_eq!(
            turns.bot_spoke(&other, 1).unwrap(),
            BotTurn::Refuse { first: true },
            "each conversation counts its own"
        );
    }

    #[test]
    fn a_zero_limit_counts_nothing_and_a_person_costs_no_write() {
        let (turns, key) = turns();
        for _ in 0..10 {
            assert_eq!(turns.bot_spoke(&key, 0).unwrap(), BotTurn::Answer);
        }
        turns.person_spoke(&key).unwrap();
        assert!(
            turns
                .store
                .get(BOT_TURNS, key.to_string().as_bytes())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn concurrent_bot_messages_never_exceed_the_limit() {
        let (turns, key) = turns();
        let answered = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| turns.bot_spoke(&key, 3).unwrap()))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap())
                .filter(|turn| *turn == BotTurn::Answer)
                .count()
        });
        assert!((1..=3).contains(&answered), "{answered}");
    }
}
