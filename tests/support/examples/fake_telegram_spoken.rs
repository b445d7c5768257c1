//! Runs the real daemon binary against the fake Telegram, the fake speech server and a scripted
//! model, the way a person would try spoken answers: `cargo run -p antler-test-support
//! --example fake_telegram_spoken -- <path to antler> <work dir>`. Sends `/voice`, `/voice on`
//! and a question, then prints the chat, what the speech server was asked and the Bot API
//! calls that carried the answer and its voice message.

// A tool run by hand: it prints what it saw, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_BOT_TOKEN, FakeOpenAi, FakeSpeech, FakeTelegram, Reply, private_chat, start_example_daemon,
};

const USER: i64 = 4343;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_telegram_spoken <path to antler> <work dir>");
        std::process::exit(64);
    };
    let telegram = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let speech = FakeSpeech::start().await;
    model.push(Reply::text(
        "## Plan\n\nThe **build** passes. Run it with:\n\n```sh\ncargo build\n```\n\nDetails: [the log](https://ci.example/42).",
    ));
    let settings = format!(
        "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\nvoice:\n  speech:\n    enabled: true\n    base_url: {speech}\n",
        api = telegram.api_url(),
        speech = speech.base_url(),
    );
    let dir = std::path::Path::new(&dir);
    let _daemon = start_example_daemon(&binary, dir, &model, "127.0.0.1:0", &settings);
    let limit = Duration::from_secs(120);
    for command in ["/voice", "/voice on"] {
        telegram.send_text(private_chat(USER), USER, command);
        let count = telegram.chat_texts(USER).len();
        telegram
            .wait_for(limit, "the command's answer", |f| {
                f.chat_texts(USER).len() > count
            })
            .await;
    }
    telegram.send_text(private_chat(USER), USER, "does the build pass?");
    telegram
        .wait_for(limit, "the voice message", |f| {
            !f.calls_of("sendVoice").is_empty()
        })
        .await;
    println!("--- the chat:");
    for text in telegram.chat_texts(USER) {
        println!("{text}\n");
    }
    println!("--- what the speech server was asked:");
    for request in speech.requests() {
        println!("{}", request.body);
    }
    println!("--- Bot API calls after the question:");
    for call in telegram.calls() {
        if matches!(
            call.method.as_str(),
            "sendmessage" | "editmessagetext" | "sendvoice"
        ) {
            println!("{} {}", call.method, call.body);
        }
    }
    for upload in telegram.uploads() {
        println!(
            "--- uploaded with {}: {} ({} bytes, starts {:?})",
            upload.method,
            upload.filename,
            upload.bytes.len(),
            String::from_utf8_lossy(&upload.bytes[..8.min(upload.bytes.len())])
        );
    }
}
