//! Runs the real daemon binary against the fake Telegram, the fake transcription service and a
//! scripted model, the way a person would try voice notes in a Telegram chat: `cargo run -p
//! antler-test-support --example fake_telegram_voice -- <path to antler> <work dir>`. Sends a
//! voice note (a real OGG/Opus one) with `voice.echo_transcript` on, then a 40-minute one, then
//! `/usage`, and prints the chat, what the transcription service received and what the model
//! read.

// A tool run by hand: it prints what it saw, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_BOT_TOKEN, FakeOpenAi, FakeTelegram, FakeTranscription, Reply, TranscriptionReply,
    VOICE_NOTE_OGG, private_chat, start_example_daemon,
};

const USER: i64 = 4242;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_telegram_voice <path to antler> <work dir>");
        std::process::exit(64);
    };
    let telegram = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let transcription = FakeTranscription::start().await;
    transcription.push(TranscriptionReply::text("testing one two three"));
    model.push(Reply::text("Loud and clear: one, two, three."));
    // The example's settings follow the `channels:` section it is given.
    let sections = format!(
        "  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n\
         voice:\n  transcription:\n    enabled: true\n    base_url: {whisper}\n  echo_transcript: true\n",
        api = telegram.api_url(),
        whisper = transcription.base_url(),
    );
    let dir = std::path::Path::new(&dir);
    let _daemon = start_example_daemon(&binary, dir, &model, "127.0.0.1:0", &sections);
    let limit = Duration::from_secs(120);
    let said = |part: &'static str| {
        move |f: &FakeTelegram| f.chat_texts(USER).iter().any(|t| t.contains(part))
    };
    telegram.send_voice(private_chat(USER), USER, VOICE_NOTE_OGG.to_vec(), 2);
    telegram
        .wait_for(limit, "the answer", said("Loud and clear"))
        .await;
    telegram.send_voice(private_chat(USER), USER, VOICE_NOTE_OGG.to_vec(), 2400);
    telegram
        .wait_for(limit, "the refusal", said("max_seconds"))
        .await;
    telegram.send_text(private_chat(USER), USER, "/usage");
    telegram
        .wait_for(limit, "the usage", said("of audio transcribed"))
        .await;
    println!("--- the chat:");
    for text in telegram.chat_texts(USER) {
        println!("{text}\n");
    }
    println!("--- what the transcription service received:");
    for request in transcription.requests() {
        println!(
            "file {:?} ({:?}, {} bytes, OGG: {}), fields {:?}",
            request.file_name,
            request.content_type,
            request.file_len(),
            request.is_ogg(),
            request.fields
        );
    }
    println!("--- what the model read as the user's message:");
    for request in model.requests() {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        if let Some(user) = messages.iter().rev().find(|m| m["role"] == "user") {
            println!("{}", user["content"].as_str().unwrap_or_default());
        }
    }
}
