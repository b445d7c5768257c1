//! Chat commands typed in the web chat's composer run on the daemon (`POST /api/commands`):
//! `/plan on` ticks the plan box and reaches the next run, `/new` opens the new thread, and a
//! skill-style `/name task` the daemon does not know is sent as a message.

use antler_test_support::{FakeOpenAi, Reply};

use super::{Tokenless, browser};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_typed_in_the_web_chat_run_on_the_daemon() {
    let Some(browser) = browser("commands").await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let setup = Tokenless::new(&fake.base_url());
    let daemon = setup.start();
    browser.open_chat(&daemon.url("/")).await;

    browser.say("/plan on").await;
    browser
        .wait(
            "[...document.querySelectorAll('.command-reply')].some((n) => n.innerText.includes('Plan mode on.'))",
            "the reply to /plan on",
        )
        .await;
    assert_eq!(
        browser.js("document.getElementById('plan').checked").await,
        true
    );

    fake.push(Reply::text("Planned."));
    browser.say("make a plan").await;
    browser.idle().await;
    let tools: Vec<String> = fake.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(tools.iter().any(|t| t == "write_todos"), "{tools:?}");

    let before = browser.js("localStorage.getItem('antler.thread')").await;
    browser.say("/new").await;
    browser
        .wait(
            "[...document.querySelectorAll('.command-reply')].some((n) => n.innerText.includes('New conversation started.'))",
            "the new conversation",
        )
        .await;
    let after = browser.js("localStorage.getItem('antler.thread')").await;
    assert_ne!(before, after, "the page opened the new thread");
    assert_eq!(
        browser.js("document.getElementById('plan').checked").await,
        true,
        "the new conversation keeps plan mode"
    );

    fake.push(Reply::text("Sunny."));
    browser.say("/weather paris").await;
    browser.idle().await;
    browser
        .wait(
            "document.querySelector('.answer') && document.querySelector('.answer').innerText.includes('Sunny.')",
            "the answer to a non-command",
        )
        .await;
    browser.screenshot("commands").await;
    browser.finish(&["not_a_command", "400"]).await;
}
