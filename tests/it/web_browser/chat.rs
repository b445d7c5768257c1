//! One conversation in the browser: Markdown rendered and sanitized, tool steps before the
//! answer, presented files as links and inline images, a clarification answered by a button,
//! the same conversation after a reload, and the page at phone width.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Tokenless, browser};

const CHART: &[u8] = include_bytes!("chart.png");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_renders_markdown_steps_files_and_survives_a_reload() {
    let Some(browser) = browser("conversation").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser
        .session
        .goto(&daemon.url("/"))
        .await
        .expect("open page");
    browser
        .wait(
            "document.querySelector('#model option[value=fake]') && document.querySelector('.note')",
            "models and the welcome note",
        )
        .await;

    // Markdown, with an attack in the middle of it.
    fake.push(Reply::chunks([
        "Here is a **bold** plan.\n\n```sh\necho hi\n",
        "```\n\nAnd <img src=x onerror=alert(1)> done.",
    ]));
    browser.say("hello").await;
    browser
        .wait(
            "document.querySelector('.answer strong') && document.querySelector('.answer pre')",
            "the rendered Markdown",
        )
        .await;
    browser.idle().await;
    let answer = browser
        .js("document.querySelector('.answer').innerText")
        .await;
    let answer = answer.as_str().unwrap();
    assert!(!answer.contains("**"), "raw Markdown shown: {answer}");
    assert!(
        answer.contains("echo hi") && answer.contains("done."),
        "{answer}"
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('img[onerror], img[src=x]').length")
            .await,
        0
    );
    assert!(
        browser.session.alert_text().await.is_err(),
        "an alert opened"
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('.code-block .copy').length")
            .await,
        1
    );
    browser.screenshot("01-markdown").await;

    // A tool-using run that presents a document and an image.
    let thread = browser.js("localStorage.getItem('antler.thread')").await;
    let thread = thread.as_str().expect("thread id").to_owned();
    std::fs::create_dir_all(setup.outputs(&thread)).unwrap();
    std::fs::write(setup.outputs(&thread).join("chart.png"), CHART).unwrap();
    fake.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report\n\nAll good.\n"}),
    ))
    .push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md", "/mnt/user-data/outputs/chart.png"]}),
    ))
    .push(Reply::chunks(["Your **report** ", "is ready."]));
    browser.say("write the report").await;
    browser
        .wait(
            "document.querySelectorAll('.artifact').length === 2",
            "two artifacts",
        )
        .await;
    browser.idle().await;
    let order = browser
        .js("[...document.querySelectorAll('.turn')].at(-1).innerText")
        .await;
    let order = order.as_str().unwrap();
    let step = order.find("write_file").expect("write_file step");
    let presented = order.find("present_files").expect("present_files step");
    let final_answer = order.find("is ready.").expect("the answer");
    assert!(step < presented && presented < final_answer, "{order}");
    assert_eq!(
        browser
            .js("document.querySelectorAll('.step.done').length")
            .await,
        2
    );
    let href = browser
        .js("[...document.querySelectorAll('.artifact a.download')].find(a => a.textContent.includes('report.md')).getAttribute('href')")
        .await;
    let download = daemon
        .http
        .get(daemon.url(href.as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(download.status(), 200);
    let disposition = download.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(disposition.starts_with("attachment"), "{disposition}");
    assert_eq!(download.text().await.unwrap(), "# Report\n\nAll good.\n");
    browser
        .wait(
            "document.querySelector('.artifact img') && document.querySelector('.artifact img').naturalWidth === 160",
            "the chart shown inline",
        )
        .await;
    browser.screenshot("02-tools-and-files").await;

    // A clarification question answered with its button.
    fake.push(Reply::tool_call(
        "ask_clarification",
        json!({"question": "PDF or Markdown?", "clarification_type": "approach_choice", "options": ["PDF", "Markdown"]}),
    ));
    browser.say("make it nicer").await;
    browser
        .wait(
            "document.querySelectorAll('.question .options button:enabled').length === 2",
            "the options",
        )
        .await;
    browser.idle().await;
    browser.screenshot("03-question").await;
    fake.push(Reply::text("Markdown it is."));
    browser
        .js("[...document.querySelectorAll('.question button')].find(b => b.textContent === 'Markdown').click() || true")
        .await;
    browser
        .wait(
            "document.body.innerText.includes('Markdown it is.')",
            "the answer to the choice",
        )
        .await;
    browser.idle().await;
    let sent = fake.requests().last().cloned().expect("a model request");
    let last_user = last_user_text(&sent);
    assert_eq!(last_user, "Markdown", "{sent}");

    // A reload rebuilds everything from /state.
    browser.session.refresh().await.expect("reload");
    browser
        .wait(
            "document.querySelectorAll('.human').length === 4 && document.querySelector('.artifact img') && document.querySelector('.answer strong')",
            "the restored conversation",
        )
        .await;
    let restored = browser.js("document.getElementById('log').innerText").await;
    let restored = restored.as_str().unwrap();
    for needle in [
        "hello",
        "bold",
        "write_file",
        "present_files",
        "report.md",
        "PDF or Markdown?",
        "Markdown it is.",
    ] {
        assert!(
            restored.contains(needle),
            "{needle:?} missing after reload: {restored}"
        );
    }
    assert!(!restored.contains("**"), "{restored}");
    assert_eq!(
        browser
            .js("document.querySelectorAll('img[onerror]').length")
            .await,
        0
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('.question button:enabled').length")
            .await,
        0,
        "an answered question offers no buttons"
    );
    browser.screenshot("04-reloaded").await;

    // Phone width: nothing wider than the screen.
    browser.session.set_window_size(390, 844).await.unwrap();
    browser
        .wait(
            "document.documentElement.scrollWidth <= window.innerWidth && document.getElementById('sidebar').getBoundingClientRect().right <= 0",
            "no horizontal scroll and the sidebar folded away",
        )
        .await;
    browser.screenshot("05-phone").await;
    browser.click("#toggle-sidebar").await;
    browser
        .wait(
            "document.getElementById('sidebar').classList.contains('open')",
            "the sidebar",
        )
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await; // the slide-in
    browser.screenshot("06-phone-sidebar").await;
    browser.finish(&[]).await;
}

fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

pub(super) fn last_user(request: &Value) -> String {
    last_user_text(request)
}
