//! The open conversation's scheduled tasks in the web chat: a schedule made over the API for
//! the page's thread shows under the header (name, next fire, status); Pause, Resume and
//! Remove change it through the API.

use antler_test_support::FakeOpenAi;
use serde_json::json;

use super::{Tokenless, browser};

const LINE: &str = "document.querySelector('#schedules .schedule')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threads_schedule_is_listed_paused_resumed_and_removed_from_the_page() {
    let Some(browser) = browser("schedules").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;
    assert_eq!(
        browser
            .js("document.querySelector('#schedules').hidden")
            .await,
        true
    );

    let thread = browser.js("localStorage.getItem('antler.thread')").await;
    let thread = thread.as_str().unwrap().to_string();
    let made = daemon
        .http
        .post(daemon.url("/api/threads"))
        .json(&json!({"thread_id": thread}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 200);
    let created = daemon
        .http
        .post(daemon.url("/api/schedules"))
        .json(&json!({
            "thread_id": thread,
            "name": "Weekly PRs",
            "prompt": "Summarise last week's merged PRs",
            "when": {"cron": "0 9 * * MON"},
            "timezone": "Europe/Berlin",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    browser.session.refresh().await.expect("reload");
    browser
        .wait(
            &format!("{LINE} && {LINE}.innerText.includes('Weekly PRs')"),
            "the schedule's line",
        )
        .await;
    let line = browser.js(&format!("{LINE}.innerText")).await;
    let line = line.as_str().unwrap_or_default().to_string();
    assert!(
        line.contains("next Mon") && line.contains("09:00 CET"),
        "{line}"
    );
    browser.screenshot("schedule-listed").await;

    browser
        .click("#schedules button[data-action='pause']")
        .await;
    browser
        .wait(
            &format!("{LINE}.classList.contains('paused') && {LINE}.querySelector('button[data-action=resume]')"),
            "the schedule paused",
        )
        .await;
    let listed = daemon
        .http
        .get(daemon.url("/api/schedules"))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(listed["schedules"][0]["status"], "paused");

    browser
        .click("#schedules button[data-action='resume']")
        .await;
    browser
        .wait(
            &format!("{LINE}.classList.contains('active')"),
            "the schedule resumed",
        )
        .await;

    browser
        .click("#schedules button[data-action='remove']")
        .await;
    browser
        .wait(
            "document.querySelector('#schedules button.remove.confirm')",
            "the removal asking for a second click",
        )
        .await;
    browser
        .click("#schedules button[data-action='remove']")
        .await;
    browser
        .wait(
            "document.querySelector('#schedules').hidden",
            "the panel gone with its last schedule",
        )
        .await;
    let listed = daemon
        .http
        .get(daemon.url("/api/schedules"))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(listed["schedules"], json!([]));
}
