//! Uploads, the thread sidebar and cancelling a streaming run, in the browser.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};

use super::chat::last_user;
use super::{Tokenless, browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_reach_the_model_and_threads_switch_and_delete() {
    let Some(browser) = browser("threads").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;

    // Upload with the file button; the next message carries the file to the model.
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "buy milk\n").unwrap();
    let input = browser.find("#file-input").await;
    input
        .send_keys(notes.to_str().unwrap())
        .await
        .expect("choose file");
    browser
        .wait("document.querySelector('#attachments li') && document.querySelector('#attachments li').innerText.includes('notes.txt')", "the attached file")
        .await;
    fake.push(Reply::text("You need milk."));
    browser.say("summarise my notes").await;
    browser
        .wait(
            "document.body.innerText.includes('You need milk.')",
            "the answer",
        )
        .await;
    browser.idle().await;
    let sent = last_user(&fake.requests().last().cloned().expect("a model request"));
    assert!(
        sent.contains("<current_uploads>") && sent.contains("notes.txt"),
        "{sent}"
    );
    assert!(sent.contains("/mnt/user-data/uploads/notes.txt"), "{sent}");
    assert_eq!(
        browser
            .js("document.querySelectorAll('#attachments li').length")
            .await,
        0
    );
    assert!(
        browser
            .js("document.querySelector('.human .files').innerText")
            .await
            .as_str()
            .unwrap()
            .contains("notes.txt")
    );
    let first = browser.js("localStorage.getItem('antler.thread')").await;

    // A second conversation; both are in the sidebar and each shows its own messages.
    browser.click("#new").await;
    browser
        .wait(
            "document.querySelectorAll('.human').length === 0",
            "an empty log",
        )
        .await;
    fake.push(Reply::text("Second answer."));
    browser.say("second question").await;
    browser
        .wait(
            "document.body.innerText.includes('Second answer.')",
            "the answer",
        )
        .await;
    browser.idle().await;
    browser
        .wait(
            "document.querySelectorAll('#threads li').length === 2",
            "two threads listed",
        )
        .await;
    let titles = browser
        .js("document.getElementById('threads').innerText")
        .await;
    assert!(
        titles.as_str().unwrap().contains("summarise my notes"),
        "{titles}"
    );
    browser.screenshot("07-threads").await;
    browser.click("#threads li:not(.current) .open").await;
    browser
        .wait(
            "document.getElementById('log').innerText.includes('You need milk.')",
            "the first thread",
        )
        .await;
    assert!(
        !browser
            .js("document.getElementById('log').innerText")
            .await
            .as_str()
            .unwrap()
            .contains("Second answer.")
    );
    assert_eq!(
        browser.js("localStorage.getItem('antler.thread')").await,
        first
    );

    // Delete the other thread (two clicks: the first asks to confirm).
    browser.click("#threads li:not(.current) .remove").await;
    browser
        .wait(
            "document.querySelector('#threads .remove.confirm')",
            "the confirmation",
        )
        .await;
    browser.click("#threads li:not(.current) .remove").await;
    browser
        .wait(
            "document.querySelectorAll('#threads li').length === 1",
            "one thread left",
        )
        .await;
    let listed = daemon
        .http
        .get(daemon.url("/api/threads"))
        .send()
        .await
        .unwrap();
    let listed: serde_json::Value = listed.json().await.unwrap();
    assert_eq!(listed["threads"].as_array().unwrap().len(), 1, "{listed}");
    browser.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_shows_the_todo_list_live() {
    let Some(browser) = browser("plan").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;
    browser.click("#plan").await;
    fake.push(Reply::tool_call(
        "write_todos",
        serde_json::json!({"todos": [
            {"content": "Read the notes", "status": "completed"},
            {"content": "Draft the summary", "status": "in_progress"},
            {"content": "Send it", "status": "pending"},
        ]}),
    ))
    .push(Reply::text("Working on it."))
    // Items are still open, so the todo middleware asks the model once to carry on.
    .push(Reply::text("The summary is next."));
    browser.say("plan my week").await;
    browser
        .wait(
            "document.querySelectorAll('.todos li').length === 3",
            "the todo list",
        )
        .await;
    browser.idle().await;
    let todos = browser
        .js("document.querySelector('.todos').innerText")
        .await;
    let todos = todos.as_str().unwrap();
    for line in ["☑ Read the notes", "▶ Draft the summary", "☐ Send it"] {
        assert!(todos.contains(line), "{line:?} missing from {todos}");
    }
    let tools: Vec<String> = fake.requests()[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        tools.iter().any(|t| t == "write_todos"),
        "plan mode not requested: {tools:?}"
    );
    browser.screenshot("10-plan").await;
    browser.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_cancels_a_streaming_run() {
    let Some(browser) = browser("cancel").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;
    let words: Vec<String> = (1..=60).map(|i| format!("word{i} ")).collect();
    fake.push(Reply::slow(words, Duration::from_millis(200)));
    browser.say("count slowly").await;
    browser
        .wait("document.querySelector('.answer.streaming') && !document.getElementById('stop').hidden", "streaming")
        .await;
    browser.screenshot("08-streaming").await;
    let input = browser.find("#input").await;
    input
        .send_keys(&super::webdriver::ESCAPE.to_string())
        .await
        .expect("press Escape");
    browser
        .wait("document.body.innerText.includes('Stopped.') && !document.getElementById('send').hidden", "the stopped run")
        .await;
    let thread = browser.js("localStorage.getItem('antler.thread')").await;
    let state: serde_json::Value = daemon
        .http
        .get(daemon.url(&format!("/api/threads/{}", thread.as_str().unwrap())))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(state["status"], "busy", "{state}");
    let shown = browser
        .js("document.querySelector('.answer') ? document.querySelector('.answer').innerText : ''")
        .await;
    assert!(
        !shown.as_str().unwrap().contains("word60"),
        "the run was not stopped: {shown}"
    );
    browser.finish(&[]).await;
}
