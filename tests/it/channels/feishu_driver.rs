//! The conformance story's driver for the fake Feishu (encrypted, signed webhook pushes), and
//! the config helpers the Feishu tests share.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use antler_test_support::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET, FAKE_FEISHU_BOT_NAME, FAKE_FEISHU_BOT_OPEN_ID,
    FAKE_FEISHU_TENANT, FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu, FakeOpenAi, FeishuCall,
    FeishuFailure, UserMessage, p2p_chat,
};

use serde_json::json;

use super::conformance::{ChannelDriver, story};

/// The `feishu:` section under `channels:` for `fake`; `extra` adds keys (4-space indented).
pub(crate) fn feishu_section(fake: &FakeFeishu, extra: &str) -> String {
    let encrypt_key = fake
        .encrypt_key()
        .map(|key| format!("    encrypt_key: \"{key}\"\n"))
        .unwrap_or_default();
    format!(
        "  feishu:\n    enabled: true\n    app_id: {FAKE_FEISHU_APP_ID}\n    app_secret: \"{FAKE_FEISHU_APP_SECRET}\"\n    verification_token: \"{FAKE_FEISHU_VERIFICATION_TOKEN}\"\n{encrypt_key}    domain: {base}\n{extra}",
        base = fake.base_url(),
    )
}

/// The daemon's webhook URL.
pub(crate) fn webhook_url(addr: SocketAddr) -> String {
    format!("http://{addr}/channels/feishu/webhook")
}

/// Story users are open_ids `ou_user000n` with p2p chats; groups are `oc_group00nn`.
pub(crate) fn open_id(user: u32) -> String {
    format!("ou_user{user:04}")
}

pub(crate) fn group_chat(group: u32) -> String {
    format!("oc_group{group:04}")
}

pub(crate) struct FeishuDriver<'a> {
    pub(crate) fake: &'a FakeFeishu,
}

impl FeishuDriver<'_> {
    fn calls_in(&self, user: u32) -> Vec<FeishuCall> {
        let chat = p2p_chat(&open_id(user));
        self.fake
            .calls()
            .into_iter()
            .filter(|call| call.chat.as_deref() == Some(chat.as_str()))
            .collect()
    }
}

impl ChannelDriver for FeishuDriver<'_> {
    fn section_yaml(&self, users: &[u32], groups: &[u32]) -> String {
        let list = |ids: Vec<String>| ids.join(", ");
        feishu_section(
            self.fake,
            &format!(
                "    allowed_users: [{}]\n    allowed_chats: [{}]\n",
                list(users.iter().map(|u| open_id(*u)).collect()),
                list(groups.iter().map(|g| group_chat(*g)).collect()),
            ),
        )
    }

    fn edit_pace(&self) -> Duration {
        antler_feishu::FEISHU_PROFILE.edit_interval.direct
    }

    fn antler_user(&self, user: u32) -> String {
        format!("feishu-{}", open_id(user))
    }

    fn user_says(&self, user: u32, text: &str) {
        self.fake.user_says_p2p(&open_id(user), text);
    }

    fn user_says_in_group(&self, group: u32, user: u32, text: &str, mention: bool) {
        self.fake
            .user_says_in_group(&group_chat(group), &open_id(user), text, mention, None);
    }

    fn user_near_misses_in_group(&self, group: u32, user: u32, text: &str) {
        // Someone else named like the bot, whose open_id starts like the bot's.
        let namesake = json!({"key": "@_user_1",
            "id": {"open_id": format!("{FAKE_FEISHU_BOT_OPEN_ID}2"), "union_id": "on_x", "user_id": ""},
            "name": FAKE_FEISHU_BOT_NAME, "tenant_key": FAKE_FEISHU_TENANT});
        self.fake.user_message(UserMessage {
            chat: &group_chat(group),
            chat_type: "group",
            open_id: &open_id(user),
            msg_type: "text",
            content: json!({"text": format!("@_user_1 {text}")}),
            mentions: vec![namesake],
            parent: None,
        });
    }

    fn user_sends_file(&self, user: u32, filename: &str, bytes: &[u8], caption: &str) {
        let user = open_id(user);
        self.fake.user_sends_file(
            &p2p_chat(&user),
            "p2p",
            &user,
            filename,
            bytes,
            Some(caption),
        );
    }

    fn redeliver_last(&self) {
        self.fake.redeliver_last();
    }

    fn bot_texts(&self, user: u32) -> Vec<String> {
        self.fake.chat_texts(&p2p_chat(&open_id(user)))
    }

    fn group_texts(&self, group: u32) -> Vec<String> {
        self.fake.chat_texts(&group_chat(group))
    }

    fn link(&self, label: &str, url: &str) -> String {
        format!("[{label}]({url})")
    }

    fn bot_files(&self, user: u32) -> Vec<String> {
        self.fake.chat_files(&p2p_chat(&open_id(user)))
    }

    fn edit_times(&self, user: u32) -> Vec<Instant> {
        self.calls_in(user)
            .iter()
            .filter(|call| call.method == "im.message.patch")
            .map(|call| call.at)
            .collect()
    }

    fn request_times(&self, user: u32) -> Vec<Instant> {
        self.calls_in(user).iter().map(|call| call.at).collect()
    }

    fn rate_limit_next_edit(&self, retry_after: Duration) {
        let seconds = retry_after.as_secs().max(1);
        self.fake
            .fail_next("im.message.patch", FeishuFailure::RateLimited(seconds));
    }

    fn daemon_started(&self, addr: SocketAddr) {
        self.fake.set_webhook(webhook_url(addr));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_conformance_story_passes_for_feishu() {
    let fake = FakeFeishu::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    story(&FeishuDriver { fake: &fake }, &model, dir.path()).await;
    assert!(
        fake.calls_of("im.message.patch").len() >= 2,
        "answers were streamed into cards"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_turn_uses_only_its_speakers_memory_agent_and_budget_on_feishu() {
    let fake = FakeFeishu::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    super::speakers::story(&FeishuDriver { fake: &fake }, &model, dir.path()).await;
}
