//! Approval buttons tried by hand on Slack, Discord and Feishu at once: `cargo run -p
//! antler-test-support --example fake_approvals -- <path to antler> <work dir>`. Writes
//! `<work dir>/config.yaml` (the three fakes, `approvals: tools: [write_file]`), starts
//! `antler run`, and on each platform asks the bot to write a file in a group conversation,
//! clicks the request as a bystander, then as the requester, and prints what everyone saw.

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_DISCORD_TOKEN, FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET, FAKE_FEISHU_ENCRYPT_KEY,
    FAKE_FEISHU_VERIFICATION_TOKEN, FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FakeDiscord,
    FakeFeishu, FakeOpenAi, FakeSlack, Reply, free_port, start_example_daemon,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn script(model: &FakeOpenAi, platform: &str) {
    let path = format!("/mnt/user-data/workspace/{platform}.txt");
    model
        .push(
            Reply::tool_call("write_file", json!({"path": path, "content": "approved\n"}))
                .with_text("I'll write the file."),
        )
        .push(Reply::text(format!("Done on {platform}.")));
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_approvals <path to antler> <work dir>");
        std::process::exit(64);
    };
    let (slack, discord, feishu) = (
        FakeSlack::start().await,
        FakeDiscord::start().await,
        FakeFeishu::start().await,
    );
    slack.set_echo_bot_messages(false);
    slack.add_user("U0ANN", "Ann", "Ann Example");
    slack.add_user("U0BOB", "Bob", "Bob Example");
    discord.add_text_channel("400000000000000042");
    let model = FakeOpenAi::start().await;
    let port = free_port();
    let dir = std::path::Path::new(&dir);
    let channels = format!(
        "  slack:\n    enabled: true\n    bot_token: \"{FAKE_SLACK_BOT_TOKEN}\"\n    app_token: \"{FAKE_SLACK_APP_TOKEN}\"\n    api_url: {slack_api}\n    allowed_channels: [C0000042]\n\
         \x20 discord:\n    enabled: true\n    bot_token: \"{FAKE_DISCORD_TOKEN}\"\n    api_url: {discord_api}\n    allowed_channels: [\"400000000000000042\"]\n\
         \x20 feishu:\n    enabled: true\n    app_id: {FAKE_FEISHU_APP_ID}\n    app_secret: \"{FAKE_FEISHU_APP_SECRET}\"\n    verification_token: \"{FAKE_FEISHU_VERIFICATION_TOKEN}\"\n    encrypt_key: \"{FAKE_FEISHU_ENCRYPT_KEY}\"\n    domain: {feishu_api}\n    allowed_chats: [oc_group0042]\n\
         approvals:\n  tools: [write_file]\n",
        slack_api = slack.api_url(),
        discord_api = discord.api_url(),
        feishu_api = feishu.base_url(),
    );
    let mut daemon = start_example_daemon(
        &binary,
        dir,
        &model,
        &format!("127.0.0.1:{port}"),
        &channels,
    );
    feishu.set_webhook(format!("http://127.0.0.1:{port}/channels/feishu/webhook"));

    // Slack: Ann asks in a channel, Bob clicks, Ann approves.
    script(&model, "slack");
    slack
        .wait_for(WAIT, "the daemon's socket", |f| {
            f.connections().iter().any(|c| c.hello_at.is_some())
        })
        .await;
    slack.user_says_in_channel("C0000042", "U0ANN", "please write the file", true, None);
    slack
        .wait_for(WAIT, "the request", |f| {
            f.messages().iter().any(|m| !m.buttons().is_empty())
        })
        .await;
    let request = slack
        .messages()
        .into_iter()
        .find(|m| !m.buttons().is_empty())
        .unwrap();
    println!(
        "== slack request ==\n{}\nbuttons: {:?}",
        request.text,
        request.buttons()
    );
    let approve = request.buttons()[0].1.clone();
    slack.click("U0BOB", &request.ts, &approve);
    slack
        .wait_for(WAIT, "Bob's refusal", |f| {
            f.messages().iter().any(|m| m.ephemeral_to.is_some())
        })
        .await;
    slack.click("U0ANN", &request.ts, &approve);
    slack
        .wait_for(WAIT, "the answer", |f| {
            f.channel_texts("C0000042")
                .iter()
                .any(|t| t == "Done on slack.")
        })
        .await;
    for message in slack.messages() {
        println!(
            "slack {} {:?}{}: {}",
            message.ts,
            message.buttons().len(),
            message
                .ephemeral_to
                .map(|to| format!(" (only {to})"))
                .unwrap_or_default(),
            message.text
        );
    }

    // Discord: Ann asks in a channel (the answer goes into a thread), Bob clicks, Ann denies.
    script(&model, "discord");
    discord.user_says_in_channel(
        "400000000000000042",
        "300000000000000001",
        "please write the file",
        true,
    );
    discord
        .wait_for(WAIT, "the request", |f| {
            f.messages().iter().any(|m| !m.buttons().is_empty())
        })
        .await;
    let request = discord
        .messages()
        .into_iter()
        .find(|m| !m.buttons().is_empty())
        .unwrap();
    println!(
        "== discord request ==\n{}\nbuttons: {:?}",
        request.content,
        request.buttons()
    );
    let deny = request.buttons()[2].1.clone();
    let refused = discord.click("300000000000000002", &request.id, &deny);
    discord
        .wait_for(WAIT, "Bob's refusal", |f| !f.followups(&refused).is_empty())
        .await;
    println!(
        "discord follow-up to Bob: {}",
        discord.followups(&refused)[0]
    );
    discord.click("300000000000000001", &request.id, &deny);
    discord
        .wait_for(WAIT, "the answer", |f| {
            f.messages().iter().any(|m| m.content == "Done on discord.")
        })
        .await;
    for message in discord.messages() {
        println!(
            "discord {} in {} ({} buttons): {}",
            message.id,
            message.channel,
            message.buttons().len(),
            message.content
        );
    }

    // Feishu: Ann asks in a group, Bob clicks, Ann approves for the conversation.
    script(&model, "feishu");
    feishu.user_says_in_group(
        "oc_group0042",
        "ou_ann",
        "please write the file",
        true,
        None,
    );
    feishu
        .wait_for(WAIT, "the request", |f| {
            f.bot_messages("oc_group0042")
                .iter()
                .any(|m| !m.buttons().is_empty())
        })
        .await;
    let card = feishu
        .bot_messages("oc_group0042")
        .into_iter()
        .find(|m| !m.buttons().is_empty())
        .unwrap();
    println!(
        "== feishu request ==\n{}\nbuttons: {:?}",
        card.text(),
        card.buttons()
    );
    let conversation = card.buttons()[1].1["antler"].as_str().unwrap().to_string();
    feishu.click("ou_bob", &card.message_id, "antler", &conversation);
    feishu
        .wait_for(WAIT, "Bob's refusal", |f| !f.ephemerals().is_empty())
        .await;
    println!("feishu ephemeral cards: {:?}", feishu.ephemerals());
    feishu.click("ou_ann", &card.message_id, "antler", &conversation);
    feishu
        .wait_for(WAIT, "the answer", |f| {
            f.chat_texts("oc_group0042")
                .iter()
                .any(|t| t == "Done on feishu.")
        })
        .await;
    for message in feishu.bot_messages("oc_group0042") {
        println!(
            "feishu {} ({} buttons): {}",
            message.message_id,
            message.buttons().len(),
            message.text()
        );
    }
    let _ = daemon.kill().await;
}
