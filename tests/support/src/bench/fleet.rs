//! The four platform fakes a benchmark talks through, the `channels:` config pointing the
//! daemon at them, and one way to say something to a user's DM and read the bot's replies there.

use std::fmt;

use crate::{
    FAKE_BOT_TOKEN, FAKE_DISCORD_TOKEN, FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET,
    FAKE_FEISHU_ENCRYPT_KEY, FAKE_FEISHU_VERIFICATION_TOKEN, FAKE_SLACK_APP_TOKEN,
    FAKE_SLACK_BOT_TOKEN, FakeDiscord, FakeFeishu, FakeSlack, FakeTelegram, dm_channel, p2p_chat,
    private_chat,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Platform {
    Telegram,
    Slack,
    Discord,
    Feishu,
}

impl Platform {
    pub const ALL: [Platform; 4] = [
        Platform::Telegram,
        Platform::Slack,
        Platform::Discord,
        Platform::Feishu,
    ];

    /// A comma-separated list of channel names (`all` for the four, `none` for none).
    pub fn parse_list(list: &str) -> Result<Vec<Platform>, String> {
        match list {
            "all" => return Ok(Self::ALL.to_vec()),
            "none" | "" => return Ok(Vec::new()),
            _ => {}
        }
        list.split(',')
            .map(|name| {
                Self::ALL
                    .into_iter()
                    .find(|p| p.name() == name.trim())
                    .ok_or_else(|| format!("unknown channel {name:?}: use telegram, slack, discord, feishu, all or none"))
            })
            .collect()
    }

    /// The channel's name in the config and in `/readyz`.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Slack => "slack",
            Platform::Discord => "discord",
            Platform::Feishu => "feishu",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The fakes of the platforms a benchmark uses.
#[derive(Default)]
pub(crate) struct Fleet {
    pub(crate) telegram: Option<FakeTelegram>,
    slack: Option<FakeSlack>,
    discord: Option<FakeDiscord>,
    feishu: Option<FakeFeishu>,
}

impl Fleet {
    pub(crate) async fn start(platforms: &[Platform]) -> Self {
        let mut fleet = Self::default();
        for platform in platforms {
            match platform {
                Platform::Telegram => fleet.telegram = Some(FakeTelegram::start().await),
                Platform::Slack => fleet.slack = Some(FakeSlack::start().await),
                Platform::Discord => fleet.discord = Some(FakeDiscord::start().await),
                Platform::Feishu => fleet.feishu = Some(FakeFeishu::start().await),
            }
        }
        fleet
    }

    pub(crate) fn slack(&self) -> Option<&FakeSlack> {
        self.slack.as_ref()
    }

    pub(crate) fn platforms(&self) -> Vec<Platform> {
        Platform::ALL
            .into_iter()
            .filter(|p| match p {
                Platform::Telegram => self.telegram.is_some(),
                Platform::Slack => self.slack.is_some(),
                Platform::Discord => self.discord.is_some(),
                Platform::Feishu => self.feishu.is_some(),
            })
            .collect()
    }

    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.platforms().into_iter().map(Platform::name).collect()
    }

    /// The `channels:` block for the daemon listening on `port`; tells the fake Feishu where
    /// to push. Every DM is allowed (empty allow-lists).
    pub(crate) fn channels_yaml(&self, port: u16) -> String {
        if self.platforms().is_empty() {
            return String::new();
        }
        let mut yaml = String::from("channels:\n");
        if let Some(telegram) = &self.telegram {
            yaml += &format!(
                "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {}\n    poll_timeout: 1\n",
                telegram.api_url()
            );
        }
        if let Some(slack) = &self.slack {
            yaml += &format!(
                "  slack:\n    enabled: true\n    bot_token: \"{FAKE_SLACK_BOT_TOKEN}\"\n    app_token: \"{FAKE_SLACK_APP_TOKEN}\"\n    api_url: {}\n",
                slack.api_url()
            );
        }
        if let Some(discord) = &self.discord {
            yaml += &format!(
                "  discord:\n    enabled: true\n    bot_token: \"{FAKE_DISCORD_TOKEN}\"\n    api_url: {}\n",
                discord.api_url()
            );
        }
        if let Some(feishu) = &self.feishu {
            feishu.set_webhook(format!("http://127.0.0.1:{port}/channels/feishu/webhook"));
            yaml += &format!(
                "  feishu:\n    enabled: true\n    app_id: {FAKE_FEISHU_APP_ID}\n    app_secret: \"{FAKE_FEISHU_APP_SECRET}\"\n    verification_token: \"{FAKE_FEISHU_VERIFICATION_TOKEN}\"\n    encrypt_key: \"{FAKE_FEISHU_ENCRYPT_KEY}\"\n    domain: {}\n",
                feishu.base_url()
            );
        }
        yaml
    }

    /// User `n` of `platform` writes `text` in their DM with the bot.
    pub(crate) fn say(&self, platform: Platform, n: u32, text: &str) {
        match platform {
            Platform::Telegram => {
                if let Some(fake) = &self.telegram {
                    let id = telegram_user(n);
                    fake.send_text(private_chat(id), id, text);
                }
            }
            Platform::Slack => {
                if let Some(fake) = &self.slack {
                    fake.user_says_dm(&slack_user(n), text);
                }
            }
            Platform::Discord => {
                if let Some(fake) = &self.discord {
                    fake.user_says_dm(&discord_user(n), text);
                }
            }
            Platform::Feishu => {
                if let Some(fake) = &self.feishu {
                    fake.user_says_p2p(&feishu_user(n), text);
                }
            }
        }
    }

    /// The current texts of the bot's messages in user `n`'s DM, oldest first.
    pub(crate) fn texts(&self, platform: Platform, n: u32) -> Vec<String> {
        match platform {
            Platform::Telegram => self
                .telegram
                .as_ref()
                .map(|f| f.chat_texts(telegram_user(n)))
                .unwrap_or_default(),
            Platform::Slack => self
                .slack
                .as_ref()
                .map(|f| f.channel_texts(&dm_channel(&slack_user(n))))
                .unwrap_or_default(),
            Platform::Discord => self
                .discord
                .as_ref()
                .map(|f| f.channel_texts(&FakeDiscord::dm_channel(&discord_user(n))))
                .unwrap_or_default(),
            Platform::Feishu => self
                .feishu
                .as_ref()
                .map(|f| f.chat_texts(&p2p_chat(&feishu_user(n))))
                .unwrap_or_default(),
        }
    }
}

/// Telegram user (and private chat) id of user `n`.
pub(crate) fn telegram_user(n: u32) -> i64 {
    100_000 + i64::from(n)
}

fn slack_user(n: u32) -> String {
    format!("U{n:08}")
}

fn discord_user(n: u32) -> String {
    format!("31{n:016}")
}

fn feishu_user(n: u32) -> String {
    format!("ou_user{n:08}")
}
