//! A platform's profile: the limits and the pace the daemon must keep on it.
//!
//! The daemon sizes message chunks, throttles streaming edits and typing, and shares one rate
//! budget per bot from these numbers, so a platform's rules live in its adapter, not in shared
//! code.

use std::time::Duration;

/// What a platform allows and how fast the daemon may talk to it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelProfile {
    /// Characters per message; longer answers are split.
    pub max_text_len: usize,
    /// Minimum time between edits of the streaming status message.
    pub edit_interval: Pace,
    /// How often the typing indicator is refreshed while the agent works.
    pub typing_interval: Pace,
    /// Requests per bot and per chat, shared by sends, edits, typing and reactions.
    pub budget: BudgetLimits,
    pub max_upload_bytes: u64,
    /// Images up to this size are sent as pictures, larger ones as files.
    pub max_photo_bytes: u64,
    pub max_download_bytes: u64,
    /// What to react with when reactions are on and the adapter can react.
    pub reactions: ReactionSet,
}

/// A duration for direct conversations and one for group chats (groups are usually stricter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    pub direct: Duration,
    pub group: Duration,
}

impl Pace {
    pub fn of(&self, is_group: bool) -> Duration {
        if is_group { self.group } else { self.direct }
    }
}

/// Request budget of one bot on one platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetLimits {
    pub global_per_second: u32,
    pub direct_per_minute: u32,
    pub group_per_minute: u32,
    /// Requests a chat may make at once before the per-minute pace applies.
    pub burst: u32,
}

/// The platform's names for the three reactions (an emoji, or Slack's `eyes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReactionSet {
    pub received: &'static str,
    pub done: &'static str,
    pub failed: &'static str,
}
