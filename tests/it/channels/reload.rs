//! Channel settings reloaded while the daemon runs: allowlists and rate limits apply to the next
//! message without reconnecting; a change of connection settings restarts only that channel.

use antler_test_support::{FakeOpenAi, FakeTelegram, Gate, Reply, private_chat};

use super::{Bot, WAIT, config_yaml};

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
    // The next message of user 2 is answered once the reload is in (the watcher checks the
    // file every 2 s).
    bot.readyz_until("the allowlist reloaded", |r| {
        r["reload"]["outcome"] == "reloaded"
    })
    .await;
    model.push(Reply::text("welcome, 2"));
    fake.send_text(private_chat(2), 2, "how about now?");
    fake.wait_for(WAIT, "user 2's answer", |f| {
        f.chat_texts(2).iter().any(|t| t == "welcome, 2")
    })
    .await;
    assert_eq!(
        fake.calls_of("getMe").len(),
        1,
        "no reconnection for an allowlist"
    );

    let new_connection =
        with("    allowed_users: [1, 2]\n").replace("poll_timeout: 1", "poll_timeout: 2");
    std::fs::write(&path, new_connection).expect("edit config");
    fake.wait_for(WAIT, "the channel to reconnect", |f| {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_change_applies_to_the_next_message_without_reconnecting() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    let with = |per_minute: u32| {
        config_yaml(dir.path(), &fake, &model, "").replace(
            "channels:\n",
            &format!("channels:\n  user_messages_per_minute: {per_minute}\n"),
        )
    };
    std::fs::write(&path, with(1)).expect("write config");
    let bot = Bot::start_watching(&with(1), Some(&path)).await;
    model.push(Reply::text("first answer"));
    fake.send_text(private_chat(7), 7, "one");
    fake.wait_for(WAIT, "the first answer", |f| {
        f.chat_texts(7).iter().any(|t| t == "first answer")
    })
    .await;
    fake.send_text(private_chat(7), 7, "two");
    fake.wait_for(WAIT, "the throttle notice", |f| {
        f.chat_texts(7)
            .iter()
            .any(|t| t.starts_with("You are sending messages faster"))
    })
    .await;

    std::fs::write(&path, with(0)).expect("edit config");
    bot.readyz_until("the reload", |r| r["reload"]["outcome"] == "reloaded")
        .await;
    model.push(Reply::text("unlimited now"));
    fake.send_text(private_chat(7), 7, "three");
    fake.wait_for(WAIT, "an answer past the old limit", |f| {
        f.chat_texts(7).iter().any(|t| t == "unlimited now")
    })
    .await;
    assert_eq!(model.requests().len(), 2, "the throttled message never ran");
    assert_eq!(
        fake.calls_of("getMe").len(),
        1,
        "no reconnection for a limit"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_that_cannot_connect_in_time_rolls_the_reload_back() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    let yaml = config_yaml(dir.path(), &fake, &model, "").replace(
        "channels:\n",
        "channels:\n  reload_connect_timeout_seconds: 2\n",
    );
    std::fs::write(&path, &yaml).expect("write config");
    let bot = Bot::start_watching(&yaml, Some(&path)).await;
    fake.wait_for(WAIT, "the first poll", |f| {
        !f.calls_of("getUpdates").is_empty()
    })
    .await;

    // An endpoint nobody answers: connecting fails in a way worth retrying, until the limit.
    // Loopback port 1 is always refused (a freed port could be taken by another test's server).
    let nowhere = "http://127.0.0.1:1".to_string();
    std::fs::write(&path, yaml.replace(&fake.api_url(), &nowhere)).expect("edit config");
    let ready = bot
        .readyz_until("the rollback", |r| r["reload"]["outcome"] == "rolled_back")
        .await;
    let detail = ready["reload"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("telegram: not connected within 2 s (last error: "),
        "{detail}"
    );
    let mut status = Vec::new();
    antler::cli::status::print_readiness(&ready, &mut status).expect("print");
    let status = String::from_utf8(status).expect("utf-8");
    assert!(status.contains("reload    rolled_back 20"), "{status}");

    fake.wait_for(WAIT, "the old settings to reconnect", |f| {
        f.calls_of("getMe").len() == 2
    })
    .await;
    model.push(Reply::text("back on the old endpoint"));
    fake.send_text(private_chat(1), 1, "hello again");
    fake.wait_for(WAIT, "an answer after the rollback", |f| {
        f.chat_texts(1)
            .iter()
            .any(|t| t == "back on the old endpoint")
    })
    .await;
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_in_flight_while_its_channel_restarts_is_still_answered() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    let yaml = config_yaml(dir.path(), &fake, &model, "");
    std::fs::write(&path, &yaml).expect("write config");
    let bot = Bot::start_watching(&yaml, Some(&path)).await;
    // The model's answer stops after its first chunk until the channel has restarted.
    let restarted = Gate::new();
    model.push(
        Reply::chunks(["Slow ", "but ", "sure", ", ", "in ", "the end."]).hold_after(1, &restarted),
    );
    fake.send_text(private_chat(1), 1, "take your time");
    fake.wait_for(WAIT, "the model call", |_| !model.requests().is_empty())
        .await;
    std::fs::write(&path, yaml.replace("poll_timeout: 1", "poll_timeout: 2")).expect("edit");
    fake.wait_for(WAIT, "the channel to restart", |f| {
        f.calls_of("getMe").len() == 2
    })
    .await;
    restarted.open();
    fake.wait_for(WAIT, "the answer of the turn in flight", |f| {
        f.chat_texts(1)
            .iter()
            .any(|t| t == "Slow but sure, in the end.")
    })
    .await;
    let ready = bot.readyz().await;
    assert_eq!(ready["reload"]["outcome"], "reloaded", "{ready}");
    bot.stop().await;
}
