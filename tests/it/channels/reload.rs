//! Channel settings reloaded while the daemon runs: allowlists apply to the next message
//! without reconnecting; a change of connection settings restarts only that channel.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, FakeTelegram, Reply, private_chat};

use super::{Bot, WAIT, config_yaml};

/// The watcher checks the file every 2 s; a reload is seen within a few checks.
const RELOAD: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowlists_reload_in_place_and_new_credentials_restart_only_the_channel() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    let with = |extra: &str| config_yaml(dir.path(), &fake, &model, extra);
    let yaml = with("    allowed_users: [1]\n");
    std::fs::write(&path, &yaml).expect("write config");
    let bot = Bot::start_watching(&yaml, Some(&path)).await;
    fake.wait_for(WAIT, "the first poll", |f| {
        !f.calls_of("getUpdates").is_empty()
    })
    .await;

    fake.send_text(private_chat(2), 2, "am I allowed?");
    model.push(Reply::text("welcome, 1"));
    fake.send_text(private_chat(1), 1, "hello");
    fake.wait_for(WAIT, "user 1's answer", |f| {
        f.chat_texts(1).iter().any(|t| t == "welcome, 1")
    })
    .await;
    assert!(fake.chat_texts(2).is_empty(), "user 2 is not allowed yet");

    std::fs::write(&path, with("    allowed_users: [1, 2]\n")).expect("edit config");
    // The next message of user 2 is answered once the reload is in; until then it is refused.
    model.push(Reply::text("welcome, 2"));
    let deadline = tokio::time::Instant::now() + RELOAD;
    while !fake.chat_texts(2).iter().any(|t| t == "welcome, 2") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the allowlist never reloaded"
        );
        fake.send_text(private_chat(2), 2, "how about now?");
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert_eq!(
        fake.calls_of("getMe").len(),
        1,
        "no reconnection for an allowlist"
    );

    let new_connection =
        with("    allowed_users: [1, 2]\n").replace("poll_timeout: 1", "poll_timeout: 2");
    std::fs::write(&path, new_connection).expect("edit config");
    fake.wait_for(RELOAD, "the channel to reconnect", |f| {
        f.calls_of("getMe").len() == 2
    })
    .await;
    model.push(Reply::text("still here"));
    fake.send_text(private_chat(1), 1, "after the restart");
    fake.wait_for(WAIT, "an answer on the new connection", |f| {
        f.chat_texts(1).iter().any(|t| t == "still here")
    })
    .await;
    let ready = bot.readyz().await;
    assert_eq!(ready["channels"]["telegram"]["state"], "running", "{ready}");
    bot.stop().await;
}
