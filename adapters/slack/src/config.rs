//! `channels.slack`: the Slack section of the configuration and its checks.

use std::time::Duration;

use antler_channel::{
    AccessSettings, ChannelAdapter, ChannelConfig, ContextOverride, GroupPolicy, ReplyWithVoice,
    Secret, SessionConfig, connection_key_of, platform_ids,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, SlackAdapter};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SlackMode {
    /// Socket Mode: the daemon opens a WebSocket to Slack; no public URL needed.
    #[default]
    Socket,
    /// Events API: Slack posts events (and slash commands) to `/channels/slack/webhook`.
    Events,
}

/// How direct messages map onto Antler threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DmThreading {
    /// One conversation per DM; a reply the person writes inside a Slack thread of the DM starts
    /// a conversation of its own for that Slack thread.
    #[default]
    PerDm,
    /// Every top-level DM message starts a conversation, answered in its Slack thread (as in
    /// channels).
    PerThread,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SlackConfig {
    /// Run the channel: `bot_token` is then required, with `app_token` (socket mode) or
    /// `signing_secret` (events mode).
    pub enabled: bool,
    /// Bot token (`xoxb-…`): every Web API call.
    pub bot_token: Option<Secret>,
    /// App-level token (`xapp-…`, scope `connections:write`): Socket Mode only.
    pub app_token: Option<Secret>,
    /// Signing secret: verifies Events API requests (events mode only).
    pub signing_secret: Option<Secret>,
    /// How events arrive.
    pub mode: SlackMode,
    /// A Slack-compatible Web API base URL (tests); unset = `https://slack.com/api`.
    pub api_url: Option<String>,
    /// Slack user ids (`U…`) allowed to talk to the bot; empty = everyone in allowed channels
    /// and DMs.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_users: Vec<String>,
    /// Channel ids (`C…`, `G…`) the bot answers in; channels are denied unless listed. DMs follow
    /// `allowed_users`.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_channels: Vec<String>,
    /// Slack user ids always allowed, with Antler admin rights as the user `slack-<id>`.
    #[serde(deserialize_with = "platform_ids")]
    pub admins: Vec<String>,
    /// Other bots the bot answers: a bot's `bot_id` (`B…`) or its bot user id (`U…`). Every
    /// other bot (and app) is ignored.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_bots: Vec<String>,
    /// Every group message needs a mention, even a follow-up in a thread the bot already
    /// answers in (off: such follow-ups are answered without one).
    pub require_mention_in_threads: bool,
    /// Turns other bots may start in a row in one conversation before the bot stops answering
    /// bots there until a person speaks; unset = `channels.bot_turn_limit`.
    pub bot_turn_limit: Option<u32>,
    /// When the bot answers in an allowed channel.
    pub group_policy: GroupPolicy,
    /// Defaults of this channel's chats (wins over `channels.session`).
    pub session: SessionConfig,
    /// Limits on the earlier messages read for a mention here (over `channels.context`).
    pub context: ContextOverride,
    /// React with :eyes: when a message arrives, :white_check_mark: when answered, :x: when
    /// answering failed. On by default: Slack reactions are quiet and need only `reactions:write`.
    pub reactions: bool,
    /// Answers here are also spoken, as audio after the text (with `voice.speech.enabled`);
    /// `/voice on|off` in a conversation wins.
    pub reply_with_voice: ReplyWithVoice,
    /// Socket Mode connections kept open (Slack allows up to 10); more than one only spreads
    /// load, each one is another connection Slack may deliver to.
    pub socket_connections: u32,
    /// How direct messages map onto conversations.
    pub dm_threading: DmThreading,
    /// Socket timings; not configurable from YAML (tests shorten them).
    #[serde(skip)]
    pub socket_timing: SocketTiming,
}

/// How the Socket Mode transport watches its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SocketTiming {
    /// A WebSocket ping is sent this often.
    pub ping_interval: Duration,
    /// A connection that received nothing (no pong, ping or message) for this long is dead.
    pub stale_after: Duration,
    /// Slack's `hello` must arrive this soon after connecting.
    pub hello_timeout: Duration,
}

impl Default for SocketTiming {
    fn default() -> Self {
        Self {
            ping_interval: Duration::from_secs(10),
            stale_after: Duration::from_secs(35),
            hello_timeout: Duration::from_secs(15),
        }
    }
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bot_token: None,
            app_token: None,
            signing_secret: None,
            mode: SlackMode::Socket,
            api_url: None,
            allowed_users: Vec::new(),
            allowed_channels: Vec::new(),
            admins: Vec::new(),
            allowed_bots: Vec::new(),
            require_mention_in_threads: false,
            bot_turn_limit: None,
            group_policy: GroupPolicy::Mention,
            session: SessionConfig::default(),
            context: ContextOverride::default(),
            reactions: true,
            socket_connections: 1,
            reply_with_voice: ReplyWithVoice::Off,
            dm_threading: DmThreading::PerDm,
            socket_timing: SocketTiming::default(),
        }
    }
}

impl ChannelConfig for SlackConfig {
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

    /// `dm_threading` is here because it decides the chat keys the connection produces.
    /// Socket Mode connects with the app-level token.
    fn transport_identity(&self) -> Option<Secret> {
        self.app_token.clone()
    }

    fn connection_key(&self) -> u64 {
        connection_key_of((
            &self.bot_token,
            &self.app_token,
            &self.signing_secret,
            self.mode,
            &self.api_url,
            self.socket_connections,
            self.dm_threading,
            self.socket_timing,
        ))
    }

    fn problems(&self) -> Vec<(String, String)> {
        fn token(secret: &Option<Secret>) -> &str {
            secret.as_ref().map(Secret::expose).unwrap_or("")
        }
        let mut problems = Vec::new();
        if !self.enabled {
            return problems;
        }
        let mut problem = |key: &str, message: &str| problems.push((key.into(), message.into()));
        let bot_token = token(&self.bot_token);
        if bot_token.is_empty() {
            problem(
                "bot_token",
                "required when the channel is enabled: the app's Bot User OAuth Token (xoxb-…), e.g. `bot_token: $SLACK_BOT_TOKEN`",
            );
        } else if !bot_token.starts_with("xoxb-") {
            problem(
                "bot_token",
                "must be a bot token starting with xoxb- (OAuth & Permissions → Bot User OAuth Token)",
            );
        }
        match self.mode {
            SlackMode::Socket if !token(&self.app_token).starts_with("xapp-") => problem(
                "app_token",
                "socket mode needs an app-level token starting with xapp- with the connections:write scope (Basic Information → App-Level Tokens), e.g. `app_token: $SLACK_APP_TOKEN`; or use `mode: events`",
            ),
            SlackMode::Events if token(&self.signing_secret).is_empty() => problem(
                "signing_secret",
                "events mode needs the app's Signing Secret (Basic Information → App Credentials) to verify requests, e.g. `signing_secret: $SLACK_SIGNING_SECRET`",
            ),
            _ => {}
        }
        if let Some(url) = &self.api_url
            && url::Url::parse(url).is_err()
        {
            problem("api_url", "not a URL; use e.g. https://slack.com/api");
        }
        if !(1..=10).contains(&self.socket_connections) {
            problem(
                "socket_connections",
                "must be between 1 and 10 (Slack's limit per app)",
            );
        }
        problems
    }

    fn adapter(&self) -> Box<dyn ChannelAdapter> {
        Box::new(SlackAdapter::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_the_key_for_each_mode() {
        let socket: SlackConfig = serde_json::from_value(serde_json::json!({
            "enabled": true,
            "bot_token": "xoxp-user-token",
            "allowed_channels": ["C1"],
            "allowed_users": ["U1", "U2"],
            "socket_connections": 11
        }))
        .expect("config");
        assert_eq!(socket.allowed_channels, ["C1"]);
        assert!(socket.reactions, "reactions are on by default on Slack");
        let keys: Vec<String> = socket.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["bot_token", "app_token", "socket_connections"]);

        let events: SlackConfig = serde_json::from_value(serde_json::json!({
            "enabled": true, "mode": "events", "bot_token": "xoxb-1", "api_url": "not a url"
        }))
        .expect("config");
        let keys: Vec<String> = events.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["signing_secret", "api_url"]);
        assert!(SlackConfig::default().problems().is_empty());
    }

    #[test]
    fn the_connection_key_changes_with_credentials_and_mode_not_allowlists() {
        let base = SlackConfig {
            enabled: true,
            bot_token: Some(Secret::new("xoxb-1")),
            app_token: Some(Secret::new("xapp-1")),
            ..SlackConfig::default()
        };
        let allowlisted = SlackConfig {
            allowed_users: vec!["U7".into()],
            reactions: false,
            ..base.clone()
        };
        assert_eq!(base.connection_key(), allowlisted.connection_key());
        for changed in [
            SlackConfig {
                app_token: Some(Secret::new("xapp-2")),
                ..base.clone()
            },
            SlackConfig {
                mode: SlackMode::Events,
                ..base.clone()
            },
            SlackConfig {
                dm_threading: DmThreading::PerThread,
                ..base.clone()
            },
        ] {
            assert_ne!(base.connection_key(), changed.connection_key());
        }
    }
}
