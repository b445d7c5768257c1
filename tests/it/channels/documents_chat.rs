//! Documents people send in chats reach the model as Markdown with `uploads.auto_convert_documents`,
//! as HTTP uploads do: a PDF in Telegram (the model reads the copy with `read_file`), a Word
//! file in a Slack channel and in a Discord DM; with the setting off nothing is converted and
//! the prompt promises no copy.

use std::path::{Path, PathBuf};

use antler_test_support::{
    FAKE_SLACK_BOT_USER, FakeDiscord, FakeOpenAi, FakeSlack, FakeTelegram, Reply, discord_user,
    documents, private_chat,
};
use serde_json::{Value, json};

use super::discord_driver::discord_section;
use super::slack_driver::slack_section;
use super::{Bot, WAIT, config_yaml, daemon_yaml};

const CONVERT: &str = "uploads:\n  auto_convert_documents: true\n";
/// What the system prompt says only when documents are converted.
const PROMPT_PROMISE: &str = "have a Markdown copy beside them (report.pdf → report.md)";
const REPORT_TEXT: &str = "Quarterly revenue grew 12 percent";

/// Every file named `name` under the daemon's data directory.
fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(find(&path, name));
        } else if entry.file_name() == name {
            found.push(path);
        }
    }
    found
}

/// The text of the `role: tool` messages of a model request.
fn tool_results(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Sends `report.pdf` to the bot in a private Telegram chat and waits for `answer`.
async fn send_report(fake: &FakeTelegram, chat: i64, answer: &str) {
    let pdf = documents::pdf(REPORT_TEXT);
    let file_id = fake.add_file("report.pdf", pdf.clone());
    fake.send_message(
        private_chat(chat),
        chat,
        json!({"caption": "what does it say?", "document": {"file_id": file_id,
            "file_unique_id": "UPDF", "file_name": "report.pdf", "mime_type": "application/pdf",
            "file_size": pdf.len()}}),
    );
    fake.wait_for(WAIT, "the answer", |f| {
        f.chat_texts(chat).iter().any(|t| t == answer)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_sent_in_telegram_reaches_the_model_as_markdown() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!("{}{CONVERT}", config_yaml(dir.path(), &fake, &model, ""));
    let bot = Bot::start(&yaml).await;
    model.push(Reply::tool_call(
        "read_file",
        json!({"description": "read the report", "path": "/mnt/user-data/uploads/report.md"}),
    ));
    model.push(Reply::text("Revenue grew."));
    send_report(&fake, 21, "Revenue grew.").await;

    let requests = model.requests();
    let first = requests[0].to_string();
    assert!(
        first.contains("Path: /mnt/user-data/uploads/report.pdf\\n  Markdown copy: /mnt/user-data/uploads/report.md\\n"),
        "the upload names its Markdown copy: {first}"
    );
    assert!(
        first.contains(PROMPT_PROMISE),
        "the prompt names the copies"
    );
    let read = tool_results(&requests[1]);
    assert!(
        read.contains("# report.pdf") && read.contains(REPORT_TEXT),
        "the model read the PDF's text as Markdown: {read}"
    );
    let copies = find(dir.path(), "report.md");
    assert_eq!(copies.len(), 1, "{copies:?}");
    let markdown = std::fs::read_to_string(&copies[0]).expect("the copy");
    assert!(
        markdown.starts_with("# report.pdf\n\n") && markdown.contains(REPORT_TEXT),
        "{markdown}"
    );
    assert_eq!(
        find(dir.path(), "report.pdf").len(),
        1,
        "the original is kept"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_conversion_off_a_telegram_pdf_gets_no_markdown_copy() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config_yaml(dir.path(), &fake, &model, "")).await;
    model.push(Reply::text("Got the PDF."));
    send_report(&fake, 22, "Got the PDF.").await;

    let first = model.requests()[0].to_string();
    assert!(
        first.contains("Path: /mnt/user-data/uploads/report.pdf"),
        "{first}"
    );
    assert!(!first.contains("Markdown copy"), "{first}");
    assert!(!first.contains(PROMPT_PROMISE), "no copy is promised");
    assert!(find(dir.path(), "report.md").is_empty());
    assert_eq!(find(dir.path(), "report.pdf").len(), 1);
    bot.stop().await;
}

/// The first request's upload block names `notes.md`, which holds the Word file's text.
fn assert_notes_converted(dir: &Path, model: &FakeOpenAi) {
    let first = model.requests()[0].to_string();
    assert!(
        first.contains("Markdown copy: /mnt/user-data/uploads/notes.md"),
        "{first}"
    );
    assert!(first.contains(PROMPT_PROMISE));
    let copies = find(dir, "notes.md");
    assert_eq!(copies.len(), 1, "{copies:?}");
    let markdown = std::fs::read_to_string(&copies[0]).expect("the copy");
    assert!(
        markdown.starts_with("# notes.docx\n\n# Quarterly report\n\n"),
        "{markdown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_word_file_shared_in_slack_is_converted() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let channel = "C0000848";
    let section = slack_section(&fake, &format!("    allowed_channels: [{channel}]\n"));
    let yaml = format!("{}{CONVERT}", daemon_yaml(dir.path(), &model, &section));
    let bot = Bot::start(&yaml).await;
    model.push(Reply::text("Read the notes."));
    let file = fake.add_file(
        "notes.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        documents::docx(),
    );
    let text = format!("<@{FAKE_SLACK_BOT_USER}> summarise");
    let extra = json!({"subtype": "file_share", "files": [file]});
    let ts = fake.user_message(channel, "channel", "U1", &text, None, extra);
    fake.wait_for(WAIT, "the answer", |f| {
        f.messages()
            .iter()
            .any(|m| m.thread_ts.as_deref() == Some(ts.as_str()) && m.text == "Read the notes.")
    })
    .await;
    assert_notes_converted(dir.path(), &model);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_word_file_sent_in_a_discord_dm_is_converted() {
    let (fake, model) = (FakeDiscord::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "{}{CONVERT}",
        daemon_yaml(dir.path(), &model, &discord_section(&fake, ""))
    );
    let bot = Bot::start(&yaml).await;
    model.push(Reply::text("Read the notes."));
    let user = "300000000000000048";
    let dm = fake.open_dm(user);
    let attachment = fake.add_attachment(
        "notes.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        documents::docx(),
    );
    let extra = json!({"attachments": [attachment]});
    fake.user_message(&dm, discord_user(user, false), "summarise", extra);
    fake.wait_for(WAIT, "the answer", |f| {
        f.channel_texts(&dm).iter().any(|t| t == "Read the notes.")
    })
    .await;
    assert_notes_converted(dir.path(), &model);
    bot.stop().await;
}
