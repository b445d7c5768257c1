//! `channels.telegram`: the Telegram section of the configuration and its checks.

use antler_channel::{
    AccessSettings, ChannelAdapter, ChannelConfig, ContextOverride, GroupPolicy, ReplyWithVoice,
    Secret, SessionConfig, connection_key_of, platform_ids,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, TelegramAdapter};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    /// `getUpdates` long polling: no public URL needed.
    #[default]
    Polling,
    /// Telegram pushes updates to `/channels/telegram/webhook`.
    Webhook,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TelegramConfig {
    /// Connect the bot when the daemon starts.
    pub enabled: bool,
    /// The token BotFather gave the bot, e.g. `$TELEGRAM_BOT_TOKEN`; required when enabled.
    pub bot_token: Option<Secret>,
    /// A self-hosted Bot API server; unset = `https://api.telegram.org`.
    pub api_url: Option<String>,
    /// How updates arrive.
    pub mode: TelegramMode,
    /// Webhook mode: Telegram sends it in `X-Telegram-Bot-Api-Secret-Token`
    /// (1–256 characters of `A-Za-z0-9_-`).
    pub webhook_secret: Option<Secret>,
    /// Webhook mode: the public HTTPS URL that reaches `/channels/telegram/webhook`.
    pub webhook_url: Option<String>,
    /// Numeric Telegram user ids allowed to talk to the bot; empty = everyone in allowed chats
    /// and private chats.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_users: Vec<String>,
    /// Group chat ids the bot answers in; groups are denied unless listed here.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_chats: Vec<String>,
    /// Telegram user ids always allowed to talk to the bot (also outside `allowed_users`), with
    /// Antler admin rights (bootstrap, managing agents) as the user `telegram-<id>`.
    #[serde(deserialize_with = "platform_ids")]
    pub admins: Vec<String>,
    /// Other bots the bot answers, by their user id. Telegram itself delivers no bot's message to
    /// another bot in groups, so this matters only where a platform relays them.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_bots: Vec<String>,
    /// Every group message needs a mention, even a follow-up in a thread the bot already
    /// answers in (off: such follow-ups are answered without one).
    pub require_mention_in_threads: bool,
    /// Turns other bots may start in a row in one conversation before the bot stops answering
    /// bots there until a person speaks; unset = `channels.bot_turn_limit`.
    pub bot_turn_limit: Option<u32>,
    /// When the bot answers in an allowed group.
    pub group_policy: GroupPolicy,
    /// Defaults of this channel's chats (wins over `channels.session`).
    pub session: SessionConfig,
    /// Limits on the earlier messages read for a mention here (over `channels.context`).
    pub context: ContextOverride,
    /// React to messages: 👀 when received, 👍 when answered, 😢 when answering failed.
    pub reactions: bool,
    /// Answers here are also spoken, as audio after the text (with `voice.speech.enabled`);
    /// `/voice on|off` in a conversation wins.
    pub reply_with_voice: ReplyWithVoice,
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
            allowed_bots: Vec::new(),
            require_mention_in_threads: false,
            bot_turn_limit: None,
            group_policy: GroupPolicy::Mention,
            session: SessionConfig::default(),
            context: ContextOverride::default(),
            reactions: false,
            reply_with_voice: ReplyWithVoice::Off,
            poll_timeout: 10,
        }
    }
}

impl ChannelConfig for TelegramConfig {
    fn name(&self) -> &'static str {
        CHANNEL_NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn access(&self) -> AccessSettings {
        AccessSettings {
            allowed_users: self.allowed_users.clone(),
            allowed_chats: self.allowed_chats.clone(),
            admins: self.admins.clone(),
            allowed_bots: self.allowed_bots.clone(),
            require_mention_in_threads: self.require_mention_in_threads,
            bot_turn_limit: self.bot_turn_limit,
            group_policy: self.group_policy,
        }
    }

    fn session_agent(&self) -> Option<&str> {
        self.session.agent.as_deref()
    }

    fn context_override(&self) -> ContextOverride {
        self.context.clone()
    }

    fn reply_with_voice(&self) -> ReplyWithVoice {
        self.reply_with_voice
    }

    fn reactions(&self) -> bool {
        self.reactions
    }

    /// One long-polling `getUpdates` per bot token.
    fn transport_identity(&self) -> Option<Secret> {
        self.bot_token.clone()
    }

    fn connection_key(&self) -> u64 {
        connection_key_of((
            &self.bot_token,
            &self.api_url,
            self.mode,
            &self.webhook_secret,
            &self.webhook_url,
            self.poll_timeout,
        ))
    }

    fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if !self.enabled {
            return problems;
        }
        let mut problem = |key: &str, message: &str| problems.push((key.into(), message.into()));
        if self.bot_token.as_ref().is_none_or(Secret::is_empty) {
            problem(
                "bot_token",
                "required when the channel is enabled; set it from BotFather, e.g. `bot_token: $TELEGRAM_BOT_TOKEN`",
            );
        }
        if let Some(url) = &self.api_url
            && url::Url::parse(url).is_err()
        {
            problem("api_url", "not a URL; use e.g. http://127.0.0.1:8081");
        }
        if self.mode == TelegramMode::Webhook {
            match self.webhook_url.as_deref().map(url::Url::parse) {
                None => problem(
                    "webhook_url",
                    "required in webhook mode: the public HTTPS URL of /channels/telegram/webhook",
                ),
                Some(Err(_)) => problem("webhook_url", "not a URL"),
                Some(Ok(_)) => {}
            }
            let secret = self.webhook_secret.as_ref().map(Secret::expose);
            let valid = secret.is_some_and(|s| {
                (1..=256).contains(&s.len())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            });
            if !valid {
                problem(
                    "webhook_secret",
                    "required in webhook mode: 1-256 characters of A-Z a-z 0-9 _ - (e.g. $TELEGRAM_WEBHOOK_SECRET)",
                );
            }
        }
        if !(1..=50).contains(&self.poll_timeout) {
            problem("poll_timeout", "must be between 1 and 50 seconds");
        }
        problems
    }

    fn adapter(&self) -> Box<dyn ChannelAdapter> {
        Box::new(TelegramAdapter::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_load_as_numbers_or_strings_and_checks_name_the_key() {
        let config: TelegramConfig = serde_json::from_value(serde_json::json!({
            "enabled": true,
            "mode": "webhook",
            "allowed_users": [1, "2"],
            "allowed_chats": [-100],
            "webhook_secret": "bad secret!"
        }))
        .expect("config");
        assert_eq!(config.allowed_users, ["1", "2"]);
        assert_eq!(config.allowed_chats, ["-100"]);
        let keys: Vec<String> = config.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["bot_token", "webhook_url", "webhook_secret"]);
        let disabled = TelegramConfig::default();
        assert!(
            disabled.problems().is_empty(),
            "a disabled channel is not checked"
        );
    }

    #[test]
    fn the_connection_key_changes_with_credentials_not_with_allowlists() {
        let base = TelegramConfig {
            enabled: true,
            bot_token: Some(Secret::new("1:a")),
            ..TelegramConfig::default()
        };
        let allowlisted = TelegramConfig {
            allowed_users: vec!["7".into()],
            admins: vec!["7".into()],
            ..base.clone()
        };
        assert_eq!(base.connection_key(), allowlisted.connection_key());
        let rotated = TelegramConfig {
            bot_token: Some(Secret::new("1:b")),
            ..base.clone()
        };
        assert_ne!(base.connection_key(), rotated.connection_key());
        let webhook = TelegramConfig {
            mode: TelegramMode::Webhook,
            ..base.clone()
        };
        assert_ne!(base.connection_key(), webhook.connection_key());
    }
}
