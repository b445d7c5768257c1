//! Slack in events mode: Slack posts to `/channels/slack/webhook`, signed.

use std::time::Duration;

use antler_test_support::{
    FAKE_SLACK_BOT_USER, FAKE_SLACK_TEAM, FakeOpenAi, FakeSlack, Reply, Signing, SlackEventsClient,
    dm_channel,
};
use serde_json::{Value, json};

use antler::channels::manager::QUEUED_NOTE;

use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0000888";

/// The bot's messages in `channel`, without the "queued" note a message that arrives while
/// the previous turn is still finishing gets (the daemon's pace, not what is tested here).
fn answers(fake: &FakeSlack, channel: &str) -> Vec<String> {
    fake.channel_texts(channel)
        .into_iter()
        .filter(|text| text != QUEUED_NOTE)
        .collect()
}

fn callback(event_id: &str, event: Value) -> String {
    json!({"token": "verification-token", "team_id": FAKE_SLACK_TEAM, "api_app_id": "A0FAKE01",
        "type": "event_callback", "event_id": event_id, "event_time": 1_700_000_000, "event": event})
    .to_string()
}

async fn start(
    fake: &FakeSlack,
    model: &FakeOpenAi,
    dir: &std::path::Path,
) -> (Bot, SlackEventsClient) {
    let extra = format!(
        "    mode: events\n    signing_secret: \"{SECRET}\"\n    allowed_channels: [{CHANNEL}]\n"
    );
    let bot = Bot::start(&daemon_yaml(dir, model, &slack_section(fake, &extra))).await;
    let client = SlackEventsClient::new(
        format!("http://{}/channels/slack/webhook", bot.addr),
        SECRET,
    );
    // The webhook is mounted once the channel connected.
    let deadline = tokio::time::Instant::now() + WAIT;
    while bot.readyz().await["channels"]["slack"]["state"] != "running" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "slack never became ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (bot, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_stale_or_unsigned_requests_are_refused_and_nothing_is_processed() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let (bot, client) = start(&fake, &model, dir.path()).await;
    let event = callback(
        "Ev1",
        json!({"type": "message", "channel_type": "im", "channel": dm_channel("U1"),
            "user": "U1", "text": "forged", "ts": "1700000001.000100"}),
    );
    for signing in [
        Signing::WrongSecret,
        Signing::Missing,
        Signing::Aged(Duration::from_secs(6 * 60)),
    ] {
        let (status, body) = client.post_json(&event, signing, None).await;
        assert_eq!(status, 401, "{signing:?}: {body}");
    }
    let challenge = json!({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}).to_string();
    let (status, _) = client
        .post_json(&challenge, Signing::WrongSecret, None)
        .await;
    assert_eq!(status, 401, "even a challenge must be signed");
    let (status, body) = client.post_json(&challenge, Signing::Valid, None).await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        answer["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    // The DM's messages are handled in order: once a genuine one is answered, a refused
    // request that got through anyway would have been answered before it.
    model.push(Reply::text("genuine answer"));
    let genuine = callback(
        "Ev9",
        json!({"type": "message", "channel_type": "im", "channel": dm_channel("U1"),
            "user": "U1", "text": "genuine", "ts": "1700000009.000100"}),
    );
    assert_eq!(
        client.post_json(&genuine, Signing::Valid, None).await.0,
        200
    );
    fake.wait_for(WAIT, "the genuine message's answer", |f| {
        answers(f, &dm_channel("U1")).contains(&"genuine answer".to_string())
    })
    .await;
    assert_eq!(
        model.requests().len(),
        1,
        "nothing refused reached the agent"
    );
    assert_eq!(
        answers(&fake, &dm_channel("U1")),
        ["genuine answer"],
        "nothing refused was answered"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_and_the_mention_pair_get_one_answer_and_slash_commands_work() {
    let (fake, model) = (FakeSlack::start().await, FakeOpenAi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let (bot, client) = start(&fake, &model, dir.path()).await;
    let dm = dm_channel("U2");
    model.push(Reply::text("pong"));
    let event = callback(
        "Ev2",
        json!({"type": "message", "channel_type": "im", "channel": dm, "user": "U2",
            "text": "ping", "ts": "1700000002.000100"}),
    );
    assert_eq!(client.post_json(&event, Signing::Valid, None).await.0, 200);
    // Slack retries when it thinks it got no answer in time.
    for retry in [1, 2] {
        assert_eq!(
            client
                .post_json(&event, Signing::Valid, Some(retry))
                .await
                .0,
            200
        );
    }
    fake.wait_for(WAIT, "the answer", |f| f.channel_texts(&dm) == ["pong"])
        .await;

    model.push(Reply::text("in the thread"));
    let text = format!("<@{FAKE_SLACK_BOT_USER}> hello");
    let ts = "1700000003.000200";
    let mention = callback(
        "Ev3",
        json!({"type": "app_mention", "channel": CHANNEL, "user": "U3", "text": text, "ts": ts}),
    );
    let message = callback(
        "Ev4",
        json!({"type": "message", "channel_type": "channel", "channel": CHANNEL, "user": "U3",
            "text": text, "ts": ts}),
    );
    assert_eq!(
        client.post_json(&mention, Signing::Valid, None).await.0,
        200
    );
    assert_eq!(
        client.post_json(&message, Signing::Valid, None).await.0,
        200
    );
    fake.wait_for(WAIT, "the thread answer", |f| {
        f.channel_texts(CHANNEL) == ["in the thread"]
    })
    .await;

    let form = format!(
        "token=x&team_id={FAKE_SLACK_TEAM}&channel_id={dm}&channel_name=directmessage&user_id=U2&user_name=ann&command=%2Fantler&text=status&trigger_id=9.9.9"
    );
    assert_eq!(client.post_form(&form, Signing::Valid).await.0, 200);
    fake.wait_for(WAIT, "the ephemeral status", |f| {
        f.messages().iter().any(|m| {
            m.ephemeral_to.as_deref() == Some("U2") && m.text.starts_with("Active thread:")
        })
    })
    .await;
    // Each conversation's messages are handled in order: once a later message in the DM and
    // one in the mention's thread are answered, a retry or the second event of the pair that
    // got through would have been answered before them.
    model.push(Reply::text("pong again"));
    let again = callback(
        "Ev5",
        json!({"type": "message", "channel_type": "im", "channel": dm, "user": "U2",
            "text": "ping again", "ts": "1700000005.000100"}),
    );
    assert_eq!(client.post_json(&again, Signing::Valid, None).await.0, 200);
    fake.wait_for(WAIT, "the later DM's answer", |f| {
        answers(f, &dm).contains(&"pong again".to_string())
    })
    .await;
    model.push(Reply::text("still in the thread"));
    let follow_up = callback(
        "Ev6",
        json!({"type": "message", "channel_type": "channel", "channel": CHANNEL, "user": "U3",
            "text": "and then?", "ts": "1700000006.000100", "thread_ts": ts}),
    );
    assert_eq!(
        client.post_json(&follow_up, Signing::Valid, None).await.0,
        200
    );
    fake.wait_for(WAIT, "the follow-up's answer", |f| {
        answers(f, CHANNEL).contains(&"still in the thread".to_string())
    })
    .await;
    assert_eq!(
        answers(&fake, &dm),
        ["pong", "pong again"],
        "retries were not answered"
    );
    assert_eq!(
        answers(&fake, CHANNEL),
        ["in the thread", "still in the thread"]
    );
    assert_eq!(model.requests().len(), 4);
    bot.stop().await;
}
