//! Runs the real daemon binary against the fake Telegram and a scripted model, the way a person
//! would try approvals in a Telegram chat: `cargo run -p antler-test-support --example
//! fake_telegram_approvals -- <path to antler> <work dir>`. Writes `<work dir>/config.yaml`
//! (`write_file` always needs approval), asks for a note to be saved, prints the request with
//! its keyboard, clicks Approve and prints what the bot did.

// A tool run by hand: it prints what it saw, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_BOT_TOKEN, FakeOpenAi, FakeTelegram, Reply, private_chat, start_example_daemon,
};
use serde_json::json;

const USER: i64 = 4242;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_telegram_approvals <path to antler> <work dir>");
        std::process::exit(64);
    };
    let telegram = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    model
        .push(
            Reply::tool_call(
                "write_file",
                json!({"path": "/mnt/user-data/outputs/note.md", "content": "Buy milk."}),
            )
            .with_text("I'll save that note."),
        )
        .push(Reply::text("Saved it as note.md."));
    let channels = format!(
        "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\napprovals:\n  tools: [write_file]\n",
        api = telegram.api_url(),
    );
    let dir = std::path::Path::new(&dir);
    let _daemon = start_example_daemon(&binary, dir, &model, "127.0.0.1:0", &channels);
    let limit = Duration::from_secs(60);
    telegram.send_text(private_chat(USER), USER, "save a note: buy milk");
    telegram
        .wait_for(limit, "the approval request", |f| {
            f.last_with_keyboard(USER).is_some()
        })
        .await;
    let request = telegram.last_with_keyboard(USER).unwrap();
    println!("--- the chat after the park:");
    for text in telegram.chat_texts(USER) {
        println!("{text}\n");
    }
    println!("--- buttons: {:?}", telegram.buttons_of(USER, request));
    let approve = telegram.buttons_of(USER, request)[0].1.clone();
    let query = telegram.click(USER, USER, request, &approve);
    telegram
        .wait_for(limit, "the resumed answer", |f| {
            f.chat_texts(USER)
                .iter()
                .any(|t| t == "Saved it as note.md.")
        })
        .await;
    println!("--- the chat after the click ({query}):");
    for text in telegram.chat_texts(USER) {
        println!("{text}\n");
    }
    println!(
        "--- keyboard now: {:?}; answered clicks: {:?}",
        telegram.keyboard_of(USER, request),
        telegram.answered_clicks()
    );
    println!("--- Bot API calls:");
    for call in telegram.calls() {
        if call.method != "getupdates" {
            println!("{} {}", call.method, call.body);
        }
    }
}
