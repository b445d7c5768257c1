//! One connected channel as the daemon uses it: the adapter's capabilities, its profile and the
//! rate budget every request to it draws from. Settings people may change while the daemon runs
//! (allowlists, admins, session defaults, reactions) are not here: they are read from the live
//! config for every message.

use std::time::Duration;

use antler_channel::{ChannelParts, ChannelProfile};

use crate::channels::budget::RateBudget;
use crate::config::AppConfig;

pub struct ChannelRuntime {
    /// The adapter's name (`telegram`): its config section, chat keys and user ids.
    pub name: String,
    pub parts: ChannelParts,
    pub profile: ChannelProfile,
    pub budget: RateBudget,
    /// Recognises `/cmd@BotName`.
    pub bot_username: Option<String>,
    /// The channels' health, where a turn reports what the channel cannot do (a missing
    /// history scope) for `/readyz` and `antler status`.
    pub health: crate::channels::health::HealthBoard,
}

impl ChannelRuntime {
    pub fn new(
        name: impl Into<String>,
        parts: ChannelParts,
        profile: ChannelProfile,
        bot_username: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            budget: RateBudget::new(profile.budget),
            parts,
            profile,
            bot_username,
            health: Default::default(),
        }
    }

    /// Time between edits of a streaming status message: `channels.stream.min_interval` when
    /// set, else the platform's pace.
    pub fn edit_interval(&self, config: &AppConfig, is_group: bool) -> Duration {
        config.channels.stream.min_interval.map_or_else(
            || self.profile.edit_interval.of(is_group),
            Duration::from_secs_f64,
        )
    }

    /// Whether to react to messages: the section says so and the adapter can.
    pub fn reacts(&self, config: &AppConfig) -> bool {
        self.parts.react.is_some()
            && config
                .channels
                .section(&self.name)
                .is_some_and(|section| section.reactions())
    }
}
