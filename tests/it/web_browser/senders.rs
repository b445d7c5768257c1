//! A shared conversation (a group chat's thread) in the web chat: each person's message shows
//! under the name of whoever wrote it (`meta.extra.sender`, set for messages that carry a
//! `sender_id`); a message of the page's own user shows none.

use antler_test_support::{FakeOpenAi, Reply};

use super::{Tokenless, browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_threads_messages_show_their_senders_names() {
    let Some(browser) = browser("senders").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;

    // Two people's turns in the page's thread, labelled as a channel turn labels them.
    for (user, name, text) in [
        ("slack-UANN", "Ann", "hello all"),
        ("slack-UBOB", "Bob", "hi Ann"),
    ] {
        fake.push(Reply::text("Hi."));
        let body = serde_json::json!({"input": {"messages": [{"role": "user", "content": text,
            "additional_kwargs": {"sender_id": user, "sender": name}}]}});
        let status = browser
            .js(&format!(
                "fetch('/api/threads/' + localStorage.getItem('antler.thread') + '/runs/wait', \
                 {{method: 'POST', headers: {{'Content-Type': 'application/json'}}, body: {body}}}) \
                 .then((r) => r.status)",
                body = serde_json::to_string(&body.to_string()).unwrap(),
            ))
            .await;
        assert_eq!(status, 200, "{text}");
    }
    browser.session.refresh().await.expect("reload");
    browser
        .wait(
            "document.querySelectorAll('.human').length === 2",
            "the two messages",
        )
        .await;
    assert_eq!(
        browser
            .js("[...document.querySelectorAll('.human .who')].map((n) => n.innerText).join(',')")
            .await,
        "Ann,Bob"
    );

    // The page's own message carries no sender: no name above it.
    fake.push(Reply::text("Noted."));
    browser.say("and me").await;
    browser.idle().await;
    assert_eq!(
        browser
            .js("document.querySelectorAll('.human .who').length")
            .await,
        2
    );
    browser.screenshot("senders").await;
    browser.finish(&[]).await;
}
