//! A Discord thread with two people in it: each turn runs as its sender (see `group_slack`).
//! Ann's mention starts the thread, Bob follows up in it; a channel admin may start the
//! conversation over, Bob may not.

use antler_test_support::{FAKE_DISCORD_BOT_ID, FakeDiscord, FakeOpenAi, Reply, discord_user};
use serde_json::{Value, json};

use super::discord_driver::discord_section;
use super::group_support::{memory_update, request_mentions, usage_by_user, user_texts};
use super::{Bot, WAIT, daemon_yaml};

const CHANNEL: &str = "400000000000000901";
const ANN: &str = "300000000000000011";
const BOB: &str = "300000000000000012";
const CAROL: &str = "300000000000000013";

/// A Discord user called `name` (their global display name).
fn person(id: &str, name: &str) -> Value {
    let mut user = discord_user(id, false);
    user["global_name"] = json!(name);
    user
}

/// `id` mentions the bot in `channel` (the text channel, or a thread); returns the message id.
fn mention(fake: &FakeDiscord, channel: &str, (id, name): (&str, &str), text: &str) -> String {
    fake.user_message(
        channel,
        person(id, name),
        &format!("<@{FAKE_DISCORD_BOT_ID}> {text}"),
        json!({"mentions": [discord_user(FAKE_DISCORD_BOT_ID, true)]}),
    )
}

async fn said(fake: &FakeDiscord, channel: &str, count: usize, text: &str) {
    fake.wait_for(WAIT, text, |f| {
        f.channel_texts(channel)
            .iter()
            .filter(|t| *t == text)
            .count()
            >= count
    })
    .await;
}

async fn requests(fake: &FakeDiscord, model: &FakeOpenAi, count: usize) -> Vec<Value> {
    fake.wait_for(WAIT, "the model requests", |_| {
        model.requests().len() >= count
    })
    .await;
    model.requests()
}

/// Bob's `/status` in the thread: its answer, the `n`th status asked there.
async fn status(fake: &FakeDiscord, thread: &str, n: usize) -> String {
    mention(fake, thread, (BOB, "Bob"), "/status");
    let statuses = |f: &FakeDiscord| -> Vec<String> {
        f.channel_texts(thread)
            .into_iter()
            .filter(|t| t.starts_with("Active thread: "))
            .collect()
    };
    fake.wait_for(WAIT, "the status", |f| statuses(f).len() >= n)
        .await;
    statuses(fake)[n - 1].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_speaker_in_a_discord_thread_has_their_own_memory_usage_and_name() {
    let (fake, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    fake.add_text_channel(CHANNEL);
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("    allowed_channels: [{CHANNEL}]\n    admins: [\"{CAROL}\"]\n");
    let yaml = format!(
        "{}memory:\n  enabled: true\n  debounce_seconds: 1\n",
        daemon_yaml(dir.path(), &model, &discord_section(&fake, &extra))
    );
    let bot = Bot::start(&yaml).await;
    model.script_memory_updates();

    let ann_dm = fake.open_dm(ANN);
    model.push(Reply::text("Hello Ann!"));
    model.push(memory_update(&[("Drinks green tea", "preference")]));
    fake.user_message(&ann_dm, person(ANN, "Ann"), "I drink green tea", json!({}));
    said(&fake, &ann_dm, 1, "Hello Ann!").await;
    requests(&fake, &model, 2).await;

    model.push(Reply::text("Sure, Ann."));
    model.push(memory_update(&[]));
    let thread = mention(&fake, CHANNEL, (ANN, "Ann"), "let's plan the offsite");
    said(&fake, &thread, 1, "Sure, Ann.").await;
    let sent = requests(&fake, &model, 4).await;
    assert_eq!(
        user_texts(&sent[2]).last().map(String::as_str),
        Some("[Ann] let's plan the offsite")
    );
    assert!(
        !request_mentions(&sent[2], "green tea"),
        "no memory in a group"
    );

    model.push(Reply::text("Hi Bob!"));
    model.push(memory_update(&[("Has a dog named Rex", "context")]));
    mention(&fake, &thread, (BOB, "Bob"), "I am Bob and my dog is Rex");
    said(&fake, &thread, 1, "Hi Bob!").await;
    let sent = requests(&fake, &model, 6).await;
    let texts = user_texts(&sent[4]);
    assert_eq!(
        texts[texts.len() - 2..],
        [
            "[Ann] let's plan the offsite".to_string(),
            "[Bob] I am Bob and my dog is Rex".to_string()
        ]
    );
    assert!(!request_mentions(&sent[4], "green tea"));
    assert!(request_mentions(&sent[5], "my dog is Rex"));
    assert!(
        !request_mentions(&sent[5], "offsite"),
        "Bob's memory learns from Bob only"
    );

    let before = status(&fake, &thread, 1).await;
    mention(&fake, &thread, (BOB, "Bob"), "/new");
    said(
        &fake,
        &thread,
        1,
        "Only Ann, who started this conversation, or an admin can start a new one here.",
    )
    .await;
    assert_eq!(status(&fake, &thread, 2).await, before);
    mention(&fake, &thread, (CAROL, "Carol"), "/new");
    said(&fake, &thread, 1, "New conversation started.").await;
    assert_ne!(status(&fake, &thread, 3).await, before, "an admin may");

    let bob_dm = fake.open_dm(BOB);
    model.push(Reply::text("Hi."));
    model.push(memory_update(&[]));
    fake.user_message(&bob_dm, person(BOB, "Bob"), "hello", json!({}));
    said(&fake, &bob_dm, 1, "Hi.").await;
    let sent = requests(&fake, &model, 7).await;
    assert!(request_mentions(&sent[6], "Has a dog named Rex"));
    assert!(!request_mentions(&sent[6], "green tea"));
    // A direct message: the memory block is in the system prompt, the person's words are theirs.
    let system = sent[6]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("<memory>") && system.contains("Rex"),
        "{system}"
    );
    assert_eq!(
        user_texts(&sent[6]),
        ["hello"],
        "a direct message: no memory in the person's words, no name"
    );

    let usage = usage_by_user(bot.addr).await;
    assert_eq!(usage.get(&format!("discord-{ANN}")), Some(&2), "{usage:?}");
    assert_eq!(usage.get(&format!("discord-{BOB}")), Some(&2), "{usage:?}");
    bot.stop().await;
}
