//! Discord's buttons at the adapter: an action row sent to the fake, a click over the gateway
//! (INTERACTION_CREATE) journalled and answered with a deferred update, settling by an edit
//! without components, and a note as an ephemeral follow-up through the interaction token.

use std::sync::Arc;

use antler_channel::{ChannelConfig, ChatKey, Secret, TransportContext};
use antler_discord::DiscordConfig;
use antler_test_support::{FAKE_DISCORD_GUILD, FAKE_DISCORD_TOKEN, FakeDiscord};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::WAIT;
use super::buttons_support::{Collected, approval_buttons};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_clicks_deferred_updates_settling_and_followups() {
    let fake = FakeDiscord::start().await;
    fake.set_echo_bot_messages(false);
    fake.add_text_channel("300");
    fake.add_thread("301", "300");
    let config = DiscordConfig {
        enabled: true,
        bot_token: Some(Secret::new(FAKE_DISCORD_TOKEN)),
        api_url: Some(fake.api_url()),
        application_commands: false,
        ..DiscordConfig::default()
    };
    let connection = config.adapter().connect().await.expect("connected");
    let buttons = connection
        .parts
        .buttons
        .clone()
        .expect("discord sends buttons");
    let sink = Collected::new();
    let stop = CancellationToken::new();
    let (live_tx, mut live) = watch::channel(false);
    let transport = connection.transport.clone().expect("gateway transport");
    let run = {
        let context = TransportContext::new(
            sink.clone(),
            stop.clone(),
            Arc::new(move || {
                live_tx.send_replace(true);
            }),
        );
        tokio::spawn(async move { transport.run(context).await })
    };
    tokio::time::timeout(WAIT, live.wait_for(|ready| *ready))
        .await
        .expect("the gateway session is ready")
        .expect("live");

    // The request in a thread: content, one action row of three styled buttons.
    let chat = ChatKey::new("discord", "300", Some("301".into()));
    let sent = buttons
        .send_buttons(
            &chat,
            "**bash** wants to run `ls`",
            &approval_buttons("r1"),
            None,
        )
        .await
        .expect("sent");
    let message = fake
        .messages()
        .into_iter()
        .find(|m| m.id == sent.platform_message_id)
        .expect("posted");
    assert_eq!(message.channel, "301");
    assert_eq!(message.content, "**bash** wants to run `ls`");
    assert_eq!(
        message.buttons(),
        [
            ("Approve".into(), "ap:r1:a".into(), 1),
            ("Approve for this conversation".into(), "ap:r1:c".into(), 2),
            ("Deny".into(), "ap:r1:d".into(), 4),
        ]
    );

    // A click: one journalled click message in the thread's conversation, then a deferred
    // update (type 6) so Discord shows no failure.
    let interaction = fake.click("777", &sent.platform_message_id, "ap:r1:a");
    let journalled = sink.wait_for(1).await;
    let click_message = &journalled[0];
    assert_eq!(click_message.chat_key(), chat);
    assert_eq!(click_message.user_id, "777");
    assert_eq!(
        click_message.workspace_id.as_deref(),
        Some(FAKE_DISCORD_GUILD)
    );
    assert_eq!(
        click_message.platform_message_id,
        format!("ix:{interaction}")
    );
    assert!(click_message.text.is_empty() && !click_message.is_direct);
    let click = click_message.click.clone().expect("a click");
    assert_eq!(click.value, "ap:r1:a");
    assert_eq!(click.message_id, sent.platform_message_id);
    fake.wait_for(WAIT, "the deferred update", |f| {
        f.interaction_answers()
            .iter()
            .any(|(id, body)| *id == interaction && body["type"] == 6)
    })
    .await;
    // The same interaction again (a replayed dispatch): the same journal key.
    fake.redeliver_click(&interaction);
    let again = sink.wait_for(2).await;
    assert_eq!(
        again[1].platform_message_id,
        click_message.platform_message_id
    );

    // A note is an ephemeral follow-up through the token; no note, no request.
    buttons
        .answer_click(&chat, "777", &click, None)
        .await
        .expect("no note");
    assert!(fake.followups(&interaction).is_empty());
    buttons
        .answer_click(&chat, "777", &click, Some("Already approved by Alice"))
        .await
        .expect("answered");
    let followups = fake.followups(&interaction);
    assert_eq!(followups.len(), 1);
    assert_eq!(followups[0]["content"], "Already approved by Alice");
    assert_eq!(followups[0]["flags"], 64);

    // Settling edits the message: the decision, no components.
    buttons
        .settle_buttons(&chat, &sent.platform_message_id, "✅ Approved by Alice")
        .await
        .expect("settled");
    let settled = fake
        .messages()
        .into_iter()
        .find(|m| m.id == sent.platform_message_id)
        .expect("still there");
    assert_eq!(settled.content, "✅ Approved by Alice");
    assert!(settled.buttons().is_empty(), "{settled:?}");

    // In a DM the click is direct and has no topic.
    let dm = ChatKey::new("discord", fake.open_dm("778"), None);
    let sent = buttons
        .send_buttons(&dm, "Run `ls`?", &approval_buttons("r2"), None)
        .await
        .expect("sent to the DM");
    fake.click("778", &sent.platform_message_id, "ap:r2:d");
    let journalled = sink.wait_for(3).await;
    assert_eq!(journalled[2].chat_key(), dm);
    assert!(journalled[2].is_direct);
    assert_eq!(journalled[2].user_id, "778");

    stop.cancel();
    run.await.expect("joined").expect("stopped cleanly");
}
