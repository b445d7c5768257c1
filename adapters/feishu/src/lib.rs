//! Feishu/Lark adapter: the open API over reqwest ([`api`]) behind Antler's channel contract.
//!
//! There is no well-kept Rust SDK, and the bot needs a handful of endpoints, so the client is
//! ours: a cached `tenant_access_token`, typed errors from Feishu's `code`. Events arrive by
//! webhook ([`webhook`]: signature over the raw body, decryption, challenge, token) and are
//! converted by [`convert`]; answers are interactive cards updated in place ([`send`]), files go
//! both ways through [`files`]. The long connection (`mode: websocket`) is refused by the
//! config checks: it speaks an undocumented protobuf framing only the official SDKs implement.

// Tests own their tasks through the test runtime, which ends them with the test.
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod api;
mod buttons;
mod config;
mod convert;
mod crypto;
mod files;
mod history;
mod markup;
mod names;
mod send;
mod webhook;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{
    BudgetLimits, ChannelAdapter, ChannelError, ChannelParts, ChannelProfile, Connection, Pace,
    ReactionSet, Secret,
};
use async_trait::async_trait;
use reqwest::Method;

pub use config::{FEISHU_URL, FeishuConfig, FeishuMode, LARK_URL};
pub use convert::{BotIdentity, Content, event_message, parse_content};
pub use crypto::{CryptoError, decrypt, signature, signature_matches};
pub use markup::{card, to_card_markdown};

use crate::api::FeishuApi;
use crate::send::ReactionIds;

/// The channel name used in chat keys and configuration.
pub const CHANNEL_NAME: &str = "feishu";

/// Feishu's rules: a card body may be 30 KB, so a card holds at most 4,000 characters (CJK
/// text is 3 bytes a character, and the card is JSON inside a JSON string); a message may be
/// updated 5 times a second and a chat takes 5 messages a second, so the card is patched every
/// second in direct chats and 1.5 s in groups, well inside both. Images go up to 10 MB, other
/// files up to 30 MB. There is no typing indicator for bots: the "received" reaction says it.
pub const FEISHU_PROFILE: ChannelProfile = ChannelProfile {
    max_text_len: 4000,
    edit_interval: Pace {
        direct: Duration::from_millis(1000),
        group: Duration::from_millis(1500),
    },
    typing_interval: Pace {
        direct: Duration::from_secs(20),
        group: Duration::from_secs(20),
    },
    budget: BudgetLimits {
        global_per_second: 20,
        direct_per_minute: 120,
        group_per_minute: 100,
        burst: 5,
    },
    max_upload_bytes: 30 * 1024 * 1024,
    max_photo_bytes: 10 * 1024 * 1024,
    max_download_bytes: 50 * 1024 * 1024,
    reactions: ReactionSet {
        received: "OnIt",
        done: "DONE",
        failed: "CrossMark",
    },
};

/// Builds the connection from `channels.feishu`.
pub struct FeishuAdapter {
    config: FeishuConfig,
}

impl FeishuAdapter {
    pub fn new(config: FeishuConfig) -> Self {
        Self { config }
    }
}

fn required<'a>(value: Option<&'a str>, key: &str, hint: &str) -> Result<&'a str, ChannelError> {
    value
        .filter(|value| !value.trim().is_empty())
        .ok_or_else(|| ChannelError::Config(format!("channels.feishu.{key} is empty; {hint}")))
}

#[async_trait]
impl ChannelAdapter for FeishuAdapter {
    fn profile(&self) -> ChannelProfile {
        FEISHU_PROFILE
    }

    /// Fetches a `tenant_access_token` (a wrong App ID or Secret stops the channel with a clear
    /// message) and learns the bot's open_id, which mentions are matched against.
    async fn connect(&self) -> Result<Connection, ChannelError> {
        let config = &self.config;
        if config.mode != FeishuMode::Webhook {
            return Err(ChannelError::Config(
                "channels.feishu.mode: only `webhook` is supported".into(),
            ));
        }
        let app_id = required(
            config.app_id.as_deref(),
            "app_id",
            "set the app's App ID (cli_…)",
        )?;
        let app_secret = required(
            config.app_secret.as_ref().map(Secret::expose),
            "app_secret",
            "set the app's App Secret",
        )?;
        let verification_token = required(
            config.verification_token.as_ref().map(Secret::expose),
            "verification_token",
            "set the Verification Token of Events and Callbacks → Encryption Strategy",
        )?;
        let base = config
            .base_url()
            .map_err(|why| ChannelError::Config(format!("channels.feishu.domain: {why}")))?;
        let api = FeishuApi::new(base, app_id, Secret::new(app_secret))?;
        let bot = identify(&api).await?;
        let hook = webhook::FeishuWebhook::new(
            bot.clone(),
            verification_token,
            config.encrypt_key.as_ref().map(Secret::expose),
        );
        let channel = Arc::new(FeishuChannel {
            api,
            identity: bot.clone(),
            reactions: Mutex::new(ReactionIds::default()),
            names: names::FeishuNames::default(),
        });
        Ok(Connection {
            parts: channel.parts(),
            bot_username: Some(bot.name),
            webhook: Some(Arc::new(hook)),
            transport: None,
        })
    }
}

/// `GET /open-apis/bot/v3/info`: who the bot is (fetching the token checks the credentials).
async fn identify(api: &FeishuApi) -> Result<BotIdentity, ChannelError> {
    let answer = api
        .json("bot.info", Method::GET, "open-apis/bot/v3/info", None)
        .await?;
    let bot = &answer["bot"];
    let open_id = bot["open_id"].as_str().filter(|id| !id.is_empty()).ok_or_else(|| {
        ChannelError::Config(
            "feishu says this app has no bot; enable the Bot capability (Features → Bot) and publish a version".into(),
        )
    })?;
    Ok(BotIdentity {
        open_id: open_id.to_string(),
        name: bot["app_name"].as_str().unwrap_or("antler").to_string(),
    })
}

/// One connected bot: the API client and the reactions it added.
pub(crate) struct FeishuChannel {
    api: FeishuApi,
    /// Who the bot is: its mentions are removed from fetched history too.
    identity: BotIdentity,
    reactions: Mutex<ReactionIds>,
    /// Display names from the contact API.
    names: names::FeishuNames,
}

impl FeishuChannel {
    fn parts(self: &Arc<Self>) -> ChannelParts {
        ChannelParts {
            send: self.clone(),
            edit: Some(self.clone()),
            typing: None,
            react: Some(self.clone()),
            upload: Some(self.clone()),
            download: Some(self.clone()),
            // Through the contact API; without its permission, by open_id.
            names: Some(self.clone()),
            history: Some(self.clone()),
            buttons: Some(self.clone()),
        }
    }
}
