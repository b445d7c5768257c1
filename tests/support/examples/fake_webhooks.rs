//! Runs the real daemon binary with a webhook endpoint answering in the fake Slack, for trying
//! `POST /hooks/{endpoint}` by hand with curl: `cargo run -p antler-test-support --example
//! fake_webhooks -- <path to antler> <work dir>`. Prints the endpoint's URL and secret, waits
//! for two answers in the Slack channel (two deliveries, or one and a redelivery that makes
//! none), and prints what the bot posted and what the model was asked.

// A tool run by hand: it prints its figures, fails loudly on a broken set-up, and its tasks
// live as long as its runtime.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::time::Duration;

use antler_test_support::{
    FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FakeOpenAi, FakeSlack, Reply, free_port,
    start_example_daemon,
};

const SECRET: &str = "try-me-secret";

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(binary), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: fake_webhooks <path to antler> <work dir>");
        std::process::exit(64);
    };
    let slack = FakeSlack::start().await;
    let model = FakeOpenAi::start().await;
    model.push(Reply::text("DiskFull on db1: the log volume is at 98 %."));
    model.push(Reply::text("Resolved: the logs were rotated."));
    let dir = std::path::Path::new(&dir);
    let channels = format!(
        "  slack:\n    enabled: true\n    bot_token: \"{FAKE_SLACK_BOT_TOKEN}\"\n    app_token: \"{FAKE_SLACK_APP_TOKEN}\"\n    api_url: {api}\n\
         \x20 webhook:\n    endpoints:\n      alerts:\n        secret: {SECRET}\n        user: alice\n\
         \x20       prompt: 'Alert {{{{body.alerts.0.labels.alertname}}}} is {{{{body.status}}}}: {{{{body}}}}'\n\
         \x20       deliver_to: {{channel: slack, chat: C0000042}}\n\
         \x20       conversation: per_key\n        key: '{{{{body.alerts.0.fingerprint}}}}'\n",
        api = slack.api_url(),
    );
    let port = free_port();
    let mut daemon = start_example_daemon(
        &binary,
        dir,
        &model,
        &format!("127.0.0.1:{port}"),
        &channels,
    );
    slack
        .wait_for(Duration::from_secs(60), "the daemon's socket", |f| {
            f.connections().iter().any(|c| c.hello_at.is_some())
        })
        .await;
    println!("ready: POST http://127.0.0.1:{port}/hooks/alerts with secret {SECRET}");
    slack
        .wait_for(Duration::from_secs(300), "two answers", |f| {
            f.channel_texts("C0000042")
                .iter()
                .filter(|t| !t.contains("Working on it"))
                .count()
                >= 2
        })
        .await;
    for message in slack.messages() {
        println!("{message:#?}");
    }
    for (n, request) in model.requests().iter().enumerate() {
        println!("model request {n}: {request}");
    }
    let _ = daemon.kill().await;
}
