//! The `channels:` section: settings shared by every chat channel, and one section per adapter.
//!
//! Each adapter owns the typed struct of its section (`antler_telegram::TelegramConfig`,
//! `antler_slack::SlackConfig`, `antler_discord::DiscordConfig`, `antler_feishu::FeishuConfig`),
//! which also implements [`ChannelConfig`]; [`ChannelsConfig::sections`] is the one list the
//! daemon iterates, so adding an adapter is a field here and an entry there.

use antler_channel::{ChannelConfig, SessionConfig};
use antler_discord::DiscordConfig;
use antler_feishu::FeishuConfig;
use antler_slack::SlackConfig;
use antler_telegram::TelegramConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ChannelsConfig {
    /// Defaults for every channel (a channel's own `session` wins).
    pub session: SessionConfig,
    /// How answers stream into chats: a status message edited as the agent works.
    pub stream: StreamConfig,
    /// Messages waiting per conversation while its thread is busy; more get a "busy" notice.
    pub queue_limit: usize,
    /// Inbound messages per user per minute before one polite notice (0 = unlimited).
    pub user_messages_per_minute: u32,
    /// Seconds a channel restarted by a config reload (its credentials or connection settings
    /// changed) has to connect (1–600). Past it, or on an error retrying cannot fix (a refused
    /// token), the whole previous config is restored and the channel reconnects with it.
    pub reload_connect_timeout_seconds: u64,
    /// Turns other bots (those in a channel's `allowed_bots`) may start in a row in one
    /// conversation; then bots are not answered there until a person speaks, so two bots
    /// cannot answer each other forever (0 = no limit). A channel's own `bot_turn_limit` wins.
    pub bot_turn_limit: u32,
    /// What was said before a mention in a group conversation, read for the model (each
    /// channel's `context` section overrides these).
    pub context: ContextConfig,
    /// The Telegram bot.
    pub telegram: TelegramConfig,
    /// The Slack app.
    pub slack: SlackConfig,
    /// The Discord bot.
    pub discord: DiscordConfig,
    /// The Feishu / Lark app.
    pub feishu: FeishuConfig,
    /// Signed webhooks other systems send (`POST /hooks/{endpoint}`): each starts a run and
    /// answers in a chat or only in its thread. Not a chat platform: no adapter, no allowlist.
    pub webhook: crate::config::webhook::WebhookConfig,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            session: SessionConfig::default(),
            stream: StreamConfig::default(),
            queue_limit: 8,
            user_messages_per_minute: 30,
            reload_connect_timeout_seconds: 30,
            bot_turn_limit: 3,
            context: ContextConfig::default(),
            telegram: TelegramConfig::default(),
            slack: SlackConfig::default(),
            discord: DiscordConfig::default(),
            feishu: FeishuConfig::default(),
            webhook: Default::default(),
        }
    }
}

impl ChannelsConfig {
    /// Every adapter's section, enabled or not.
    pub fn sections(&self) -> Vec<&dyn ChannelConfig> {
        vec![&self.telegram, &self.slack, &self.discord, &self.feishu]
    }

    /// The section of the channel called `name`.
    pub fn section(&self, name: &str) -> Option<&dyn ChannelConfig> {
        self.sections().into_iter().find(|s| s.name() == name)
    }

    /// The agent a channel's chats use unless a chat chose one: the channel's own session
    /// default, then the one for every channel.
    pub fn default_agent(&self, channel: &str) -> Option<&str> {
        self.section(channel)
            .and_then(|section| section.session_agent())
            .or(self.session.agent.as_deref())
    }
}

/// The limits of the earlier messages a mention brings along: the newest are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// Earlier messages read at most for one mention (0–100; 0 = none: the model sees only
    /// the message that addressed it).
    pub max_messages: usize,
    /// Characters of earlier messages at most for one mention; older messages past it are
    /// left out.
    pub max_chars: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            max_messages: 30,
            max_chars: 12_000,
        }
    }
}

impl ChannelsConfig {
    /// The limits for `channel`: its own `context` section over `channels.context`.
    pub fn context_limits(&self, channel: &str) -> ContextConfig {
        let own = self
            .section(channel)
            .map(|section| section.context_override())
            .unwrap_or_default();
        ContextConfig {
            max_messages: own.max_messages.unwrap_or(self.context.max_messages),
            max_chars: own.max_chars.unwrap_or(self.context.max_chars),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StreamConfig {
    /// Seconds between edits of the status message; unset = the platform's pace
    /// (Telegram: 1 s in private chats, 3 s in groups).
    pub min_interval: Option<f64>,
    /// Show tool activity in the status message while the agent works.
    pub show_progress: bool,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            min_interval: None,
            show_progress: true,
        }
    }
}
