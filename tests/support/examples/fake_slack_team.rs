//! Runs the real daemon binary against the fake Slack and a scripted model, the way a team would
//! try a shared conversation: `cargo run -p antler-test-support --example fake_slack_team --
//! <path to antler> <work dir>`. Ann and Bob talk in a channel without the bot, Ann mentions it
//! (the model's request shows what they said, quoted and named), Bob follows up in the thread,
//! then the web chat's user issues a `/link` code and Bob's Slack account joins it with that
//! code. Prints what the model read, what the bot posted and what `GET /api/me` says.

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FakeOpenAi, FakeSlack, Reply, dm_channel,
    free_port, start_example_daemon,
};
use serde_json::{Value, json};

const CHANNEL: &str = "C0000042";
const ANN: &str = "U0000ANN";
const BOB: &str = "U0000BOB";

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_slack_team <path to antler> <work dir>");
        std::process::exit(64);
    };
    let slack = FakeSlack::start().await;
    slack.add_user(ANN, "Ann", "Ann Lee");
    slack.add_user(BOB, "Bob", "Bob Roy");
    let model = FakeOpenAi::start().await;
    model.push(Reply::text("You agreed to ship on Friday."));
    model.push(Reply::text("Noted, Bob."));
    let dir = std::path::Path::new(&dir);
    let port = free_port();
    let channels = format!(
        "  slack:\n    enabled: true\n    bot_token: \"{FAKE_SLACK_BOT_TOKEN}\"\n    app_token: \"{FAKE_SLACK_APP_TOKEN}\"\n    api_url: {api}\n    allowed_channels: [{CHANNEL}]\n",
        api = slack.api_url(),
    );
    let mut daemon = start_example_daemon(
        &binary,
        dir,
        &model,
        &format!("127.0.0.1:{port}"),
        &channels,
    );
    slack
        .wait_for(Duration::from_secs(30), "the daemon's socket", |f| {
            f.connections().iter().any(|c| c.hello_at.is_some())
        })
        .await;
    slack.message_in_history(CHANNEL, ANN, "Shall we ship on Friday?", None, json!({}));
    slack.message_in_history(CHANNEL, BOB, "Friday works, QA is done.", None, json!({}));
    slack.message_in_history(CHANNEL, ANN, "Great, Friday it is.", None, json!({}));
    let root = slack.user_says_in_channel(CHANNEL, ANN, "what did we decide above?", true, None);
    slack
        .wait_for(Duration::from_secs(30), "the mention's answer", |f| {
            f.channel_texts(CHANNEL)
                .iter()
                .any(|t| t.contains("Friday"))
        })
        .await;
    slack.user_says_in_channel(CHANNEL, BOB, "I'll write the notes", false, Some(&root));
    slack
        .wait_for(Duration::from_secs(30), "Bob's answer", |f| {
            f.channel_texts(CHANNEL).iter().any(|t| t.contains("Noted"))
        })
        .await;
    for (n, request) in model.requests().iter().enumerate() {
        println!("=== model request {n}");
        for message in request["messages"].as_array().into_iter().flatten() {
            if message["role"] != "system" {
                println!("[{}] {}", message["role"], text_of(&message["content"]));
            }
        }
    }
    // The web chat's user (the tokenless `local`, an admin) issues the code; Bob's Slack
    // account uses it and becomes that user (an admin account never joins someone else).
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let issued = http
        .post(format!("{base}/api/me/link"))
        .send()
        .await
        .unwrap();
    let issued: Value = serde_json::from_str(&issued.text().await.unwrap()).unwrap();
    println!("=== POST /api/me/link\n{issued}");
    let code = issued["code"].as_str().expect("a code").to_string();
    slack.user_says_dm(BOB, &format!("/link {code}"));
    let dm = dm_channel(BOB);
    slack
        .wait_for(Duration::from_secs(30), "the link's answer", |f| {
            !f.channel_texts(&dm).is_empty()
        })
        .await;
    let reply = slack
        .channel_texts(&dm)
        .into_iter()
        .last()
        .unwrap_or_default();
    println!("=== Bob's /link CODE in his DM\n{reply}");
    let me = http.get(format!("{base}/api/me")).send().await.unwrap();
    println!(
        "=== GET /api/me → {}\n{}",
        me.status(),
        me.text().await.unwrap()
    );
    println!("=== posted in Slack");
    for message in slack.messages() {
        println!("{} {:?}", message.channel, message.text);
    }
    let _ = daemon.kill().await;
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}
