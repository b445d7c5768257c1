//! Runs the real daemon binary against the fake Discord and a scripted model, the way a person
//! would try the Discord adapter: `cargo run -p antler-test-support --example fake_discord --
//! <path to antler> <work dir>`. Writes `<work dir>/config.yaml`, starts `antler run`, sends a
//! DM, a channel mention and a follow-up in the thread it starts, and prints what the bot did.

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_DISCORD_TOKEN, FakeDiscord, FakeOpenAi, Reply, start_example_daemon,
};

const CHANNEL: &str = "400000000000000042";
const USER: &str = "300000000000000001";

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_discord <path to antler> <work dir>");
        std::process::exit(64);
    };
    let discord = FakeDiscord::start().await;
    discord.add_text_channel(CHANNEL);
    let model = FakeOpenAi::start().await;
    model.push(Reply::text(
        "**Hello!** Here is a list:\n- one & two\n- `a < b`\n\nHey @everyone, see [the docs](https://example.com/a_b).",
    ));
    model.push(Reply::slow(
        ["Threads ", "work ", "too."],
        Duration::from_millis(700),
    ));
    model.push(Reply::text("And follow-ups need no mention."));
    let dir = std::path::Path::new(&dir);
    let channels = format!(
        "  discord:\n    enabled: true\n    bot_token: \"{FAKE_DISCORD_TOKEN}\"\n    api_url: {api}\n    allowed_channels: [{CHANNEL}]\n",
        api = discord.api_url(),
    );
    let mut daemon = start_example_daemon(&binary, dir, &model, "127.0.0.1:0", &channels);
    let limit = Duration::from_secs(30);
    discord
        .wait_for(limit, "the daemon's gateway session", |f| {
            f.sessions().iter().any(|s| s.identified)
        })
        .await;
    println!("sessions: {:?}", discord.sessions());
    discord.user_says_dm(USER, "hi there");
    let dm = FakeDiscord::dm_channel(USER);
    discord
        .wait_for(limit, "the DM answer", |f| {
            f.channel_texts(&dm).iter().any(|t| t.contains("Hello"))
        })
        .await;
    let asked = discord.user_says_in_channel(CHANNEL, USER, "and in a channel?", true);
    discord
        .wait_for(limit, "the thread answer", |f| {
            f.channel_texts(&asked)
                .iter()
                .any(|t| t == "Threads work too.")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    discord.user_says_in_channel(&asked, USER, "and then?", false);
    discord
        .wait_for(limit, "the follow-up answer", |f| {
            f.channel_texts(&asked)
                .iter()
                .any(|t| t.starts_with("And follow-ups"))
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("mention: {asked}; threads: {:?}", discord.threads());
    for message in discord.messages() {
        println!("{message:?}");
    }
    for call in discord.calls() {
        println!("{} {} {}", call.method, call.path, call.body);
    }
    println!("reactions: {:?}", discord.reactions());
    println!(
        "slash commands registered: {}",
        discord
            .registered_commands()
            .and_then(|c| c.as_array().map(Vec::len))
            .unwrap_or(0)
    );
    let _ = daemon.kill().await;
}
