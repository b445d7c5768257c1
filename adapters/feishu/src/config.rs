//! `channels.feishu`: the Feishu/Lark section of the configuration and its checks.

use antler_channel::{
    AccessSettings, ChannelAdapter, ChannelConfig, ContextOverride, GroupPolicy, ReplyWithVoice,
    Secret, SessionConfig, connection_key_of, platform_ids,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{CHANNEL_NAME, FeishuAdapter};

/// Feishu's open platform in mainland China.
pub const FEISHU_URL: &str = "https://open.feishu.cn";
/// Lark, the international edition.
pub const LARK_URL: &str = "https://open.larksuite.com";

/// How events reach the daemon.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FeishuMode {
    /// Feishu posts events to `/channels/feishu/webhook` (event subscription v2).
    #[default]
    Webhook,
    /// The long connection of the official SDKs; refused by the checks (not implemented).
    Websocket,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct FeishuConfig {
    /// Run the channel: `app_id`, `app_secret` and `verification_token` are then required, and
    /// the app's Request URL must reach `/channels/feishu/webhook`.
    pub enabled: bool,
    /// The app's App ID (`cli_…`).
    pub app_id: Option<String>,
    /// The app's App Secret: exchanged for a `tenant_access_token`.
    pub app_secret: Option<Secret>,
    /// Events and Callbacks → Encryption Strategy → Verification Token: every payload carries it.
    pub verification_token: Option<Secret>,
    /// Events and Callbacks → Encryption Strategy → Encrypt Key: when set, Feishu encrypts and
    /// signs every push, and unsigned events are refused.
    pub encrypt_key: Option<Secret>,
    /// `feishu` (open.feishu.cn), `lark` (open.larksuite.com) or a base URL (tests, proxies).
    pub domain: String,
    /// How events arrive.
    pub mode: FeishuMode,
    /// open_ids (`ou_…`) allowed to talk to the bot; empty = everyone in allowed chats and DMs.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_users: Vec<String>,
    /// Group chat ids (`oc_…`) the bot answers in; groups are denied unless listed.
    #[serde(deserialize_with = "platform_ids")]
    pub allowed_chats: Vec<String>,
    /// open_ids always allowed, with Antler admin rights as the user `feishu-<open_id>`.
    #[serde(deserialize_with = "platform_ids")]
    pub admins: Vec<String>,
    /// Other bots the bot answers: an app's `app_id` (`cli_…`) or its bot's open_id (`ou_…`).
    /// Every other bot is ignored.
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
    /// React with OnIt when a message arrives, DONE when answered, CrossMark when answering
    /// failed (needs the `im:message.reaction` scope).
    pub reactions: bool,
    /// Answers here are also spoken, as audio after the text (with `voice.speech.enabled`);
    /// `/voice on|off` in a conversation wins.
    pub reply_with_voice: ReplyWithVoice,
}

impl Default for FeishuConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            app_id: None,
            app_secret: None,
            verification_token: None,
            encrypt_key: None,
            domain: "feishu".into(),
            mode: FeishuMode::Webhook,
            allowed_users: Vec::new(),
            allowed_chats: Vec::new(),
            admins: Vec::new(),
            allowed_bots: Vec::new(),
            require_mention_in_threads: false,
            bot_turn_limit: None,
            group_policy: GroupPolicy::Mention,
            session: SessionConfig::default(),
            context: ContextOverride::default(),
            reactions: true,
            reply_with_voice: ReplyWithVoice::Off,
        }
    }
}

impl FeishuConfig {
    /// The open API's base URL for `domain`, without a trailing slash.
    pub fn base_url(&self) -> Result<url::Url, String> {
        let raw = match self.domain.trim() {
            "feishu" | "" => FEISHU_URL,
            "lark" => LARK_URL,
            other => other,
        };
        let url = url::Url::parse(raw.trim_end_matches('/'))
            .map_err(|e| format!("{raw:?} is not `feishu`, `lark` or a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!(
                "{raw:?} must be an http(s) URL, `feishu` or `lark`"
            ));
        }
        Ok(url)
    }
}

fn exposed(secret: &Option<Secret>) -> &str {
    secret.as_ref().map(Secret::expose).unwrap_or("")
}

impl ChannelConfig for FeishuConfig {
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

    fn connection_key(&self) -> u64 {
        connection_key_of((
            &self.app_id,
            &self.app_secret,
            &self.verification_token,
            &self.encrypt_key,
            &self.domain,
            self.mode,
        ))
    }

    fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if !self.enabled {
            return problems;
        }
        let mut problem = |key: &str, message: String| problems.push((key.into(), message));
        if self.app_id.as_deref().unwrap_or("").trim().is_empty() {
            problem(
                "app_id",
                "required when the channel is enabled: the app's App ID (Credentials & Basic Info, cli_…), e.g. `app_id: $FEISHU_APP_ID`".into(),
            );
        }
        if exposed(&self.app_secret).is_empty() {
            problem(
                "app_secret",
                "required when the channel is enabled: the app's App Secret, e.g. `app_secret: $FEISHU_APP_SECRET`".into(),
            );
        }
        if exposed(&self.verification_token).is_empty() {
            problem(
                "verification_token",
                "required: the Verification Token (Events and Callbacks → Encryption Strategy) every event carries, e.g. `verification_token: $FEISHU_VERIFICATION_TOKEN`".into(),
            );
        }
        if let Err(why) = self.base_url() {
            problem("domain", why);
        }
        if self.mode == FeishuMode::Websocket {
            problem(
                "mode",
                "`websocket` (the long connection) is not supported; use `mode: webhook` and set the app's Request URL to https://<this host>/channels/feishu/webhook".into(),
            );
        }
        problems
    }

    fn adapter(&self) -> Box<dyn ChannelAdapter> {
        Box::new(FeishuAdapter::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: serde_json::Value) -> FeishuConfig {
        serde_json::from_value(value).expect("config")
    }

    #[test]
    fn checks_name_each_key() {
        let empty =
            parse(serde_json::json!({"enabled": true, "domain": "ftp://x", "mode": "websocket"}));
        let keys: Vec<String> = empty.problems().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "app_id",
                "app_secret",
                "verification_token",
                "domain",
                "mode"
            ]
        );
        let good = parse(serde_json::json!({
            "enabled": true, "app_id": "cli_a1", "app_secret": "s", "verification_token": "v",
            "allowed_users": ["ou_1"], "allowed_chats": ["oc_1"], "domain": "lark"
        }));
        assert!(good.problems().is_empty(), "{:?}", good.problems());
        assert_eq!(
            good.base_url().expect("url").as_str(),
            "https://open.larksuite.com/"
        );
        assert!(good.reactions, "reactions are on by default");
        assert!(FeishuConfig::default().problems().is_empty());
    }

    #[test]
    fn domains_are_names_or_urls() {
        let with = |domain: &str| FeishuConfig {
            domain: domain.into(),
            ..FeishuConfig::default()
        };
        assert_eq!(
            with("feishu").base_url().expect("url").as_str(),
            "https://open.feishu.cn/"
        );
        assert_eq!(
            with("http://127.0.0.1:9/")
                .base_url()
                .expect("url")
                .as_str(),
            "http://127.0.0.1:9/"
        );
        assert!(with("open.feishu.cn").base_url().is_err());
    }

    #[test]
    fn the_connection_key_changes_with_credentials_not_allowlists() {
        let base = FeishuConfig {
            enabled: true,
            app_id: Some("cli_1".into()),
            app_secret: Some(Secret::new("s1")),
            ..FeishuConfig::default()
        };
        let allowlisted = FeishuConfig {
            allowed_users: vec!["ou_7".into()],
            reactions: false,
            ..base.clone()
        };
        assert_eq!(base.connection_key(), allowlisted.connection_key());
        for changed in [
            FeishuConfig {
                app_secret: Some(Secret::new("s2")),
                ..base.clone()
            },
            FeishuConfig {
                encrypt_key: Some(Secret::new("k")),
                ..base.clone()
            },
            FeishuConfig {
                domain: "lark".into(),
                ..base.clone()
            },
        ] {
            assert_ne!(base.connection_key(), changed.connection_key());
        }
    }
}
