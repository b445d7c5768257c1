//! The conformance story's driver for the fake Telegram Bot API.

use std::time::{Duration, Instant};

use antler_test_support::{
    BotCall, BotFailure, FAKE_BOT_TOKEN, FAKE_BOT_USERNAME, FakeOpenAi, FakeTelegram, group_chat,
    private_chat,
};
use serde_json::json;

use super::conformance::{ChannelDriver, story};

pub(crate) struct TelegramDriver<'a> {
    pub(crate) fake: &'a FakeTelegram,
}

/// Story users are Telegram users `4200 + n` in private chats; groups are `-(1000 + n)`.
fn user_id(user: u32) -> i64 {
    4200 + i64::from(user)
}

fn group_id(group: u32) -> i64 {
    -(1000 + i64::from(group))
}

impl TelegramDriver<'_> {
    fn calls_in(&self, chat: i64) -> Vec<BotCall> {
        self.fake
            .calls()
            .into_iter()
            .filter(|call| call.body["chat_id"].as_i64() == Some(chat))
            .collect()
    }
}

impl ChannelDriver for TelegramDriver<'_> {
    fn section_yaml(&self, users: &[u32], groups: &[u32]) -> String {
        let list = |ids: Vec<i64>| {
            ids.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n    allowed_users: [{users}]\n    allowed_chats: [{groups}]\n",
            api = self.fake.api_url(),
            users = list(users.iter().map(|u| user_id(*u)).collect()),
            groups = list(groups.iter().map(|g| group_id(*g)).collect()),
        )
    }

    fn edit_pace(&self) -> Duration {
        antler_telegram::TELEGRAM_PROFILE.edit_interval.direct
    }

    fn antler_user(&self, user: u32) -> String {
        format!("telegram-{}", user_id(user))
    }

    fn user_says(&self, user: u32, text: &str) {
        let id = user_id(user);
        self.fake.send_text(private_chat(id), id, text);
    }

    fn user_says_in_group(&self, group: u32, user: u32, text: &str, mention: bool) {
        let text = if mention {
            format!("@{FAKE_BOT_USERNAME} {text}")
        } else {
            text.to_string()
        };
        self.fake
            .send_text(group_chat(group_id(group), false), user_id(user), &text);
    }

    fn user_near_misses_in_group(&self, group: u32, user: u32, text: &str) {
        let (chat, user) = (group_chat(group_id(group), false), user_id(user));
        // Telegram marks `@AntlerBot_fan` as a mention of another user.
        self.fake.send_text(
            chat.clone(),
            user,
            &format!("@{FAKE_BOT_USERNAME}_fan {text}"),
        );
        // Typed as code: Telegram's entity says `code`, whatever else is marked.
        let handle = format!("@{FAKE_BOT_USERNAME}");
        let length = handle.len();
        self.fake.send_message(
            chat,
            user,
            json!({"text": format!("{handle} {text}"), "entities": [
                {"type": "code", "offset": 0, "length": length},
                {"type": "mention", "offset": 0, "length": length}]}),
        );
    }

    fn user_sends_file(&self, user: u32, filename: &str, bytes: &[u8], caption: &str) {
        let id = user_id(user);
        let file_id = self.fake.add_file(filename, bytes.to_vec());
        let document = json!({"file_id": file_id, "file_unique_id": format!("U{file_id}"),
            "file_name": filename, "mime_type": "text/plain", "file_size": bytes.len()});
        self.fake.send_message(
            private_chat(id),
            id,
            json!({"caption": caption, "document": document}),
        );
    }

    fn redeliver_last(&self) {
        self.fake.redeliver_last();
    }

    fn bot_texts(&self, user: u32) -> Vec<String> {
        self.fake.chat_texts(user_id(user))
    }

    fn group_texts(&self, group: u32) -> Vec<String> {
        self.fake.chat_texts(group_id(group))
    }

    fn link(&self, label: &str, url: &str) -> String {
        format!("<a href=\"{url}\">{label}</a>")
    }

    fn bot_files(&self, user: u32) -> Vec<String> {
        self.calls_in(user_id(user))
            .iter()
            .filter(|call| call.method == "senddocument" || call.method == "sendphoto")
            .filter_map(|call| {
                ["document", "photo"]
                    .iter()
                    .find_map(|field| call.body[*field]["filename"].as_str())
                    .map(str::to_string)
            })
            .collect()
    }

    fn edit_times(&self, user: u32) -> Vec<Instant> {
        self.calls_in(user_id(user))
            .iter()
            .filter(|call| call.method == "editmessagetext")
            .map(|call| call.at)
            .collect()
    }

    fn request_times(&self, user: u32) -> Vec<Instant> {
        self.calls_in(user_id(user))
            .iter()
            .map(|call| call.at)
            .collect()
    }

    fn rate_limit_next_edit(&self, retry_after: Duration) {
        let seconds = retry_after.as_secs().max(1);
        self.fake
            .fail_next("editMessageText", BotFailure::RetryAfter(seconds));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_conformance_story_passes_for_telegram() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    story(&TelegramDriver { fake: &fake }, &model, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_turn_uses_only_its_speakers_memory_agent_and_budget_on_telegram() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    super::speakers::story(&TelegramDriver { fake: &fake }, &model, dir.path()).await;
}
