//! The shared channel conformance story: what every adapter must do, written once.
//!
//! A platform test implements [`ChannelDriver`] over its fake server and calls [`story`].

use std::time::Duration;

use antler_test_support::{FakeOpenAi, FakeTelegram, Reply, private_chat};

use super::WAIT;

/// How the story talks to one platform's fake.
pub(crate) trait ChannelDriver {
    /// A person sends `text` in a direct conversation.
    fn user_says(&self, text: &str);
    /// The platform delivers the last message again.
    fn redeliver_last(&self);
    /// What the bot's messages in the direct conversation read now, oldest first.
    fn bot_texts(&self) -> Vec<String>;
}

pub(crate) struct TelegramDriver<'a> {
    pub(crate) fake: &'a FakeTelegram,
}

const USER: i64 = 4242;

impl ChannelDriver for TelegramDriver<'_> {
    fn user_says(&self, text: &str) {
        self.fake.send_text(private_chat(USER), USER, text);
    }

    fn redeliver_last(&self) {
        self.fake.redeliver_last();
    }

    fn bot_texts(&self) -> Vec<String> {
        self.fake.chat_texts(USER)
    }
}

async fn wait_for(driver: &dyn ChannelDriver, what: &str, check: impl Fn(&[String]) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let texts = driver.bot_texts();
        if check(&texts) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; bot said {texts:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Message → answer; a redelivery → no second answer; `/help`; `/new`; the agent sees both turns
/// of a conversation and not the previous one after `/new`.
pub(crate) async fn story(driver: &dyn ChannelDriver, model: &FakeOpenAi) {
    model.push(Reply::text("answer one"));
    driver.user_says("remember the word walnut");
    wait_for(driver, "the first answer", |t| {
        t.iter().any(|t| t == "answer one")
    })
    .await;

    driver.redeliver_last();
    model.push(Reply::text("answer two"));
    driver.user_says("what was the word?");
    wait_for(driver, "the second answer", |t| {
        t.iter().any(|t| t == "answer two")
    })
    .await;
    let texts = driver.bot_texts();
    assert_eq!(
        texts.iter().filter(|t| *t == "answer one").count(),
        1,
        "a redelivery is not answered again"
    );
    let second = model.requests().pop().expect("second request").to_string();
    assert!(
        second.contains("walnut"),
        "the conversation continues in one thread"
    );

    driver.user_says("/help");
    wait_for(driver, "help", |t| {
        t.iter().any(|t| t.starts_with("Available commands:"))
    })
    .await;

    driver.user_says("/new");
    wait_for(driver, "new", |t| {
        t.iter().any(|t| t == "New conversation started.")
    })
    .await;
    model.push(Reply::text("answer three"));
    driver.user_says("fresh start");
    wait_for(driver, "the third answer", |t| {
        t.iter().any(|t| t == "answer three")
    })
    .await;
    let third = model.requests().pop().expect("third request").to_string();
    assert!(!third.contains("walnut"), "/new starts an empty thread");
    assert_eq!(model.unscripted_calls(), 0);
}
