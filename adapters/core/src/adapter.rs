//! The adapter contract: what each platform crate implements and the daemon iterates.
//!
//! A platform plugs in with two types: its config section ([`ChannelConfig`], the typed struct
//! under `channels.<name>`), which also says who may talk to the bot, and its adapter
//! ([`ChannelAdapter`]), which connects and hands back a [`Connection`]: the capabilities, and
//! optionally a webhook handler (mounted at `POST /channels/<name>/webhook`) and a long-lived
//! transport (poller, socket, gateway) that the daemon supervises.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::capabilities::ChannelError;
use crate::channel::ChannelParts;
use crate::profile::ChannelProfile;
use crate::secret::Secret;
use crate::transport::Transport;
use crate::webhook::WebhookHandler;

/// A platform's section of the configuration and the way to build its adapter.
pub trait ChannelConfig: Send + Sync + std::fmt::Debug {
    /// The channel's name in chat keys, user ids (`{name}-{platform id}`), config and the webhook
    /// path.
    fn name(&self) -> &'static str;
    fn enabled(&self) -> bool;
    /// Who may talk to the bot and where; read for every message, so a reload applies at once.
    fn access(&self) -> AccessSettings;
    /// Group rules beyond `access()` some platforms have (Discord guilds and free channels);
    /// read with it for every message.
    fn group_rules(&self) -> GroupRules {
        GroupRules::default()
    }
    /// The agent that answers in this channel unless the chat chose one.
    fn session_agent(&self) -> Option<&str>;
    /// This channel's limits on the earlier messages fetched for a mention
    /// (`channels.<name>.context`), over `channels.context`.
    fn context_override(&self) -> crate::ContextOverride {
        crate::ContextOverride::default()
    }
    /// React to people's messages (received, answered, failed) where the adapter can.
    fn reactions(&self) -> bool {
        false
    }
    /// When answers here are also spoken (`channels.<name>.reply_with_voice`; `/voice on|off`
    /// in a conversation wins).
    fn reply_with_voice(&self) -> ReplyWithVoice {
        ReplyWithVoice::Off
    }
    /// A digest of the settings that need a new connection when they change (credentials, mode,
    /// endpoints); the daemon restarts only this channel when it changes.
    fn connection_key(&self) -> u64;
    /// The credential a second long-lived connection would clash with (a bot token Telegram
    /// answers 409 for, a gateway's token); `None` when the channel has no such transport.
    /// With several daemons on one store only the holder of a lease named by a digest of it
    /// runs the transport; the value itself is never shown.
    fn transport_identity(&self) -> Option<Secret> {
        None
    }
    /// What is wrong with the section: `(key below channels.<name>, what to do)`.
    fn problems(&self) -> Vec<(String, String)>;
    /// An adapter for these settings; nothing is contacted until [`ChannelAdapter::connect`].
    fn adapter(&self) -> Box<dyn ChannelAdapter>;
}

/// One platform's adapter, built from its config section.
#[async_trait]
pub trait ChannelAdapter: Send + Sync {
    fn profile(&self) -> ChannelProfile;
    /// Checks the credentials, learns who the bot is and prepares the platform (e.g. registers
    /// the webhook). A fatal error ([`ChannelError::is_fatal`]) stops the channel until the
    /// operator acts; any other is retried with backoff.
    async fn connect(&self) -> Result<Connection, ChannelError>;
}

/// A connected adapter.
pub struct Connection {
    pub parts: ChannelParts,
    /// The bot's name on the platform; recognises `/cmd@BotName`.
    pub bot_username: Option<String>,
    /// Verifies and parses pushed deliveries (webhook modes).
    pub webhook: Option<Arc<dyn WebhookHandler>>,
    /// Pulls or receives messages until stopped (polling, sockets, gateways).
    pub transport: Option<Arc<dyn Transport>>,
}

/// Who may talk to a channel and where. Ids are the platform's, as strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessSettings {
    /// Empty = every user (in direct chats and allowlisted group chats).
    pub allowed_users: Vec<String>,
    /// Group chats the bot answers in; a group chat not listed is denied.
    pub allowed_chats: Vec<String>,
    /// Always allowed, with Antler admin rights as the user `{channel}-{id}`.
    pub admins: Vec<String>,
    pub group_policy: GroupPolicy,
    /// Other bots whose messages are answered (platform ids: a Slack `bot_id` or bot user id,
    /// a Discord user id, a Feishu app's open_id or app id, a Telegram bot's user id); every
    /// other bot is ignored.
    pub allowed_bots: Vec<String>,
    /// Every group message needs a mention, even a follow-up in a platform thread the bot
    /// already answers in.
    pub require_mention_in_threads: bool,
    /// This channel's `bot_turn_limit`, overriding `channels.bot_turn_limit`.
    pub bot_turn_limit: Option<u32>,
}

/// Where group chats are allowed and answered beyond [`AccessSettings`]. Ids are the
/// platform's, as strings; both lists are empty unless the platform has such settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupRules {
    /// Workspaces (Discord guilds) whose every group chat is allowed, as if it were listed in
    /// `allowed_chats` (`InboundMessage::workspace_id` is matched).
    pub allowed_workspaces: Vec<String>,
    /// Group chats where every message is for the bot, mentioned or not.
    pub free_chats: Vec<String>,
}

/// Which agent a chat talks to until someone in it picks one (`channels.<name>.session`, and
/// `channels.session` for every channel).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SessionConfig {
    /// The agent that answers when neither the chat nor the user chose one.
    pub agent: Option<String>,
}

/// When a channel's answers are also spoken (`voice.speech`), unless a conversation chose with
/// `/voice on|off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReplyWithVoice {
    /// Text only.
    #[default]
    Off,
    /// A voice note is answered with voice too; typed messages with text only.
    Auto,
    /// Every answer is spoken too.
    Always,
}

/// When the bot answers in a group it is allowed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Only messages that mention the bot or reply to it.
    #[default]
    Mention,
    /// Every message in the group.
    All,
}

/// Platform ids from YAML, as integers (`42`, `-100123`) or strings (`U024BE7LH`); kept as strings.
pub fn platform_ids<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Number(i64),
        Text(String),
    }
    let ids = Vec::<Id>::deserialize(deserializer)?;
    Ok(ids
        .into_iter()
        .map(|id| match id {
            Id::Number(number) => number.to_string(),
            Id::Text(text) => text,
        })
        .collect())
}

/// The [`ChannelConfig::connection_key`] of `settings` (a tuple of the connection settings;
/// secrets hash by value, so a rotated token restarts the channel). Only compared within one
/// process, never shown.
pub fn connection_key_of(settings: impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    settings.hash(&mut hasher);
    hasher.finish()
}
