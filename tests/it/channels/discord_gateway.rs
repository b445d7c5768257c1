//! Discord's gateway and rate limits end to end: RECONNECT and INVALID_SESSION, a replayed
//! MESSAGE_CREATE answered once, a 429 that pauses only its bucket, a fatal close code, and
//! slash commands.

use std::time::{Duration, Instant};

use antler_test_support::{
    DiscordFailure, DiscordRoute, FAKE_DISCORD_BOT_ID, FakeDiscord, FakeOpenAi, Reply, discord_user,
};
use serde_json::json;

use super::WAIT;
use super::discord::{USER, start, wait_answered};
use super::discord_driver::discord_section;
use super::{Bot, daemon_yaml};

fn open_sessions(fake: &FakeDiscord) -> usize {
    fake.sessions().iter().filter(|s| !s.closed).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_and_invalid_session_are_handled_and_a_replayed_message_is_answered_once() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let dm = FakeDiscord::dm_channel(USER);

    model.push(Reply::text("before"));
    let first = fake.user_says_dm(USER, "one");
    wait_answered(&fake, &dm, &first).await;
    let identify = fake.sessions()[0].identify.clone();
    assert_eq!(identify["compress"], true, "frames are zlib streams");
    assert_eq!(
        identify["intents"],
        json!((1 << 9) | (1 << 12) | (1 << 15)),
        "guild messages, direct messages, message content"
    );

    fake.reconnect(true);
    fake.wait_for(WAIT, "a RESUME", |f| f.sessions().iter().any(|s| s.resumed))
        .await;
    model.push(Reply::text("after"));
    let second = fake.user_says_dm(USER, "two");
    wait_answered(&fake, &dm, &second).await;
    let texts = fake.channel_texts(&dm);
    assert_eq!(
        texts.iter().filter(|t| *t == "before").count(),
        1,
        "the replayed message is not answered again: {texts:?}"
    );
    assert_eq!(model.requests().len(), 2);
    assert_eq!(open_sessions(&fake), 1);

    fake.invalidate_session();
    fake.wait_for(WAIT, "a new IDENTIFY", |f| {
        f.sessions().iter().filter(|s| s.identified).count() == 2
    })
    .await;
    model.push(Reply::text("third"));
    let third = fake.user_says_dm(USER, "three");
    wait_answered(&fake, &dm, &third).await;
    assert_eq!(open_sessions(&fake), 1, "never two sessions at once");
    let health = bot.readyz().await;
    assert_eq!(health["channels"]["discord"]["state"], "running");
    bot.stop().await;
    fake.wait_for(WAIT, "the gateway connection closed", |f| {
        open_sessions(f) == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_on_an_edit_pauses_that_chat_only_for_the_delay_asked() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    let (slow_user, quick_user) = ("300000000000000011", "300000000000000012");
    let (slow_dm, quick_dm) = (
        FakeDiscord::dm_channel(slow_user),
        FakeDiscord::dm_channel(quick_user),
    );
    let chunks = ["one", " two", " three", " four", " five", " six"];
    model.push(Reply::slow(chunks, Duration::from_millis(400)));
    // Long enough for the other chat's whole turn to fit inside it on a loaded machine.
    let window = Duration::from_secs(10);
    fake.fail_next(
        DiscordRoute::Edit,
        DiscordFailure::RateLimited {
            retry_after: window.as_secs_f64(),
            global: false,
        },
    );
    fake.user_says_dm(slow_user, "count");
    fake.wait_for(WAIT, "the rate-limited edit", |f| {
        f.calls()
            .iter()
            .any(|c| c.method == "PATCH" && c.channel.as_deref() == Some(slow_dm.as_str()))
    })
    .await;
    model.push(Reply::text("quick answer"));
    fake.user_says_dm(quick_user, "hello");
    fake.wait_for(WAIT, "the other chat's answer", |f| {
        f.channel_texts(&quick_dm)
            .contains(&"quick answer".to_string())
    })
    .await;
    fake.wait_for(WAIT, "the answer after the 429", |f| {
        f.channel_texts(&slow_dm).contains(&chunks.concat())
    })
    .await;
    let quick_answered = fake
        .calls()
        .into_iter()
        .find(|c| {
            c.channel.as_deref() == Some(quick_dm.as_str())
                && c.body.to_string().contains("quick answer")
        })
        .expect("the quick answer's call")
        .at;
    let slow_calls: Vec<Instant> = fake
        .calls()
        .into_iter()
        .filter(|c| c.channel.as_deref() == Some(slow_dm.as_str()))
        .map(|c| c.at)
        .collect();
    let first_edit = fake
        .calls()
        .into_iter()
        .find(|c| c.method == "PATCH" && c.channel.as_deref() == Some(slow_dm.as_str()))
        .expect("the limited edit")
        .at;
    let inside = slow_calls
        .iter()
        .filter(|at| **at > first_edit && **at < first_edit + window.mul_f64(0.95))
        .count();
    assert_eq!(
        inside, 0,
        "nothing reaches the limited chat inside the window"
    );
    let resumed = slow_calls
        .iter()
        .filter(|at| **at > first_edit)
        .min()
        .expect("the limited chat's answer after the window");
    assert!(
        quick_answered < *resumed,
        "another chat is not held up by the first chat's 429"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_message_content_intent_stops_the_channel_with_what_to_fix() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    fake.close_next_identify(4014);
    let yaml = daemon_yaml(dir.path(), &model, &discord_section(&fake, ""));
    let bot = Bot::start(&yaml).await;
    let health = bot
        .readyz_until("the channel marked unhealthy", |r| {
            r["channels"]["discord"]["state"] == "unhealthy"
        })
        .await;
    let reason = health["channels"]["discord"]["reason"]
        .as_str()
        .expect("a reason");
    assert!(reason.contains("MESSAGE CONTENT INTENT"), "{reason}");
    assert!(reason.contains("4014"), "{reason}");
    // Unhealthy is reported once supervision has given up: only a settings change starts the
    // channel again, so the count is final.
    assert_eq!(fake.sessions().len(), 1, "a fatal close is not retried");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_registered_and_answered() {
    let fake = FakeDiscord::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = start(&fake, &model, dir.path(), "").await;
    fake.wait_for(WAIT, "the registered commands", |f| {
        f.registered_commands()
            .is_some_and(|c| c.as_array().is_some_and(|list| list.len() == 10))
    })
    .await;
    let dm = fake.open_dm(USER);
    fake.dispatch(
        "INTERACTION_CREATE",
        json!({"id": "700000000000000001", "application_id": FAKE_DISCORD_BOT_ID, "type": 2,
            "token": "interaction-token", "version": 1, "channel_id": dm, "locale": "en-US",
            "user": discord_user(USER, false),
            "data": {"id": "800000000000000001", "name": "help", "type": 1},
            "entitlements": [], "authorizing_integration_owners": {},
            "attachment_size_limit": 10_485_760}),
    );
    fake.wait_for(WAIT, "the help text", |f| {
        f.channel_texts(&dm)
            .iter()
            .any(|t| t.starts_with("Available commands:"))
    })
    .await;
    // The help text is posted by the daemon once the command is journaled, which can be
    // before the adapter's acknowledgement reaches the fake: wait for both.
    fake.wait_for(WAIT, "the interaction answer", |f| {
        !f.interaction_answers().is_empty()
    })
    .await;
    let answers = fake.interaction_answers();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].1["type"], 4);
    assert_eq!(answers[0].1["data"]["flags"], 64, "only the person sees it");
    assert_eq!(model.requests().len(), 0);
    bot.stop().await;
}
