//! A gated tool call in the web chat: the request shows inline under the turn (tool, command,
//! why, three buttons), survives a reload, and a click on Approve streams the resumed run
//! into the conversation (the tool runs once, the model answers) while the card says who
//! approved. A second request is denied by typing `/deny ID reason`.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::{Tokenless, browser};

const CARD: &str = "document.querySelector('.approval')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_is_approved_with_a_click_and_the_answer_streams_in() {
    let Some(browser) = browser("approvals").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::with_models(&fake.base_url(), "approvals:\n  tools: [bash]\n");
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;

    fake.push(Reply::tool_call(
        "bash",
        json!({"command": "echo ran >> /mnt/user-data/outputs/ran.txt; cat /mnt/user-data/outputs/ran.txt"}),
    ));
    browser.say("count the runs").await;
    browser
        .wait(
            &format!("{CARD} && {CARD}.querySelectorAll('button').length === 3"),
            "the approval card with its buttons",
        )
        .await;
    browser.idle().await;
    let card = browser.js(&format!("{CARD}.innerText")).await;
    let card = card.as_str().unwrap_or_default().to_string();
    for needle in [
        "bash",
        "ran.txt",
        "always needs approval",
        "Approve for this conversation",
        "Deny",
    ] {
        assert!(card.contains(needle), "{needle:?} missing from {card:?}");
    }
    browser.screenshot("approval-requested").await;

    // After a reload the request is still there, buttons and all.
    browser.session.refresh().await.expect("reload");
    browser
        .wait(
            &format!("{CARD} && {CARD}.querySelectorAll('button:not(:disabled)').length === 3"),
            "the pending request after a reload",
        )
        .await;

    fake.push(Reply::text("It ran once."));
    browser
        .click(".approval button[data-decision='approve']")
        .await;
    browser
        .wait(
            "[...document.querySelectorAll('.answer')].some((n) => n.innerText.includes('It ran once.'))",
            "the resumed run's answer",
        )
        .await;
    browser.idle().await;
    browser
        .wait(
            &format!("{CARD}.querySelector('.decision') && {CARD}.querySelector('.decision').innerText.startsWith('Approved by local')"),
            "the decision in place of the buttons",
        )
        .await;
    assert_eq!(
        browser
            .js(&format!("{CARD}.querySelectorAll('button').length"))
            .await,
        0
    );
    let thread = browser.js("localStorage.getItem('antler.thread')").await;
    let thread = thread.as_str().expect("thread id").to_string();
    let ran = setup.outputs(&thread).join("ran.txt");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");
    assert_eq!(fake.requests().len(), 2);
    browser.screenshot("approval-approved").await;

    // A second request, denied by typing: the model is told and answers.
    fake.push(Reply::tool_call(
        "bash",
        json!({"command": "rm -rf /mnt/user-data/outputs"}),
    ));
    browser.say("clean up").await;
    browser
        .wait(
            "document.querySelectorAll('.approval .options').length === 1",
            "the second request",
        )
        .await;
    browser.idle().await;
    let id = browser
        .js("document.querySelector('.approval .options').closest('.approval').dataset.approval")
        .await;
    let id = id.as_str().expect("request id").to_string();
    fake.push(Reply::text("Fine, I left the files alone."));
    browser.say(&format!("/deny {id} keep them")).await;
    browser
        .wait(
            "[...document.querySelectorAll('.answer')].some((n) => n.innerText.includes('left the files alone'))",
            "the answer after the denial",
        )
        .await;
    browser.idle().await;
    browser
        .wait(
            &format!("document.querySelector('.approval[data-approval=\"{id}\"] .decision') && document.querySelector('.approval[data-approval=\"{id}\"] .decision').innerText.includes('keep them')"),
            "the denied card",
        )
        .await;
    let denial = fake.requests()[3].to_string();
    assert!(denial.contains("keep them"), "{denial}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");
    browser.screenshot("approval-denied").await;
    browser.finish(&[]).await;
}
