//! The `channels:` section: which IM channels run, who may talk to them, how replies stream.

use serde::{Deserialize, Serialize};

use crate::config::Secret;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelsConfig {
    /// Defaults for every channel (a channel's own `session` wins).
    pub session: ChannelSessionConfig,
    pub stream: StreamConfig,
    /// Messages waiting per conversation while its thread is busy; more get a "busy" notice.
    pub queue_limit: usize,
    /// Inbound messages per user per minute before one polite notice (0 = unlimited).
    pub user_messages_per_minute: u32,
    pub telegram: TelegramConfig,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            session: ChannelSessionConfig::default(),
            stream: StreamConfig::default(),
            queue_limit: 8,
            user_messages_per_minute: 30,
            telegram: TelegramConfig::default(),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelSessionConfig {
    /// The agent that answers when neither the chat nor the user chose one.
    pub agent: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    #[default]
    Polling,
    Webhook,
}

/// When the bot answers in a group it is allowed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Only messages that mention the bot or reply to it.
    #[default]
    Mention,
    All,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct TelegramConfig {
    pub enabled: bool,
    pub bot_token: Option<Secret>,
    /// A self-hosted Bot API server; unset = `https://api.telegram.org`.
    pub api_url: Option<String>,
    pub mode: TelegramMode,
    /// Webhook mode: Telegram sends it in `X-Telegram-Bot-Api-Secret-Token`
    /// (1–256 characters of `A-Za-z0-9_-`).
    pub webhook_secret: Option<Secret>,
    /// Webhook mode: the public HTTPS URL that reaches `/channels/telegram/webhook`.
    pub webhook_url: Option<String>,
    /// Numeric Telegram user ids allowed to talk to the bot; empty = everyone in allowed chats
    /// and private chats.
    pub allowed_users: Vec<i64>,
    /// Group chat ids the bot answers in; groups are denied unless listed here.
    pub allowed_chats: Vec<i64>,
    /// Telegram user ids always allowed to talk to the bot (also outside `allowed_users`), with
    /// Antler admin rights (bootstrap, managing agents) as the user `telegram-<id>`.
    pub admins: Vec<i64>,
    pub group_policy: GroupPolicy,
    pub session: ChannelSessionConfig,
    /// Seconds a `getUpdates` long poll waits before answering empty.
    pub poll_timeout: u32,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bot_token: None,
            api_url: None,
            mode: TelegramMode::Polling,
            webhook_secret: None,
            webhook_url: None,
            allowed_users: Vec::new(),
            allowed_chats: Vec::new(),
            admins: Vec::new(),
            group_policy: GroupPolicy::Mention,
            session: ChannelSessionConfig::default(),
            poll_timeout: 10,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{ConfigOrigin, MapEnv, load_from_str};

    use super::*;

    #[test]
    fn telegram_keys_load_and_typos_are_reported() {
        let env = MapEnv::new().with("TG_TOKEN", "123:abc");
        let yaml = "models:\n  - name: m\n    model: x\n    base_url: http://127.0.0.1:1/v1\nchannels:\n  telegram:\n    enabled: true\n    bot_token: $TG_TOKEN\n    mode: webhook\n    webhook_secret: s3cret\n    allowed_users: [1, 2]\n    allowed_chats: [-100]\n    admins: [1]\n    group_policy: all\n  session:\n    agent: helper\n  stream:\n    min_interval: 0.5\n";
        let config = load_from_str(yaml, ConfigOrigin::Embedded, &env, Path::new("/"))
            .expect("valid config")
            .config;
        let telegram = &config.channels.telegram;
        assert!(telegram.enabled);
        assert_eq!(
            telegram.bot_token.as_ref().map(|t| t.expose()),
            Some("123:abc")
        );
        assert_eq!(telegram.mode, TelegramMode::Webhook);
        assert_eq!(telegram.allowed_chats, vec![-100]);
        assert_eq!(telegram.group_policy, GroupPolicy::All);
        assert_eq!(config.channels.session.agent.as_deref(), Some("helper"));
        assert_eq!(config.channels.stream.min_interval, Some(0.5));
        assert!(
            !format!("{telegram:?}").contains("123:abc"),
            "the token is redacted"
        );

        let typo = "models:\n  - name: m\n    model: x\n    base_url: http://127.0.0.1:1/v1\nchannels:\n  telegram:\n    bot_tokn: x\n";
        let error = load_from_str(typo, ConfigOrigin::Embedded, &env, Path::new("/"))
            .expect_err("a typo is an error");
        assert!(error.to_string().contains("bot_tokn"), "{error}");
    }
}
