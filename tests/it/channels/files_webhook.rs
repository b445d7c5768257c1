//! Telegram files both ways, and webhook mode.

use antler_test_support::{FakeTelegram, Reply, documents, private_chat};
use serde_json::json;

use super::{Bot, WAIT, config_yaml};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_pdf_reaches_the_agent_as_an_upload() {
    let fake = FakeTelegram::start().await;
    let model = antler_test_support::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config_yaml(dir.path(), &fake, &model, "")).await;
    let pdf = b"%PDF-1.4 fake report".to_vec();
    let file_id = fake.add_file("report.pdf", pdf.clone());
    model.push(Reply::text("summary ready"));
    fake.send_message(
        private_chat(11),
        11,
        json!({"caption": "summarise this", "document": {"file_id": file_id, "file_unique_id": "U1",
            "file_name": "report.pdf", "mime_type": "application/pdf", "file_size": pdf.len()}}),
    );
    fake.wait_for(WAIT, "answer", |f| {
        f.chat_texts(11).iter().any(|t| t == "summary ready")
    })
    .await;
    let request = model.requests()[0].to_string();
    assert!(
        request.contains("/mnt/user-data/uploads/report.pdf"),
        "{request}"
    );
    assert!(request.contains("summarise this"));
    assert_eq!(fake.calls_of("getFile").len(), 1);
    let threads = dir.path().join("data/users/telegram-11/threads");
    let thread = std::fs::read_dir(&threads)
        .expect("threads")
        .next()
        .expect("a thread")
        .expect("entry");
    let stored =
        std::fs::read(thread.path().join("user-data/uploads/report.pdf")).expect("stored upload");
    assert_eq!(stored, pdf);
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_documents_are_converted_and_a_hostile_one_explained_to_the_agent() {
    let fake = FakeTelegram::start().await;
    let model = antler_test_support::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "{}uploads:\n  auto_convert_documents: true\nconversion:\n  memory_mb: 256\n",
        config_yaml(dir.path(), &fake, &model, "")
    );
    let bot = Bot::start(&yaml).await;
    let send = |name: &str, bytes: Vec<u8>, caption: &str| {
        let file_id = fake.add_file(name, bytes.clone());
        fake.send_message(
            private_chat(13),
            13,
            json!({"caption": caption, "document": {"file_id": file_id, "file_unique_id": name,
                "file_name": name, "file_size": bytes.len()}}),
        );
    };
    model.push(Reply::text("read the notes"));
    send("notes.docx", documents::docx(), "summarise");
    fake.wait_for(WAIT, "first answer", |f| {
        f.chat_texts(13).iter().any(|t| t == "read the notes")
    })
    .await;
    model.push(Reply::text("that sheet is broken"));
    send("bomb.xlsx", documents::xlsx_bomb(1000), "and this");
    fake.wait_for(WAIT, "second answer", |f| {
        f.chat_texts(13).iter().any(|t| t == "that sheet is broken")
    })
    .await;
    let requests = model.requests();
    let first = requests[0].to_string();
    assert!(
        first.contains("Markdown copy: /mnt/user-data/uploads/notes.md"),
        "{first}"
    );
    let second = requests[1].to_string();
    assert!(
        second.contains(
            "No Markdown copy: the conversion stopped: it needed more than 256 MiB of memory"
        ),
        "{second}"
    );
    let threads = dir.path().join("data/users/telegram-13/threads");
    let thread = std::fs::read_dir(&threads)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let uploads = thread.path().join("user-data/uploads");
    assert!(uploads.join("bomb.xlsx").exists(), "the upload is kept");
    assert!(uploads.join("notes.md").exists());
    assert!(!uploads.join("bomb.md").exists());
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presented_files_arrive_after_the_text_as_document_and_photo() {
    let fake = FakeTelegram::start().await;
    let model = antler_test_support::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&config_yaml(dir.path(), &fake, &model, "")).await;
    model.push(Reply::tool_calls(vec![
        (
            "write_file".into(),
            json!({"path": "/mnt/user-data/outputs/report.pdf", "content": "pdf body"}),
        ),
        (
            "write_file".into(),
            json!({"path": "/mnt/user-data/outputs/chart.png", "content": "png body"}),
        ),
    ]));
    model.push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.pdf", "/mnt/user-data/outputs/chart.png"]}),
    ));
    model.push(Reply::text("Here are your files."));
    fake.send_text(private_chat(12), 12, "make files");
    fake.wait_for(WAIT, "both files", |f| {
        !f.calls_of("sendDocument").is_empty() && !f.calls_of("sendPhoto").is_empty()
    })
    .await;
    let calls = fake.calls();
    let position = |method: &str| calls.iter().position(|c| c.method == method).expect(method);
    let final_edit = calls
        .iter()
        .rposition(|c| c.method == "editmessagetext" && c.body["text"] == "Here are your files.")
        .expect("final text");
    assert!(
        final_edit < position("senddocument") && final_edit < position("sendphoto"),
        "files come after the text"
    );
    let document = &fake.calls_of("sendDocument")[0].body;
    assert_eq!(document["document"]["filename"], "report.pdf", "{document}");
    assert_eq!(
        fake.calls_of("sendPhoto")[0].body["photo"]["filename"],
        "chart.png"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_mode_checks_the_secret_and_processes_an_update_once() {
    let fake = FakeTelegram::start().await;
    let model = antler_test_support::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = "    mode: webhook\n    webhook_url: https://bot.example.test/channels/telegram/webhook\n    webhook_secret: s3cret_token\n";
    let bot = Bot::start(&config_yaml(dir.path(), &fake, &model, extra)).await;
    bot.readyz_until("the webhook registered", |r| {
        r["channels"]["telegram"]["state"] == "running"
    })
    .await;
    let set = fake.calls_of("setWebhook");
    assert_eq!(set.len(), 1);
    assert_eq!(set[0].body["secret_token"], "s3cret_token");
    assert!(
        fake.calls_of("getUpdates").is_empty(),
        "no poller in webhook mode"
    );

    model.push(Reply::text("webhook answer"));
    fake.send_text(private_chat(13), 13, "via webhook");
    let update = fake.last_update().expect("update");
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let url = format!("http://{}/channels/telegram/webhook", bot.addr);
    let post = |secret: &'static str| {
        client
            .post(&url)
            .header("X-Telegram-Bot-Api-Secret-Token", secret)
            .json(&update)
            .send()
    };
    assert_eq!(post("wrong").await.expect("post").status(), 401);
    assert_eq!(
        client
            .post(&url)
            .json(&update)
            .send()
            .await
            .expect("post")
            .status(),
        401
    );
    // The refused posts were answered 401 before anything was journalled: nothing to wait for.
    assert!(
        fake.chat_texts(13).is_empty(),
        "nothing processed on a bad secret"
    );
    assert_eq!(post("s3cret_token").await.expect("post").status(), 200);
    // Telegram retries when it missed our 200: the retry is recognised.
    assert_eq!(post("s3cret_token").await.expect("post").status(), 200);
    fake.wait_for(WAIT, "answer", |f| {
        f.chat_texts(13).iter().any(|t| t == "webhook answer")
    })
    .await;
    // The chat's messages are handled in order: once a later update is answered, the update
    // posted with a bad secret or the retry would have been answered before it.
    model.push(Reply::text("next answer"));
    fake.send_text(private_chat(13), 13, "next");
    let next = fake.last_update().expect("update");
    let posted = client
        .post(&url)
        .header("X-Telegram-Bot-Api-Secret-Token", "s3cret_token")
        .json(&next)
        .send()
        .await
        .expect("post");
    assert_eq!(posted.status(), 200);
    fake.wait_for(WAIT, "the next answer", |f| {
        f.chat_texts(13).iter().any(|t| t == "next answer")
    })
    .await;
    let status_messages = fake
        .calls_of("sendMessage")
        .iter()
        .filter(|call| call.body["text"] == "Working on it…")
        .count();
    assert_eq!(status_messages, 2, "one status message per update");
    assert_eq!(model.requests().len(), 2);
    bot.stop().await;
}
