//! Chat attachments obey the limits HTTP uploads do (`uploads.*`), shown through Slack: files
//! past `max_files` in one message, a file over `max_file_size` and one that would take the
//! thread over `max_total_size` are neither fetched nor stored, and the reply says which and why.

use std::path::{Path, PathBuf};

use antler_test_support::{FAKE_SLACK_BOT_USER, FakeOpenAi, FakeSlack, Reply};
use serde_json::{Value, json};

use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const CHANNEL: &str = "C0000888";

/// A daemon with Slack on `fake`; `uploads` is the `uploads:` section's keys (2-space indented).
async fn start(fake: &FakeSlack, model: &FakeOpenAi, dir: &Path, uploads: &str) -> Bot {
    let section = slack_section(fake, &format!("    allowed_channels: [{CHANNEL}]\n"));
    let yaml = format!("{}uploads:\n{uploads}", daemon_yaml(dir, model, &section));
    Bot::start(&yaml).await
}

/// A mention in the channel sharing `files`; returns its `ts`.
fn share(fake: &FakeSlack, files: Vec<Value>) -> String {
    let text = format!("<@{FAKE_SLACK_BOT_USER}> read these");
    fake.user_message(
        CHANNEL,
        "channel",
        "U1",
        &text,
        None,
        json!({"subtype": "file_share", "files": files}),
    )
}

/// The answer the bot left in the thread of `ts`.
async fn answer(fake: &FakeSlack, ts: &str, starts: &str) -> String {
    fake.wait_for(WAIT, "the answer", |f| {
        f.messages()
            .iter()
            .any(|m| m.thread_ts.as_deref() == Some(ts) && m.text.starts_with(starts))
    })
    .await;
    fake.messages()
        .into_iter()
        .find(|m| m.thread_ts.as_deref() == Some(ts) && m.text.starts_with(starts))
        .map(|m| m.text)
        .unwrap_or_default()
}

/// The uploads directory of the one thread a channel's group chat made: the chat owns it
/// (its owner's id starts with `chat-{channel}-`).
fn uploads_dir(data: &Path, channel: &str) -> PathBuf {
    let prefix = format!("chat-{channel}-");
    let owner = std::fs::read_dir(data.join("data/users"))
        .expect("users")
        .filter_map(Result::ok)
        .find(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .expect("the chat's owner");
    let threads = owner.path().join("threads");
    let thread = std::fs::read_dir(&threads)
        .expect("threads")
        .next()
        .expect("a thread")
        .expect("entry");
    thread.path().join("user-data/uploads")
}

fn stored(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_files_in_one_message_store_ten_and_the_reply_names_the_other_two() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "  max_files: 10\n").await;
    let files: Vec<Value> = (1..=12)
        .map(|n| {
            let name = format!("f{n:02}.txt");
            fake.add_file(&name, "text/plain", format!("file {n}").into_bytes())
        })
        .collect();
    model.push(Reply::text("Read them."));
    let ts = share(&fake, files);
    let text = answer(&fake, &ts, "Read them.").await;

    assert!(
        text.contains("(Not received: f11.txt, f12.txt: skipped")
            && text.contains("at most 10 files per upload or chat message (uploads.max_files)"),
        "{text}"
    );
    let expected: Vec<String> = (1..=10).map(|n| format!("f{n:02}.txt")).collect();
    assert_eq!(stored(&uploads_dir(dir.path(), "slack")), expected);
    assert_eq!(
        fake.downloaded(),
        expected,
        "the two past the limit are not fetched"
    );
    let asked = model.requests()[0].to_string();
    assert!(asked.contains("/mnt/user-data/uploads/f10.txt"), "{asked}");
    assert!(!asked.contains("/mnt/user-data/uploads/f11.txt"), "{asked}");
    assert!(
        asked.contains("[a file could not be received: f11.txt, f12.txt: skipped"),
        "the agent is told too: {asked}"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_the_size_limit_or_the_threads_total_is_refused_with_its_key() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = "  max_file_size: 1000\n  max_total_size: 1500\n";
    let bot = start(&fake, &model, dir.path(), limits).await;
    let files = vec![
        fake.add_file("small.txt", "text/plain", vec![b'a'; 900]),
        fake.add_file("big.txt", "text/plain", vec![b'b'; 1001]),
        fake.add_file("more.txt", "text/plain", vec![b'c'; 700]),
    ];
    model.push(Reply::text("Looked."));
    let ts = share(&fake, files);
    let text = answer(&fake, &ts, "Looked.").await;

    assert!(
        text.contains(
            "big.txt is larger than the 1000 bytes per-file limit (uploads.max_file_size)"
        ),
        "{text}"
    );
    assert!(
        text.contains("more.txt would take the thread's uploads over 1500 bytes in total (uploads.max_total_size)"),
        "{text}"
    );
    assert_eq!(stored(&uploads_dir(dir.path(), "slack")), ["small.txt"]);
    assert_eq!(
        fake.downloaded(),
        ["small.txt"],
        "sizes Slack states are checked before fetching"
    );
    bot.stop().await;
}
