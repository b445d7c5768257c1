//! Context before a mention on Discord: what Ann and Bob said in the text channel reaches the
//! model once, quoted, with their display names; a later mention in the thread the bot opened
//! reads only what is new there (one `GET /channels/{id}/messages` per mention); without Read
//! Message History the answer comes without context and `/readyz` warns.

use antler_test_support::{FAKE_DISCORD_BOT_ID, FakeDiscord, FakeOpenAi, Reply, discord_user};
use serde_json::{Value, json};

use super::context_slack::{blocks, lines, occurrences};
use super::discord_driver::discord_section;
use super::group_support::user_texts;
use super::{Bot, WAIT, daemon_yaml};

const CHANNEL: &str = "400000000000000951";
const ANN: &str = "300000000000000051";
const BOB: &str = "300000000000000052";

fn person(id: &str, name: &str) -> Value {
    let mut user = discord_user(id, false);
    user["global_name"] = json!(name);
    user
}

fn mention(fake: &FakeDiscord, channel: &str, (id, name): (&str, &str), text: &str) -> String {
    fake.user_message(
        channel,
        person(id, name),
        &format!("<@{FAKE_DISCORD_BOT_ID}> {text}"),
        json!({"mentions": [discord_user(FAKE_DISCORD_BOT_ID, true)]}),
    )
}

async fn start() -> (FakeDiscord, FakeOpenAi, Bot, tempfile::TempDir) {
    let (fake, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    fake.add_text_channel(CHANNEL);
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = format!("    allowed_channels: [{CHANNEL}]\n");
    let yaml = format!(
        "{}title:\n  enabled: false\n",
        daemon_yaml(dir.path(), &model, &discord_section(&fake, &extra))
    );
    let bot = Bot::start(&yaml).await;
    bot.readyz_until("discord running", |r| {
        r["channels"]["discord"]["state"] == "running"
    })
    .await;
    (fake, model, bot, dir)
}

async fn answered(fake: &FakeDiscord, model: &FakeOpenAi, channel: &str, text: &str) -> Vec<Value> {
    fake.wait_for(WAIT, text, |f| {
        f.channel_texts(channel).iter().any(|t| t == text)
    })
    .await;
    model.requests()
}

fn history_calls(fake: &FakeDiscord) -> Vec<String> {
    fake.calls()
        .into_iter()
        .filter(|call| call.method == "GET" && call.path.contains("/messages?"))
        .map(|call| call.path)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_said_before_a_discord_mention_reaches_the_model_once_quoted_and_named() {
    let (fake, model, _bot, _dir) = start().await;
    for (id, name, text) in [
        (ANN, "Ann", "we should ship on friday"),
        (BOB, "Bob", "the build is red though"),
        (ANN, "Ann", "I'll fix it tonight"),
    ] {
        fake.user_message(CHANNEL, person(id, name), text, json!({}));
    }
    model.push(Reply::text("Friday, once the build is fixed."));
    let thread = mention(&fake, CHANNEL, (BOB, "Bob"), "what did we decide?");
    let requests = answered(&fake, &model, &thread, "Friday, once the build is fixed.").await;
    assert_eq!(requests.len(), 1);
    let found = blocks(&requests[0]);
    assert_eq!(found.len(), 1);
    assert_eq!(
        user_texts(&requests[0]).last(),
        Some(&format!(
            "<untrusted source=\"shared_context\" from=\"Ann, Bob\">\n{}\n</untrusted>\n\n\
             [Bob] what did we decide?",
            found[0]
        ))
    );
    assert_eq!(
        lines(&found[0]),
        [
            "Ann: we should ship on friday",
            "Bob: the build is red though",
            "Ann: I'll fix it tonight"
        ]
    );
    assert_eq!(occurrences(&requests[0], "we should ship on friday"), 1);
    let calls = history_calls(&fake);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].starts_with(&format!("channels/{CHANNEL}/messages?before=")));

    // In the thread: only what is new since the first mention, files by name, bots marked.
    let mut ci = discord_user("300000000000000099", true);
    ci["global_name"] = json!("CI");
    fake.message_in_history(
        &thread,
        person(ANN, "Ann"),
        "QA needs a day",
        json!({"attachments": [{"id": "1", "filename": "qa-plan.pdf", "size": 10,
            "url": "https://cdn.discordapp.test/qa-plan.pdf", "proxy_url": ""}]}),
    );
    fake.message_in_history(&thread, ci, "nightly build passed", json!({}));
    model.push(Reply::text("Saturday, then."));
    mention(&fake, &thread, (BOB, "Bob"), "so when?");
    let requests = answered(&fake, &model, &thread, "Saturday, then.").await;
    let found = blocks(&requests[1]);
    assert_eq!(found.len(), 2, "the first block stays in the thread");
    assert_eq!(
        lines(&found[1]),
        [
            "Ann: QA needs a day [files: qa-plan.pdf]",
            "CI (bot): nightly build passed"
        ]
    );
    assert_eq!(occurrences(&requests[1], "we should ship on friday"), 1);
    let calls = history_calls(&fake);
    assert_eq!(calls.len(), 2, "one platform call per mention: {calls:?}");
    assert!(calls[1].starts_with(&format!("channels/{thread}/messages?")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_message_history_discord_answers_without_context_and_warns() {
    let (fake, model, bot, _dir) = start().await;
    fake.user_message(
        CHANNEL,
        person(ANN, "Ann"),
        "we should ship on friday",
        json!({}),
    );
    fake.deny_history(CHANNEL);
    model.push(Reply::text("Hello."));
    let thread = mention(&fake, CHANNEL, (BOB, "Bob"), "hi");
    let requests = answered(&fake, &model, &thread, "Hello.").await;
    assert!(blocks(&requests[0]).is_empty());
    let ready = bot.readyz().await;
    assert!(
        ready["channels"]["discord"]["warnings"]
            .to_string()
            .contains("Read Message History"),
        "{ready}"
    );
}
