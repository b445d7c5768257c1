//! Runs the real daemon binary against the fake Slack and a scripted model, the way a person
//! would try the Slack adapter: `cargo run -p antler-test-support --example fake_slack --
//! <path to antler> <work dir>`. Writes `<work dir>/config.yaml`, starts `antler run`, sends a
//! DM and a channel mention, and prints what the bot posted.

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FakeOpenAi, FakeSlack, Reply, dm_channel,
    start_example_daemon,
};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_slack <path to antler> <work dir>");
        std::process::exit(64);
    };
    let slack = FakeSlack::start().await;
    let model = FakeOpenAi::start().await;
    model.push(Reply::text(
        "**Hello!** Here is a list:\n- one & two\n- `a < b`\n\nSee [the docs](https://example.com/a_b).",
    ));
    model.push(Reply::slow(
        ["Threads ", "work ", "too."],
        Duration::from_millis(700),
    ));
    let dir = std::path::Path::new(&dir);
    let channels = format!(
        "  slack:\n    enabled: true\n    bot_token: \"{FAKE_SLACK_BOT_TOKEN}\"\n    app_token: \"{FAKE_SLACK_APP_TOKEN}\"\n    api_url: {api}\n    allowed_channels: [C0000042]\n",
        api = slack.api_url(),
    );
    let mut daemon = start_example_daemon(&binary, dir, &model, "127.0.0.1:0", &channels);
    slack
        .wait_for(Duration::from_secs(30), "the daemon's socket", |f| {
            f.connections().iter().any(|c| c.hello_at.is_some())
        })
        .await;
    println!("connected: {:?}", slack.connections());
    slack.user_says_dm("U0000001", "hi there");
    let dm = dm_channel("U0000001");
    slack
        .wait_for(Duration::from_secs(30), "the DM answer", |f| {
            f.channel_texts(&dm).iter().any(|t| t.contains("Hello"))
        })
        .await;
    let root = slack.user_says_in_channel("C0000042", "U0000001", "and in a channel?", true, None);
    slack
        .wait_for(Duration::from_secs(30), "the thread answer", |f| {
            f.channel_texts("C0000042")
                .iter()
                .any(|t| t == "Threads work too.")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("mention ts: {root}");
    for message in slack.messages() {
        println!("{message:#?}");
    }
    for call in slack.calls() {
        println!("{} {}", call.method, call.params);
    }
    println!("reactions: {:?}", slack.reactions());
    let _ = daemon.kill().await;
}
