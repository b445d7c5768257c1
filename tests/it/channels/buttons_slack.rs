//! Slack's buttons at the adapter: Block Kit sent to the fake, `block_actions` clicks through
//! Socket Mode and the signed webhook (forgeries refused), settling and answering a click.

use std::sync::Arc;

use antler_channel::{ChannelConfig, ChatKey, Connection, Secret, TransportContext};
use antler_slack::{SlackConfig, SlackMode};
use antler_test_support::{
    FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FakeSlack, Signing, SlackEventsClient,
};
use tokio_util::sync::CancellationToken;

use super::buttons_support::{Collected, approval_buttons, serve_webhook};

const SIGNING_SECRET: &str = "slack-signing-secret-for-buttons";

async fn connect(fake: &FakeSlack, mode: SlackMode) -> Connection {
    let config = SlackConfig {
        enabled: true,
        mode,
        bot_token: Some(Secret::new(FAKE_SLACK_BOT_TOKEN)),
        app_token: Some(Secret::new(FAKE_SLACK_APP_TOKEN)),
        signing_secret: Some(Secret::new(SIGNING_SECRET)),
        api_url: Some(fake.api_url()),
        ..SlackConfig::default()
    };
    config.adapter().connect().await.expect("connected")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_mode_buttons_clicks_settling_and_answers() {
    let fake = FakeSlack::start().await;
    fake.set_echo_bot_messages(false);
    let connection = connect(&fake, SlackMode::Socket).await;
    let buttons = connection
        .parts
        .buttons
        .clone()
        .expect("slack sends buttons");
    let sink = Collected::new();
    let stop = CancellationToken::new();
    let transport = connection.transport.clone().expect("socket transport");
    let run = {
        let context = TransportContext::new(sink.clone(), stop.clone(), Arc::new(|| {}));
        tokio::spawn(async move { transport.run(context).await })
    };

    // The request goes into the conversation's thread, the buttons under the text.
    let chat = ChatKey::new("slack", "C0BUTTON1", Some("1690000000.000100".into()));
    let sent = buttons
        .send_buttons(
            &chat,
            "**bash** wants to run `ls -la`",
            &approval_buttons("r1"),
            None,
        )
        .await
        .expect("sent");
    let posted = fake.calls_of("chat.postMessage");
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].params["thread_ts"], "1690000000.000100");
    assert_eq!(posted[0].params["text"], "*bash* wants to run `ls -la`");
    let message = fake
        .messages()
        .into_iter()
        .find(|m| m.ts == sent.platform_message_id)
        .expect("posted");
    assert_eq!(message.blocks[0]["type"], "section");
    assert_eq!(message.blocks[0]["text"]["type"], "mrkdwn");
    assert_eq!(
        message.buttons(),
        [
            ("Approve".into(), "ap:r1:a".into(), "primary".into()),
            (
                "Approve for this conversation".into(),
                "ap:r1:c".into(),
                String::new()
            ),
            ("Deny".into(), "ap:r1:d".into(), "danger".into()),
        ]
    );

    // A click arrives as an `interactive` envelope: one click message, acknowledged.
    let payload = fake.click("U0BOB", &sent.platform_message_id, "ap:r1:d");
    let journalled = sink.wait_for(1).await;
    let click_message = &journalled[0];
    assert_eq!(click_message.chat_key(), chat, "the request's conversation");
    assert_eq!(click_message.user_id, "U0BOB");
    assert!(click_message.text.is_empty() && !click_message.is_direct);
    let click = click_message.click.clone().expect("a click");
    assert_eq!(click.value, "ap:r1:d");
    assert_eq!(click.message_id, sent.platform_message_id);
    assert!(
        click.answer_handle.contains("/actions/"),
        "the response_url"
    );
    fake.wait_for(super::WAIT, "the click acknowledged", |f| {
        f.envelopes().iter().all(|e| e.acked_at.is_some())
    })
    .await;
    // A redelivered envelope carries the same click: the same journal key.
    fake.deliver_interaction(payload, 1);
    let again = sink.wait_for(2).await;
    assert_eq!(
        again[1].platform_message_id,
        click_message.platform_message_id
    );
    // Another click on the same button is another entry.
    fake.click("U0BOB", &sent.platform_message_id, "ap:r1:d");
    let third = sink.wait_for(3).await;
    assert_ne!(
        third[2].platform_message_id,
        click_message.platform_message_id
    );

    // Answering: nothing without a note, an ephemeral message to the clicker with one.
    buttons
        .answer_click(&chat, "U0BOB", &click, None)
        .await
        .expect("no note");
    assert!(fake.calls_of("chat.postEphemeral").is_empty());
    buttons
        .answer_click(
            &chat,
            "U0BOB",
            &click,
            Some("Only Alice (the requester) or an admin can decide"),
        )
        .await
        .expect("answered");
    let ephemeral = fake.calls_of("chat.postEphemeral");
    assert_eq!(ephemeral.len(), 1);
    assert_eq!(ephemeral[0].params["user"], "U0BOB");
    assert_eq!(ephemeral[0].params["channel"], "C0BUTTON1");
    assert_eq!(ephemeral[0].params["thread_ts"], "1690000000.000100");

    // Settling replaces the blocks: the decision, no buttons.
    buttons
        .settle_buttons(&chat, &sent.platform_message_id, "❌ Denied by **Bob**")
        .await
        .expect("settled");
    let settled = fake
        .messages()
        .into_iter()
        .find(|m| m.ts == sent.platform_message_id)
        .expect("still there");
    assert_eq!(settled.text, "❌ Denied by *Bob*");
    assert!(settled.buttons().is_empty(), "{settled:?}");
    assert_eq!(settled.blocks[0]["text"]["text"], "❌ Denied by *Bob*");

    stop.cancel();
    run.await.expect("joined").expect("stopped cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_mode_clicks_come_signed_as_a_payload_form_and_forgeries_are_refused() {
    let fake = FakeSlack::start().await;
    fake.set_echo_bot_messages(false);
    let connection = connect(&fake, SlackMode::Events).await;
    let buttons = connection
        .parts
        .buttons
        .clone()
        .expect("slack sends buttons");
    let sink = Collected::new();
    let addr = serve_webhook(connection.webhook.clone().expect("a webhook"), sink.clone()).await;
    let client = SlackEventsClient::new(format!("http://{addr}/"), SIGNING_SECRET);

    let dm = ChatKey::new("slack", "D0ALICE", None);
    let sent = buttons
        .send_buttons(&dm, "Run `make deploy`?", &approval_buttons("r2"), None)
        .await
        .expect("sent");
    let payload = fake.click_payload("U0ALICE", &sent.platform_message_id, "ap:r2:a");
    for forged in [
        Signing::Missing,
        Signing::WrongSecret,
        Signing::Aged(std::time::Duration::from_secs(600)),
    ] {
        let (status, _) = client.post_interaction(&payload, forged).await;
        assert_eq!(status, 401, "{forged:?}");
    }
    assert!(sink.messages().is_empty(), "nothing forged was journalled");
    let (status, body) = client.post_interaction(&payload, Signing::Valid).await;
    assert_eq!((status, body.as_str()), (200, ""));
    let journalled = sink.wait_for(1).await;
    assert_eq!(journalled.len(), 1);
    let message = &journalled[0];
    assert_eq!(message.chat_key(), dm);
    assert!(message.is_direct);
    assert_eq!(
        message.click.as_ref().map(|c| c.value.as_str()),
        Some("ap:r2:a")
    );
    // Events and the URL verification still work on the same webhook.
    let (status, challenge) = client
        .post_json(
            r#"{"type":"url_verification","challenge":"c-42"}"#,
            Signing::Valid,
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert!(challenge.contains("c-42"));
}
