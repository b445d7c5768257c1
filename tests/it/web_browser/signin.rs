//! Signing in on a daemon with API tokens: the token dialog in plain words over an empty page,
//! asked once per tab; and the note that says where the conversations made before the token
//! went.

use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};

use super::{Tokenless, browser};
use crate::daemon::{Setup, TOKEN_A};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_protected_daemon_asks_for_the_token_once() {
    let Some(browser) = browser("token").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    browser
        .session
        .goto(&daemon.url("/"))
        .await
        .expect("open page");
    browser
        .wait(
            "document.getElementById('token-dialog').open",
            "the token dialog",
        )
        .await;
    // Plain words, nothing of the app behind the dialog, no banner of HTTP details.
    let dialog = browser
        .js("document.getElementById('token-dialog').innerText")
        .await;
    let dialog = dialog.as_str().unwrap();
    for needle in [
        "Sign in",
        "access token",
        "gateway.api_tokens",
        "this browser tab",
    ] {
        assert!(dialog.contains(needle), "{needle:?} missing: {dialog}");
    }
    for jargon in ["Bearer", "Authorization", "HTTP", "401"] {
        assert!(!dialog.contains(jargon), "{jargon:?} in: {dialog}");
    }
    for hidden in ["model", "agent", "new", "banner", "input"] {
        assert_eq!(
            browser
                .js(&format!(
                    "document.getElementById('{hidden}').checkVisibility({{visibilityProperty: true}})"
                ))
                .await,
            false,
            "#{hidden} shows behind the dialog"
        );
    }
    browser.screenshot("09-token").await;
    browser.session.set_window_size(390, 844).await.unwrap();
    browser
        .session
        .cdp(
            "Emulation.setEmulatedMedia",
            serde_json::json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
        )
        .await
        .expect("emulate the dark scheme");
    browser
        .wait(
            "matchMedia('(prefers-color-scheme: dark)').matches && document.getElementById('token-dialog').getBoundingClientRect().right <= window.innerWidth",
            "the dialog at phone width",
        )
        .await;
    browser.screenshot("09-token-phone-dark").await;

    let field = browser.find("#token-input").await;
    field.send_keys("not-a-token\u{E007}").await.unwrap();
    browser
        .wait("document.getElementById('token-dialog').open && document.getElementById('token-error').innerText.includes('not accepted')", "the refusal")
        .await;
    let field = browser.find("#token-input").await;
    field
        .send_keys(&format!("{TOKEN_A}\u{E007}"))
        .await
        .unwrap();
    browser
        .wait("!document.getElementById('token-dialog').open && document.querySelector('#model option').text.includes('fake-model')", "the page with the token")
        .await;
    fake.push(Reply::text("Hello **Alice**."));
    browser.say("hi").await;
    browser
        .wait("document.querySelector('.answer strong')", "the answer")
        .await;
    browser.idle().await;
    assert_eq!(
        browser.js("sessionStorage.getItem('antler.token')").await,
        TOKEN_A
    );
    assert_eq!(
        browser.js("localStorage.getItem('antler.token')").await,
        serde_json::Value::Null
    );
    // A reload in the same tab does not ask again.
    browser.session.refresh().await.unwrap();
    browser
        .wait(
            "document.querySelector('.answer strong')",
            "the restored answer",
        )
        .await;
    assert_eq!(
        browser
            .js("document.getElementById('token-dialog').open")
            .await,
        false
    );
    browser.finish(&["401"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_from_before_the_token_are_explained_not_lost() {
    let Some(browser) = browser("local-notice").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;
    fake.push(Reply::text("Noted."));
    browser.say("remember the milk").await;
    browser
        .wait("document.body.innerText.includes('Noted.')", "the answer")
        .await;
    browser.idle().await;
    browser
        .wait(
            "document.querySelectorAll('#threads li').length === 1 && document.querySelector('#threads li').innerText.includes('remember')",
            "the conversation listed",
        )
        .await;
    assert_eq!(
        browser
            .js("document.getElementById('local-notice').hidden")
            .await,
        true
    );

    // The operator starts sharing the daemon: a token for alice, taken on SIGHUP.
    setup.add_token(TOKEN_A, "alice");
    daemon.signal("HUP");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = daemon
            .http
            .get(daemon.url("/api/threads"))
            .send()
            .await
            .unwrap()
            .status();
        if status == 401 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the token never took effect ({status})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser.session.refresh().await.unwrap();
    browser
        .wait(
            "document.getElementById('token-dialog').open",
            "the token dialog",
        )
        .await;
    browser
        .find("#token-input")
        .await
        .send_keys(&format!("{TOKEN_A}\u{E007}"))
        .await
        .unwrap();
    browser
        .wait(
            "!document.getElementById('token-dialog').open && !document.getElementById('local-notice').hidden",
            "the note about the earlier conversation",
        )
        .await;
    let note = browser
        .js("document.getElementById('local-notice').innerText")
        .await;
    let note = note.as_str().unwrap();
    for needle in [
        "1 conversation made without a token is not listed",
        "“local”",
        "It is kept",
        "user: local",
        "gateway.api_tokens",
    ] {
        assert!(note.contains(needle), "{needle:?} missing: {note}");
    }
    // Alice's list is her own: the local conversation is not in it, and it is still stored.
    assert_eq!(
        browser
            .js("[...document.querySelectorAll('#threads li')].some(li => li.innerText.includes('remember'))")
            .await,
        false
    );
    let local = reqwest::Client::builder()
        .unix_socket(setup.socket())
        .build()
        .unwrap();
    let kept: serde_json::Value = local
        .get("http://localhost/api/threads")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(kept["threads"].as_array().unwrap().len(), 1, "{kept}");
    // Alice talks in a conversation of her own (not the local user's, still open before).
    fake.push(Reply::text("Hello Alice."));
    browser.say("hi").await;
    browser
        .wait(
            "document.body.innerText.includes('Hello Alice.')",
            "alice's answer",
        )
        .await;
    browser.idle().await;
    browser.screenshot("11-local-notice").await;
    browser.click("#local-notice button").await;
    browser
        .wait(
            "document.getElementById('local-notice').hidden",
            "the note dismissed",
        )
        .await;
    browser.session.refresh().await.unwrap();
    browser
        .wait(
            "document.body.innerText.includes('Hello Alice.') && document.querySelector('#threads li')",
            "alice's conversation after a reload",
        )
        .await;
    assert_eq!(
        browser
            .js("document.getElementById('local-notice').hidden")
            .await,
        true,
        "a dismissed note stays away"
    );
    browser.finish(&["401"]).await;
}
