//! Discord adapter: serenity's gateway client behind Antler's channel contract.
//!
//! The gateway ([`gateway`]) is serenity's `Client` (IDENTIFY, heartbeats, RESUME after a
//! RECONNECT, zlib frames), pointed at whatever `GET /gateway/bot` of `api_url` answers; its
//! messages are normalised by [`convert`] and journalled by the daemon. Everything the adapter
//! sends goes through [`api`], a small REST client that keeps Discord's per-route rate limits
//! (`send`, `files`), and Discord threads are created on the first reply ([`threads`]).

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod api;
mod buttons;
mod commands;
mod config;
mod convert;
mod files;
mod gateway;
mod history;
mod markup;
mod send;
mod threads;

use std::sync::Arc;
use std::time::Duration;

use antler_channel::{
    BudgetLimits, ChannelAdapter, ChannelError, ChannelParts, ChannelProfile, Connection, Pace,
    ReactionSet,
};
use async_trait::async_trait;
use reqwest::Method;

pub use api::DEFAULT_API_URL;
pub use config::{DiscordConfig, GatewayTiming, Reactions};
pub use convert::{BotIdentity, Place, from_someone_else, inbound_message};
pub use markup::{escape_mentions, thread_name};

use crate::api::{Body, DiscordApi};
use crate::threads::Threads;

/// The channel name used in chat keys and configuration.
pub const CHANNEL_NAME: &str = "discord";

/// Discord's rules: 2,000 characters a message; about 5 messages (sends and edits) per 5 s per
/// channel, 50 requests a second per bot; the typing indicator lasts 10 s, so it is refreshed
/// every 8 s. Upload and download sizes come from the section (`max_upload_mb`,
/// `max_download_mb`); these are the defaults.
pub const DISCORD_PROFILE: ChannelProfile = ChannelProfile {
    max_text_len: 2000,
    edit_interval: Pace {
        direct: Duration::from_millis(1200),
        group: Duration::from_millis(1500),
    },
    typing_interval: Pace {
        direct: Duration::from_secs(8),
        group: Duration::from_secs(8),
    },
    budget: BudgetLimits {
        global_per_second: 40,
        direct_per_minute: 55,
        group_per_minute: 55,
        burst: 5,
    },
    max_upload_bytes: 10 * 1024 * 1024,
    max_photo_bytes: 10 * 1024 * 1024,
    max_download_bytes: 25 * 1024 * 1024,
    reactions: ReactionSet {
        received: "👀",
        done: "✅",
        failed: "❌",
    },
};

/// Builds the connection from `channels.discord`.
pub struct DiscordAdapter {
    config: DiscordConfig,
}

impl DiscordAdapter {
    pub fn new(config: DiscordConfig) -> Self {
        Self { config }
    }
}

#[async_trait]
impl ChannelAdapter for DiscordAdapter {
    fn profile(&self) -> ChannelProfile {
        profile(&self.config)
    }

    /// `GET /users/@me` checks the token and learns who the bot is, so a bad token stops the
    /// channel with a clear message before any gateway session is tried.
    async fn connect(&self) -> Result<Connection, ChannelError> {
        let token = self
            .config
            .bot_token
            .as_ref()
            .map(|token| token.expose().trim().to_string())
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                ChannelError::Config(
                    "channels.discord.bot_token is empty; set the bot's token, e.g. $DISCORD_BOT_TOKEN".into(),
                )
            })?;
        let api = DiscordApi::new(self.config.api_url.as_deref(), &token)?;
        let me = api
            .call(Method::GET, "users/@me", "users/@me", Body::Empty)
            .await
            .map_err(|error| error.into_channel("check the bot token (GET /users/@me)"))?;
        let identity = BotIdentity {
            user_id: me["id"].as_str().unwrap_or_default().to_string(),
            name: me["username"].as_str().unwrap_or("antler").to_string(),
        };
        if identity.user_id.is_empty() {
            return Err(ChannelError::Platform(
                "discord's GET /users/@me answered without the bot's id".into(),
            ));
        }
        let channel = Arc::new(DiscordChannel {
            api,
            token,
            identity: identity.clone(),
            config: self.config.clone(),
            threads: Threads::default(),
        });
        Ok(Connection {
            parts: channel.parts(),
            bot_username: Some(identity.name),
            webhook: None,
            transport: Some(Arc::new(gateway::GatewayTransport::new(channel))),
        })
    }
}

fn profile(config: &DiscordConfig) -> ChannelProfile {
    let mib = |n: u64| n.max(1).saturating_mul(1024 * 1024);
    ChannelProfile {
        max_upload_bytes: mib(config.max_upload_mb),
        max_photo_bytes: mib(config.max_upload_mb),
        max_download_bytes: mib(config.max_download_mb),
        ..DISCORD_PROFILE
    }
}

/// One connected bot: the REST client, who the bot is, its settings and what it knows of
/// channels and threads.
pub(crate) struct DiscordChannel {
    api: DiscordApi,
    token: String,
    identity: BotIdentity,
    config: DiscordConfig,
    threads: Threads,
}

impl DiscordChannel {
    fn parts(self: &Arc<Self>) -> ChannelParts {
        ChannelParts {
            send: self.clone(),
            edit: Some(self.clone()),
            typing: Some(self.clone()),
            react: Some(self.clone()),
            upload: Some(self.clone()),
            download: Some(self.clone()),
            // Its messages carry the sender's name.
            names: None,
            history: Some(self.clone()),
            buttons: Some(self.clone()),
        }
    }
}
