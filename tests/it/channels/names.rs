//! People's display names in group conversations, as each platform gives them: Feishu's
//! contact API (once per person, the open_id when Feishu will not tell), Discord's guild
//! nickname from the gateway message.

use antler_test_support::{
    FAKE_DISCORD_BOT_ID, FakeDiscord, FakeFeishu, FakeOpenAi, FeishuFailure, Reply, discord_user,
};
use serde_json::{Value, json};

use super::discord_driver::discord_section;
use super::feishu_driver::{feishu_section, webhook_url};
use super::group_support::user_texts;
use super::{Bot, WAIT, daemon_yaml};

const GROUP: &str = "oc_group0888";
const ALICE: &str = "ou_alice0001";
const BOB: &str = "ou_bob0002";
const CAROL: &str = "ou_carol003";

/// The question of the model's `n`th request (1-based), waiting for it: its last user message
/// without the quoted block of earlier messages in front of it (each top-level mention in a
/// group is a conversation of its own, which has not seen the mentions before it; the block is
/// tested in `context_*`).
async fn last_user_text(model: &FakeOpenAi, n: usize, wait: impl AsyncFnOnce(usize)) -> String {
    wait(n).await;
    let requests = model.requests();
    let text = user_texts(&requests[n - 1]).pop().unwrap_or_default();
    match text.rsplit_once("</untrusted>") {
        Some((_, question)) => question.trim_start().to_string(),
        None => text,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feishu_names_come_from_the_contact_api_once_per_person_else_the_open_id() {
    let (fake, model) = (FakeFeishu::start().await, FakeOpenAi::start().await);
    fake.add_user(ALICE, "Alice Wang");
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("    allowed_chats: [{GROUP}]\n");
    let bot = Bot::start(&daemon_yaml(
        dir.path(),
        &model,
        &feishu_section(&fake, &extra),
    ))
    .await;
    fake.set_webhook(webhook_url(bot.addr));
    bot.readyz_until("feishu running", |r| {
        r["channels"]["feishu"]["state"] == "running"
    })
    .await;
    let wait = |n: usize| {
        let (fake, model) = (&fake, &model);
        async move {
            fake.wait_for(WAIT, "the model request", |_| model.requests().len() >= n)
                .await;
        }
    };

    for text in ["hello", "again"] {
        model.push(Reply::text("Hi."));
        fake.user_says_in_group(GROUP, ALICE, text, true, None);
        let n = model.requests().len() + 1;
        let asked = last_user_text(&model, n, wait).await;
        assert_eq!(asked, format!("[Alice Wang] {text}"));
    }
    // Bob is outside the app's reach (41050): shown by his open_id, asked about once.
    for text in ["hi", "me again"] {
        model.push(Reply::text("Hi."));
        fake.user_says_in_group(GROUP, BOB, text, true, None);
        let n = model.requests().len() + 1;
        assert_eq!(
            last_user_text(&model, n, wait).await,
            format!("[{BOB}] {text}")
        );
    }
    // An app without the contact permission: the open_id too.
    fake.fail_next(
        "contact.user.get",
        FeishuFailure::Code(
            99991672,
            "Access denied. One of the following scopes is required: [contact:user.base:readonly]"
                .into(),
        ),
    );
    model.push(Reply::text("Hi."));
    fake.user_says_in_group(GROUP, CAROL, "hey", true, None);
    assert_eq!(
        last_user_text(&model, 5, wait).await,
        format!("[{CAROL}] hey")
    );

    let asked: Vec<Value> = fake
        .calls_of("contact.user.get")
        .into_iter()
        .map(|call| call.body)
        .collect();
    assert_eq!(
        asked,
        [ALICE, BOB, CAROL]
            .map(|id| json!({"open_id": id, "user_id_type": "open_id"}))
            .to_vec(),
        "one lookup per person, by open_id"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_shows_the_guild_nickname_then_the_display_name() {
    const CHANNEL: &str = "400000000000000902";
    let (fake, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    fake.add_text_channel(CHANNEL);
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("    allowed_channels: [{CHANNEL}]\n    thread_mode: false\n");
    let bot = Bot::start(&daemon_yaml(
        dir.path(),
        &model,
        &discord_section(&fake, &extra),
    ))
    .await;
    let wait = |n: usize| {
        let (fake, model) = (&fake, &model);
        async move {
            fake.wait_for(WAIT, "the model request", |_| model.requests().len() >= n)
                .await;
        }
    };
    let mut ann = discord_user("300000000000000021", false);
    ann["global_name"] = json!("Ann Lee");
    let member = json!({"nick": "Annie", "roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00",
        "deaf": false, "mute": false});
    let mention = json!({"mentions": [discord_user(FAKE_DISCORD_BOT_ID, true)]});
    let mut with_member = mention.clone();
    with_member["member"] = member;

    model.push(Reply::text("Hi Annie."));
    fake.user_message(
        CHANNEL,
        ann.clone(),
        &format!("<@{FAKE_DISCORD_BOT_ID}> hello"),
        with_member,
    );
    assert_eq!(last_user_text(&model, 1, wait).await, "[Annie] hello");
    model.push(Reply::text("Hi Ann."));
    fake.user_message(
        CHANNEL,
        ann,
        &format!("<@{FAKE_DISCORD_BOT_ID}> no nick here"),
        mention,
    );
    assert_eq!(
        last_user_text(&model, 2, wait).await,
        "[Ann Lee] no nick here"
    );
    bot.stop().await;
}
