//! Runs the real daemon binary against the fake Telegram and a scripted model, the way a person
//! would try a scheduled task in a Telegram chat: `ANTLER_CLOCK_START=2026-12-07T07:59:30Z
//! cargo run -p antler-test-support --example fake_telegram_schedules -- <path to antler> <work
//! dir>` (the daemon's clock then starts half a minute before Monday 09:00 in Berlin). Asks
//! "remind me every Monday at 9", lists `/schedules`, waits for the slot and prints the chat and
//! the Bot API calls that carried the answer.

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
        eprintln!("usage: fake_telegram_schedules <path to antler> <work dir>");
        std::process::exit(64);
    };
    let telegram = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    model
        .push(Reply::tool_call(
            "schedule_task",
            json!({
                "action": "create",
                "name": "Weekly report",
                "prompt": "Remind the user to send the weekly report.",
                "when": {"cron": "0 9 * * MON"},
                "timezone": "Europe/Berlin",
            }),
        ))
        .push(Reply::text("Done: every Monday at 09:00 Berlin time."))
        .push(Reply::text("Time to send the weekly report!"));
    let channels = format!(
        "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n",
        api = telegram.api_url(),
    );
    let dir = std::path::Path::new(&dir);
    let _daemon = start_example_daemon(&binary, dir, &model, "127.0.0.1:0", &channels);
    let limit = Duration::from_secs(120);
    telegram.send_text(
        private_chat(USER),
        USER,
        "remind me every Monday at 9 to send the report",
    );
    telegram
        .wait_for(limit, "the confirmation", |f| {
            f.chat_texts(USER).iter().any(|t| t.starts_with("Done:"))
        })
        .await;
    println!("--- what the tool told the model:");
    if let Some(request) = model.requests().get(1) {
        for message in request["messages"].as_array().into_iter().flatten() {
            if message["role"] == "tool" {
                println!("{}\n", message["content"]);
            }
        }
    }
    telegram.send_text(private_chat(USER), USER, "/schedules");
    telegram
        .wait_for(limit, "the scheduled answer", |f| {
            f.chat_texts(USER)
                .iter()
                .any(|t| t.starts_with('⏰') && t.contains("Time to send"))
        })
        .await;
    println!("--- the chat:");
    for text in telegram.chat_texts(USER) {
        println!("{text}\n");
    }
    println!("--- Bot API calls carrying the answer:");
    for call in telegram.calls() {
        let text = call.body["text"].as_str().unwrap_or_default();
        if text.contains("weekly report") || text.starts_with('⏰') {
            println!("{} {}", call.method, call.body);
        }
    }
}
