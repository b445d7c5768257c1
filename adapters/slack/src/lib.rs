//! Slack adapter: slack-morphism's Web API client behind Antler's channel contract.
//!
//! Two transports, chosen by `channels.slack.mode`: Socket Mode ([`socket`], our own loop on
//! tokio-tungstenite: an envelope is acknowledged only after the daemon journalled it, and an
//! old socket is closed before its replacement counts as live), or the Events API
//! ([`events`], Slack posts to `/channels/slack/webhook`; the signature is verified on the raw
//! body before anything is parsed). Both feed the same converter ([`convert`]).

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod api;
mod buttons;
mod config;
mod convert;
mod events;
mod files;
mod history;
mod markup;
mod mentions;
mod names;
mod send;
mod socket;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use antler_channel::{
    BudgetLimits, ChannelAdapter, ChannelError, ChannelParts, ChannelProfile, Connection, Pace,
    ReactionSet, Secret,
};
use async_trait::async_trait;

pub use api::DEFAULT_API_URL;
pub use buttons::click_message;
pub use config::{DmThreading, SlackConfig, SlackMode, SocketTiming};
pub use convert::{BotIdentity, command_message, event_message};
pub use markup::to_mrkdwn;

use crate::api::SlackApi;

/// The channel name used in chat keys and configuration.
pub const CHANNEL_NAME: &str = "slack";

/// Slack's rules: a message's text should stay under 4,000 characters (3,000 leaves room for
/// the escaping mrkdwn adds); `chat.postMessage` about one a second per channel; `chat.update`
/// and `reactions.add` are Tier 3 (about 50 a minute per workspace), so edits stream at 1.5 s in
/// DMs and 2.5 s in channels. The "is thinking…" status lasts until the bot replies, so it is
/// refreshed rarely. A turn's first requests (reaction, status message, typing, first edit)
/// fit the burst of 5. Uploads are read into memory, hence the 100 MB cap (Slack takes 1 GB).
pub const SLACK_PROFILE: ChannelProfile = ChannelProfile {
    max_text_len: 3000,
    edit_interval: Pace {
        direct: Duration::from_millis(1500),
        group: Duration::from_millis(2500),
    },
    typing_interval: Pace {
        direct: Duration::from_secs(20),
        group: Duration::from_secs(20),
    },
    budget: BudgetLimits {
        global_per_second: 3,
        direct_per_minute: 60,
        group_per_minute: 50,
        burst: 5,
    },
    max_upload_bytes: 100 * 1024 * 1024,
    max_photo_bytes: 100 * 1024 * 1024,
    max_download_bytes: 50 * 1024 * 1024,
    reactions: ReactionSet {
        received: "eyes",
        done: "white_check_mark",
        failed: "x",
    },
};

/// Builds the connection from `channels.slack`.
pub struct SlackAdapter {
    config: SlackConfig,
}

impl SlackAdapter {
    pub fn new(config: SlackConfig) -> Self {
        Self { config }
    }
}

fn required<'a>(
    secret: &'a Option<Secret>,
    key: &str,
    hint: &str,
) -> Result<&'a str, ChannelError> {
    secret
        .as_ref()
        .map(Secret::expose)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| ChannelError::Config(format!("channels.slack.{key} is empty; {hint}")))
}

#[async_trait]
impl ChannelAdapter for SlackAdapter {
    fn profile(&self) -> ChannelProfile {
        SLACK_PROFILE
    }

    /// `auth.test` checks the bot token and learns the bot's user id; Socket Mode also opens a
    /// connection URL with the app token, so a bad token of either kind stops the channel with
    /// a clear message instead of retrying quietly forever.
    async fn connect(&self) -> Result<Connection, ChannelError> {
        let config = &self.config;
        let bot_token = required(
            &config.bot_token,
            "bot_token",
            "set the Bot User OAuth Token (xoxb-…), e.g. $SLACK_BOT_TOKEN",
        )?;
        let api = SlackApi::new(config.api_url.as_deref(), bot_token)?;
        let identity = identify(&api).await?;
        let channel = Arc::new(SlackChannel::new(api, identity.clone())?);
        let parts = channel.parts();
        let bot_username = Some(identity.name.clone());
        match config.mode {
            SlackMode::Socket => {
                let app_token = required(
                    &config.app_token,
                    "app_token",
                    "socket mode needs an app-level token (xapp-…) with connections:write",
                )?;
                let first_url = socket::open_url(&channel.api, &api::token(app_token)).await?;
                let transport = socket::SocketTransport::new(
                    channel,
                    app_token,
                    config.socket_connections.max(1),
                    config.socket_timing,
                    config.dm_threading,
                    first_url,
                );
                Ok(Connection {
                    parts,
                    bot_username,
                    webhook: None,
                    transport: Some(Arc::new(transport)),
                })
            }
            SlackMode::Events => {
                let secret = required(
                    &config.signing_secret,
                    "signing_secret",
                    "events mode needs the app's Signing Secret",
                )?;
                let webhook = events::EventsWebhook::new(identity, secret, config.dm_threading);
                Ok(Connection {
                    parts,
                    bot_username,
                    webhook: Some(Arc::new(webhook)),
                    transport: None,
                })
            }
        }
    }
}

/// `auth.test` with the bot token: who the bot is.
async fn identify(api: &SlackApi) -> Result<BotIdentity, ChannelError> {
    let me = api
        .call("auth.test", api.bot().auth_test())
        .await
        .map_err(|error| match error {
            ChannelError::Unauthorized(detail) => ChannelError::Unauthorized(format!(
                "{detail} for channels.slack.bot_token (use the Bot User OAuth Token, xoxb-…, of an installed app)"
            )),
            other => other,
        })?;
    Ok(BotIdentity {
        user_id: me.user_id.0,
        bot_id: me.bot_id.map(|id| id.0),
        team_id: me.team_id.0,
        name: me.user.unwrap_or_else(|| "antler".into()),
    })
}

/// One connected bot: the API client, who the bot is, and what the workspace turned out not
/// to support.
pub(crate) struct SlackChannel {
    api: SlackApi,
    identity: BotIdentity,
    /// Set when `assistant.threads.setStatus` is refused (the app is not an AI app, or the
    /// chat is not an assistant thread): typing stays quiet from then on.
    typing_unsupported: AtomicBool,
    /// Downloads of `url_private_download` (slack-morphism only decodes JSON answers).
    http: reqwest::Client,
    /// Display names looked up with `users.info`.
    names: antler_channel::NameCache,
}

impl SlackChannel {
    fn new(api: SlackApi, identity: BotIdentity) -> Result<Self, ChannelError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| ChannelError::Config(format!("cannot build the download client: {e}")))?;
        Ok(Self {
            api,
            identity,
            typing_unsupported: AtomicBool::new(false),
            http,
            names: antler_channel::NameCache::default(),
        })
    }

    fn parts(self: &Arc<Self>) -> ChannelParts {
        ChannelParts {
            send: self.clone(),
            edit: Some(self.clone()),
            typing: Some(self.clone()),
            react: Some(self.clone()),
            upload: Some(self.clone()),
            download: Some(self.clone()),
            names: Some(self.clone()),
            history: Some(self.clone()),
            buttons: Some(self.clone()),
        }
    }
}
