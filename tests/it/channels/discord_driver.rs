//! The conformance story's driver for the fake Discord, and the config helpers the Discord
//! tests share.

use std::time::{Duration, Instant};

use antler_test_support::{
    DiscordFailure, DiscordRoute, FAKE_DISCORD_BOT_ID, FAKE_DISCORD_TOKEN, FakeDiscord, FakeOpenAi,
    discord_user,
};
use serde_json::json;

use super::conformance::{ChannelDriver, story};

/// The `discord:` section under `channels:` for `fake`; `extra` adds keys (4-space indented).
pub(crate) fn discord_section(fake: &FakeDiscord, extra: &str) -> String {
    format!(
        "  discord:\n    enabled: true\n    bot_token: \"{FAKE_DISCORD_TOKEN}\"\n    api_url: {api}\n{extra}",
        api = fake.api_url(),
    )
}

/// Story users are Discord users `30000000000000000n`; groups are text channels
/// `40000000000000000n`.
pub(crate) fn user_id(user: u32) -> String {
    (300_000_000_000_000_000_u64 + u64::from(user)).to_string()
}

pub(crate) fn channel_id(group: u32) -> String {
    (400_000_000_000_000_000_u64 + u64::from(group)).to_string()
}

pub(crate) struct DiscordDriver<'a> {
    pub(crate) fake: &'a FakeDiscord,
}

impl DiscordDriver<'_> {
    fn dm(user: u32) -> String {
        FakeDiscord::dm_channel(&user_id(user))
    }

    fn call_times(&self, user: u32, method: Option<&str>) -> Vec<Instant> {
        let dm = Self::dm(user);
        self.fake
            .calls()
            .into_iter()
            .filter(|call| call.channel.as_deref() == Some(dm.as_str()))
            .filter(|call| method.is_none_or(|m| call.method == m))
            .map(|call| call.at)
            .collect()
    }
}

impl ChannelDriver for DiscordDriver<'_> {
    fn section_yaml(&self, users: &[u32], groups: &[u32]) -> String {
        let list = |ids: Vec<String>| ids.join(", ");
        for group in groups {
            self.fake.add_text_channel(&channel_id(*group));
        }
        discord_section(
            self.fake,
            &format!(
                "    allowed_users: [{}]\n    allowed_channels: [{}]\n",
                list(users.iter().map(|u| user_id(*u)).collect()),
                list(groups.iter().map(|g| channel_id(*g)).collect()),
            ),
        )
    }

    fn edit_pace(&self) -> Duration {
        antler_discord::DISCORD_PROFILE.edit_interval.direct
    }

    fn antler_user(&self, user: u32) -> String {
        format!("discord-{}", user_id(user))
    }

    fn user_says(&self, user: u32, text: &str) {
        self.fake.user_says_dm(&user_id(user), text);
    }

    fn user_says_in_group(&self, group: u32, user: u32, text: &str, mention: bool) {
        self.fake
            .user_says_in_channel(&channel_id(group), &user_id(user), text, mention);
    }

    fn user_near_misses_in_group(&self, group: u32, user: u32, text: &str) {
        let (channel, author) = (channel_id(group), discord_user(&user_id(user), false));
        let bot = discord_user(FAKE_DISCORD_BOT_ID, true);
        let longer = format!("{FAKE_DISCORD_BOT_ID}2");
        for (content, mentions) in [
            // Discord resolved no mention: the text alone is not one.
            (format!("<@{FAKE_DISCORD_BOT_ID}> {text}"), json!([])),
            (
                format!("<@{longer}> {text}"),
                json!([discord_user(&longer, false)]),
            ),
            (
                format!("```<@{FAKE_DISCORD_BOT_ID}>``` {text}"),
                json!([bot]),
            ),
        ] {
            self.fake.user_message(
                &channel,
                author.clone(),
                &content,
                json!({"mentions": mentions}),
            );
        }
    }

    fn user_sends_file(&self, user: u32, filename: &str, bytes: &[u8], caption: &str) {
        let attachment = self
            .fake
            .add_attachment(filename, "text/plain", bytes.to_vec());
        let user = user_id(user);
        let dm = self.fake.open_dm(&user);
        self.fake.user_message(
            &dm,
            discord_user(&user, false),
            caption,
            json!({"attachments": [attachment]}),
        );
    }

    fn redeliver_last(&self) {
        self.fake.redeliver_last();
    }

    fn bot_texts(&self, user: u32) -> Vec<String> {
        self.fake.channel_texts(&Self::dm(user))
    }

    /// The group channel's messages and those of the threads the bot started in it.
    fn group_texts(&self, group: u32) -> Vec<String> {
        let channel = channel_id(group);
        let threads: Vec<String> = self
            .fake
            .threads()
            .into_iter()
            .filter(|(parent, _, _)| *parent == channel)
            .map(|(_, thread, _)| thread)
            .collect();
        self.fake
            .messages()
            .into_iter()
            .filter(|m| m.channel == channel || threads.contains(&m.channel))
            .map(|m| m.content)
            .collect()
    }

    fn link(&self, label: &str, url: &str) -> String {
        format!("[{label}]({url})")
    }

    fn bot_files(&self, user: u32) -> Vec<String> {
        let dm = Self::dm(user);
        self.fake
            .messages()
            .into_iter()
            .filter(|m| m.channel == dm)
            .flat_map(|m| m.files.into_iter().map(|(name, _)| name))
            .collect()
    }

    fn edit_times(&self, user: u32) -> Vec<Instant> {
        self.call_times(user, Some("PATCH"))
    }

    fn request_times(&self, user: u32) -> Vec<Instant> {
        self.call_times(user, None)
    }

    fn rate_limit_next_edit(&self, retry_after: Duration) {
        self.fake.fail_next(
            DiscordRoute::Edit,
            DiscordFailure::RateLimited {
                retry_after: retry_after.as_secs_f64(),
                global: false,
            },
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_conformance_story_passes_for_discord() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    story(&DiscordDriver { fake: &fake }, &model, dir.path()).await;
    let open = fake.sessions().iter().filter(|s| !s.closed).count();
    assert_eq!(open, 0, "stopping the daemon closes its gateway connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_turn_uses_only_its_speakers_memory_agent_and_budget_on_discord() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    super::speakers::story(&DiscordDriver { fake: &fake }, &model, dir.path()).await;
}
