//! The conformance story's driver for the fake Slack (Socket Mode), and the config helpers the
//! Slack tests share.

use std::time::{Duration, Instant};

use antler_test_support::{
    FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FAKE_SLACK_BOT_USER, FakeOpenAi, FakeSlack,
    SlackCall, SlackFailure, dm_channel,
};
use serde_json::json;

use super::conformance::{ChannelDriver, story};

/// The `slack:` section under `channels:` for `fake`; `extra` adds keys (4-space indented).
pub(crate) fn slack_section(fake: &FakeSlack, extra: &str) -> String {
    format!(
        "  slack:\n    enabled: true\n    bot_token: \"{FAKE_SLACK_BOT_TOKEN}\"\n    app_token: \"{FAKE_SLACK_APP_TOKEN}\"\n    api_url: {api}\n{extra}",
        api = fake.api_url(),
    )
}

/// Story users are Slack users `U000000n` with DM channels `D000000n`; groups are `C00000nn`.
pub(crate) fn user_id(user: u32) -> String {
    format!("U{user:07}")
}

pub(crate) fn channel_id(group: u32) -> String {
    format!("C{group:07}")
}

pub(crate) struct SlackDriver<'a> {
    pub(crate) fake: &'a FakeSlack,
}

impl SlackDriver<'_> {
    fn calls_in(&self, user: u32) -> Vec<SlackCall> {
        let dm = dm_channel(&user_id(user));
        self.fake
            .calls()
            .into_iter()
            .filter(|call| call.channel() == Some(dm.as_str()))
            .collect()
    }
}

impl ChannelDriver for SlackDriver<'_> {
    fn section_yaml(&self, users: &[u32], groups: &[u32]) -> String {
        let list = |ids: Vec<String>| ids.join(", ");
        slack_section(
            self.fake,
            &format!(
                "    allowed_users: [{}]\n    allowed_channels: [{}]\n",
                list(users.iter().map(|u| user_id(*u)).collect()),
                list(groups.iter().map(|g| channel_id(*g)).collect()),
            ),
        )
    }

    fn edit_pace(&self) -> Duration {
        antler_slack::SLACK_PROFILE.edit_interval.direct
    }

    fn antler_user(&self, user: u32) -> String {
        format!("slack-{}", user_id(user))
    }

    fn user_says(&self, user: u32, text: &str) {
        self.fake.user_says_dm(&user_id(user), text);
    }

    fn user_says_in_group(&self, group: u32, user: u32, text: &str, mention: bool) {
        self.fake
            .user_says_in_channel(&channel_id(group), &user_id(user), text, mention, None);
    }

    fn user_near_misses_in_group(&self, group: u32, user: u32, text: &str) {
        let (channel, user) = (channel_id(group), user_id(user));
        for near_miss in [
            format!("<@{FAKE_SLACK_BOT_USER}2> {text}"),
            format!("```<@{FAKE_SLACK_BOT_USER}>``` {text}"),
            format!("`<@{FAKE_SLACK_BOT_USER}>` {text}"),
        ] {
            self.fake
                .user_says_in_channel(&channel, &user, &near_miss, false, None);
        }
    }

    fn user_sends_file(&self, user: u32, filename: &str, bytes: &[u8], caption: &str) {
        let user = user_id(user);
        let file = self.fake.add_file(filename, "text/plain", bytes.to_vec());
        self.fake.user_message(
            &dm_channel(&user),
            "im",
            &user,
            caption,
            None,
            json!({"subtype": "file_share", "files": [file]}),
        );
    }

    fn redeliver_last(&self) {
        self.fake.redeliver_last();
    }

    fn bot_texts(&self, user: u32) -> Vec<String> {
        self.fake.channel_texts(&dm_channel(&user_id(user)))
    }

    fn group_texts(&self, group: u32) -> Vec<String> {
        self.fake.channel_texts(&channel_id(group))
    }

    fn link(&self, label: &str, url: &str) -> String {
        format!("<{url}|{label}>")
    }

    fn bot_files(&self, user: u32) -> Vec<String> {
        let dm = dm_channel(&user_id(user));
        self.fake
            .shared_files()
            .into_iter()
            .filter(|file| file.channel.as_deref() == Some(dm.as_str()))
            .map(|file| file.title)
            .collect()
    }

    fn edit_times(&self, user: u32) -> Vec<Instant> {
        self.calls_in(user)
            .iter()
            .filter(|call| call.method == "chat.update")
            .map(|call| call.at)
            .collect()
    }

    fn request_times(&self, user: u32) -> Vec<Instant> {
        self.calls_in(user).iter().map(|call| call.at).collect()
    }

    fn rate_limit_next_edit(&self, retry_after: Duration) {
        let seconds = retry_after.as_secs().max(1);
        self.fake
            .fail_next("chat.update", SlackFailure::RateLimited(seconds));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_conformance_story_passes_for_slack() {
    let fake = FakeSlack::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    story(&SlackDriver { fake: &fake }, &model, dir.path()).await;
    let live = fake
        .connections()
        .iter()
        .filter(|c| c.closed_at.is_none())
        .count();
    assert_eq!(live, 0, "stopping the daemon closes its socket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_turn_uses_only_its_speakers_memory_agent_and_budget_on_slack() {
    let fake = FakeSlack::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    super::speakers::story(&SlackDriver { fake: &fake }, &model, dir.path()).await;
}
