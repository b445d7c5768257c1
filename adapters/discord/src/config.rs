//! `channels.discord`: the Discord section of the configuration and its checks.

use std::time::Duration;

use antler_channel::{
    AccessSettings, ChannelAdapter, ChannelConfig, ContextOverride, GroupPolicy, GroupRules,
    ReplyWithVoice, Secret, SessionConfig, connection_key_of, platform_ids,
};
use schemars::JsonSchema;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{CHANNEL_NAME, DiscordAdapter};

// Unknown keys are reported by the config loader (it rejects them all), so no
// `deny_unknown_fields` here.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DiscordConfig {
    /// Connect the bot to the gateway when the daemon starts.
    pub enabled: bool,
    /// The bot's token (Developer Portal → Bot → Token): REST and gateway.
    pub bot_token: Option<Secret>,
    /// The application's id, for registering slash commands; unset = the one READY reports.
    #[serde(deserialize_with = "optional_id")]
    pub application_id: Option<String>,
    /// Guilds whose every channel the bot answers in (mentioned, or in `free_channels`).
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_guilds: Vec<String>,
    /// Channels the bot answers in, in guilds not listed in `allowed_guilds`.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_channels: Vec<String>,
    /// Channels where every message is for the bot, no mention needed (they must still be
    /// allowed through `allowed_guilds` or `allowed_channels`).
    #[serde(deserialize_with = "platform_ids")]
    pub free_channels: Vec<String>,
    /// User ids allowed to talk to the bot; empty = everyone in allowed places and DMs.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_users: Vec<String>,
    /// User ids always allowed, with Antler admin rights as the user `discord-<id>`.
    #[serde(deserialize_with = "platform_ids")]
    pub admins: Vec<String>,
    /// Other bots (and webhooks) the bot answers, by their user id (snowflake). Every other bot
    /// is ignored.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_bots: Vec<String>,
    /// Every group message needs a mention, even a follow-up in a thread the bot already
    /// answers in (off: such follow-ups are answered without one).
    pub require_mention_in_threads: bool,
    /// Turns other bots may start in a row in one conversation before the bot stops answering
    /// bots there until a person speaks; unset = `channels.bot_turn_limit`.
    pub bot_turn_limit: Option<u32>,
    /// A mention in a text channel starts a Discord thread on that message and the conversation
    /// continues there; off = one conversation per channel.
    pub thread_mode: bool,
    /// Defaults of this channel's chats (wins over `channels.session`).
    pub session: SessionConfig,
    /// Limits on the earlier messages read for a mention here (over `channels.context`).
    pub context: ContextOverride,
    /// React to messages when received, answered and failed: `true`/`false`, or the three
    /// emoji `{received, done, failed}` (then on).
    pub reactions: Reactions,
    /// Answers here are also spoken, as audio after the text (with `voice.speech.enabled`);
    /// `/voice on|off` in a conversation wins.
    pub reply_with_voice: ReplyWithVoice,
    /// Register `/new`, `/cancel`, … as the application's slash commands at start.
    pub application_commands: bool,
    /// Attachments people send larger than this are refused (MiB).
    pub max_download_mb: u64,
    /// Artifacts larger than this are named in the answer instead of attached (MiB; Discord's
    /// limit for bots is 10 MiB unless the server is boosted).
    pub max_upload_mb: u64,
    /// A Discord-compatible server's base URL (it serves `/api/v10/...`); unset =
    /// `https://discord.com`. The gateway is whatever its `GET /gateway/bot` returns.
    pub api_url: Option<String>,
    /// Gateway timings; not configurable from YAML (tests shorten them).
    #[serde(skip)]
    pub gateway_timing: GatewayTiming,
}

/// `reactions: true|false`, or the three emoji (then on): `{received, done, failed}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reactions {
    pub enabled: bool,
    pub received: String,
    pub done: String,
    pub failed: String,
}

impl Default for Reactions {
    fn default() -> Self {
        Self {
            enabled: true,
            received: "👀".into(),
            done: "✅".into(),
            failed: "❌".into(),
        }
    }
}

/// Written back in the form it is read in: `false` when off, else the three emoji.
impl Serialize for Reactions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !self.enabled {
            return serializer.serialize_bool(false);
        }
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("received", &self.received)?;
        map.serialize_entry("done", &self.done)?;
        map.serialize_entry("failed", &self.failed)?;
        map.end()
    }
}

impl JsonSchema for Reactions {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Reactions".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                {"type": "boolean"},
                {
                    "type": "object",
                    "properties": {
                        "received": {"type": "string"},
                        "done": {"type": "string"},
                        "failed": {"type": "string"}
                    },
                    "additionalProperties": false
                }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for Reactions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Emoji {
            received: Option<String>,
            done: Option<String>,
            failed: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Switch(bool),
            Emoji(Emoji),
        }
        let defaults = Reactions::default();
        Ok(match Form::deserialize(deserializer)? {
            Form::Switch(enabled) => Reactions {
                enabled,
                ..defaults
            },
            Form::Emoji(emoji) => Reactions {
                enabled: true,
                received: emoji.received.unwrap_or(defaults.received),
                done: emoji.done.unwrap_or(defaults.done),
                failed: emoji.failed.unwrap_or(defaults.failed),
            },
        })
    }
}

/// How the gateway transport watches its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GatewayTiming {
    /// A session not ready (READY or RESUMED) this long after connecting or losing its
    /// connection ends the transport with an error: the channel shows as degraded and is
    /// restarted with backoff instead of looking healthy while it cannot identify.
    pub ready_timeout: Duration,
}

impl Default for GatewayTiming {
    fn default() -> Self {
        Self {
            ready_timeout: Duration::from_secs(60),
        }
    }
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bot_token: None,
            application_id: None,
            allowed_guilds: Vec::new(),
            allowed_channels: Vec::new(),
            free_channels: Vec::new(),
            allowed_users: Vec::new(),
            admins: Vec::new(),
            allowed_bots: Vec::new(),
            require_mention_in_threads: false,
            bot_turn_limit: None,
            thread_mode: true,
            session: SessionConfig::default(),
            context: ContextOverride::default(),
            reactions: Reactions::default(),
            reply_with_voice: ReplyWithVoice::Off,
            application_commands: true,
            max_download_mb: 25,
            max_upload_mb: 10,
            api_url: None,
            gateway_timing: GatewayTiming::default(),
        }
    }
}

/// A snowflake as a YAML integer or string.
fn optional_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Number(u64),
        Text(String),
    }
    Ok(Option::<Id>::deserialize(deserializer)?.map(|id| match id {
        Id::Number(number) => number.to_string(),
        Id::Text(text) => text,
    }))
}

fn is_snowflake(id: &str) -> bool {
    !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())
}

impl ChannelConfig for DiscordConfig {
    fn name(&self) -> &'static str {
        CHANNEL_NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn access(&self) -> AccessSettings {
        AccessSettings {
            allowed_users: self.allowed_users.clone(),
            allowed_chats: self.allowed_channels.clone(),
            admins: self.admins.clone(),
            allowed_bots: self.allowed_bots.clone(),
            require_mention_in_threads: self.require_mention_in_threads,
            bot_turn_limit: self.bot_turn_limit,
            group_policy: GroupPolicy::Mention,
        }
    }

    fn group_rules(&self) -> GroupRules {
        GroupRules {
            allowed_workspaces: self.allowed_guilds.clone(),
            free_chats: self.free_channels.clone(),
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
        self.reactions.enabled
    }

    /// `thread_mode` decides the chat keys the connection produces, and the emoji are the
    /// adapter's; both need a new connection.
    /// One gateway session per bot token (a second one duplicates every event).
    fn transport_identity(&self) -> Option<Secret> {
        self.bot_token.clone()
    }

    fn connection_key(&self) -> u64 {
        connection_key_of((
            &self.bot_token,
            &self.application_id,
            &self.api_url,
            self.thread_mode,
            &self.reactions,
            self.application_commands,
            self.max_download_mb,
            self.max_upload_mb,
            self.gateway_timing,
        ))
    }

    fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if !self.enabled {
            return problems;
        }
        let mut problem = |key: &str, message: String| problems.push((key.into(), message));
        let token = self.bot_token.as_ref().map(Secret::expose).unwrap_or("");
        if token.trim().is_empty() {
            problem(
                "bot_token",
                "required when the channel is enabled: the bot's token (Developer Portal → your application → Bot → Reset Token), e.g. `bot_token: $DISCORD_BOT_TOKEN`".into(),
            );
        } else if token.starts_with("Bot ") || token.contains(char::is_whitespace) {
            problem(
                "bot_token",
                "give the token alone, without the `Bot ` prefix or spaces".into(),
            );
        }
        if let Some(id) = &self.application_id
            && !is_snowflake(id)
        {
            problem(
                "application_id",
                format!(
                    "{id:?} is not a Discord id (digits only: Developer Portal → General Information → Application ID)"
                ),
            );
        }
        for (key, ids) in [
            ("allowed_guilds", &self.allowed_guilds),
            ("allowed_channels", &self.allowed_channels),
            ("free_channels", &self.free_channels),
            ("allowed_users", &self.allowed_users),
            ("admins", &self.admins),
            ("allowed_bots", &self.allowed_bots),
        ] {
            if let Some(bad) = ids.iter().find(|id| !is_snowflake(id)) {
                problem(
                    key,
                    format!(
                        "{bad:?} is not a Discord id: use the numeric id (Discord → Settings → Advanced → Developer Mode, then Copy ID)"
                    ),
                );
            }
        }
        if let Some(url) = &self.api_url {
            match url::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
                _ => problem(
                    "api_url",
                    format!("{url:?} is not an http(s) URL; use e.g. https://discord.com"),
                ),
            }
        }
        if self.max_upload_mb == 0 || self.max_download_mb == 0 {
            let key = if self.max_upload_mb == 0 {
                "max_upload_mb"
            } else {
                "max_download_mb"
            };
            problem(key, "must be at least 1".into());
        }
        problems
    }

    fn adapter(&self) -> Box<dyn ChannelAdapter> {
        Box::new(DiscordAdapter::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_are_accepted_as_integers_or_strings() {
        let config: DiscordConfig = serde_json::from_value(serde_json::json!({
            "enabled": true,
            "bot_token": "abc.def",
            "application_id": 1_234_567_890_123_456_789_u64,
            "allowed_guilds": [1_100_000_000_000_000_001_u64, "1100000000000000002"],
            "allowed_channels": ["42"],
            "free_channels": [43],
            "allowed_users": [7, "8"],
            "admins": ["9"]
        }))
        .expect("config");
        assert_eq!(
            config.application_id.as_deref(),
            Some("1234567890123456789")
        );
        assert_eq!(
            config.allowed_guilds,
            ["1100000000000000001", "1100000000000000002"]
        );
        assert_eq!(config.free_channels, ["43"]);
        assert_eq!(config.allowed_users, ["7", "8"]);
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        assert!(config.thread_mode, "thread mode is the default");
        let rules = config.group_rules();
        assert_eq!(rules.free_chats, ["43"]);
    }

    #[test]
    fn problems_name_their_keys() {
        let config: DiscordConfig = serde_json::from_value(serde_json::json!({
            "enabled": true,
            "application_id": "my-app",
            "allowed_channels": ["general"],
            "api_url": "discord.com",
            "max_upload_mb": 0
        }))
        .expect("config");
        let keys: Vec<String> = config.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "bot_token",
                "application_id",
                "allowed_channels",
                "api_url",
                "max_upload_mb"
            ]
        );
        assert!(DiscordConfig::default().problems().is_empty());
    }

    #[test]
    fn reactions_are_a_switch_or_the_emoji() {
        let off: DiscordConfig =
            serde_json::from_value(serde_json::json!({"reactions": false})).expect("config");
        assert!(!off.reactions());
        let custom: DiscordConfig =
            serde_json::from_value(serde_json::json!({"reactions": {"done": "🎉"}}))
                .expect("config");
        assert!(custom.reactions());
        assert_eq!(custom.reactions.done, "🎉");
        assert_eq!(custom.reactions.received, "👀");
    }

    #[test]
    fn the_connection_key_ignores_allowlists() {
        let base = DiscordConfig {
            enabled: true,
            bot_token: Some(Secret::new("t1")),
            ..DiscordConfig::default()
        };
        let allowlisted = DiscordConfig {
            allowed_guilds: vec!["1".into()],
            free_channels: vec!["2".into()],
            ..base.clone()
        };
        assert_eq!(base.connection_key(), allowlisted.connection_key());
        let threadless = DiscordConfig {
            thread_mode: false,
            ..base.clone()
        };
        assert_ne!(base.connection_key(), threadless.connection_key());
    }
}
