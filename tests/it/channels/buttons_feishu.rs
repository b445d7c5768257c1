//! Feishu's buttons at the adapter: a card with buttons sent to the fake, the card action
//! callback pushed encrypted and signed to the webhook (forgeries refused alike), the card
//! patched to settle it, and a note as an ephemeral card (groups) or a reply mentioning the
//! clicker (direct chats).

use antler_channel::{ChannelConfig, ChatKey, Secret};
use antler_feishu::FeishuConfig;
use antler_test_support::{
    FAKE_FEISHU_APP_ID, FAKE_FEISHU_APP_SECRET, FAKE_FEISHU_ENCRYPT_KEY,
    FAKE_FEISHU_VERIFICATION_TOKEN, FakeFeishu, FeishuSigning, p2p_chat,
};
use serde_json::json;

use super::WAIT;
use super::buttons_support::{Collected, approval_buttons, serve_webhook};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_callbacks_patches_and_notes() {
    let fake = FakeFeishu::start().await;
    let config = FeishuConfig {
        enabled: true,
        app_id: Some(FAKE_FEISHU_APP_ID.into()),
        app_secret: Some(Secret::new(FAKE_FEISHU_APP_SECRET)),
        verification_token: Some(Secret::new(FAKE_FEISHU_VERIFICATION_TOKEN)),
        encrypt_key: Some(Secret::new(FAKE_FEISHU_ENCRYPT_KEY)),
        domain: fake.base_url(),
        ..FeishuConfig::default()
    };
    let connection = config.adapter().connect().await.expect("connected");
    let buttons = connection
        .parts
        .buttons
        .clone()
        .expect("feishu sends buttons");
    let sink = Collected::new();
    let addr = serve_webhook(connection.webhook.clone().expect("a webhook"), sink.clone()).await;
    fake.set_webhook(format!("http://{addr}/"));

    // A group conversation: the topic is the question's message; the card replies in it.
    let root = fake.said_without_event("oc_group1", "ou_alice", false, "deploy it", None);
    let chat = ChatKey::new("feishu", "oc_group1", Some(root.clone()));
    let sent = buttons
        .send_buttons(
            &chat,
            "# bash\n`make deploy`",
            &approval_buttons("r1"),
            None,
        )
        .await
        .expect("sent");
    let card = fake.message(&sent.platform_message_id).expect("posted");
    assert_eq!(card.msg_type, "interactive");
    assert_eq!(card.root_id.as_deref(), Some(root.as_str()));
    assert_eq!(card.text(), "**bash**\n`make deploy`");
    assert_eq!(card.content["config"]["update_multi"], true);
    assert_eq!(
        card.buttons(),
        [
            (
                "Approve".into(),
                json!({"antler": "ap:r1:a", "topic": root}),
                "primary".into()
            ),
            (
                "Approve for this conversation".into(),
                json!({"antler": "ap:r1:c", "topic": root}),
                "default".into()
            ),
            (
                "Deny".into(),
                json!({"antler": "ap:r1:d", "topic": root}),
                "danger".into()
            ),
        ]
    );

    // The callback: one click message in the request's conversation, answered 200 `{}`.
    let event_id = fake.click("ou_bob", &sent.platform_message_id, "antler", "ap:r1:d");
    let journalled = sink.wait_for(1).await;
    let click_message = &journalled[0];
    assert_eq!(click_message.chat_key(), chat);
    assert_eq!(click_message.user_id, "ou_bob");
    assert_eq!(
        click_message.platform_message_id,
        format!("click:{event_id}")
    );
    assert!(click_message.text.is_empty() && !click_message.is_direct);
    let click = click_message.click.clone().expect("a click");
    assert_eq!(click.value, "ap:r1:d");
    assert_eq!(click.message_id, sent.platform_message_id);
    assert!(click.answer_handle.starts_with("c-"), "the card token");
    fake.wait_for(WAIT, "the callback answered", |f| {
        f.delivered().iter().any(|(id, _)| *id == event_id)
    })
    .await;
    // Feishu's retry carries the same event id: the same journal key.
    fake.redeliver_last();
    let again = sink.wait_for(2).await;
    assert_eq!(
        again[1].platform_message_id,
        click_message.platform_message_id
    );

    // Forged callbacks get the one refusal every bad push gets; nothing is journalled.
    let (_, payload) = fake.delivered().last().cloned().expect("a delivered push");
    let sender = fake.sender();
    let body = sender.body(&payload, "forged");
    for signing in [FeishuSigning::Forged, FeishuSigning::Missing] {
        let (status, _) = sender.post(&body, signing).await;
        assert_eq!(status, 400, "{signing:?}");
    }
    assert_eq!(sink.messages().len(), 2);

    // A note in a group: an ephemeral card only the clicker sees.
    buttons
        .answer_click(&chat, "ou_bob", &click, None)
        .await
        .expect("no note");
    assert!(fake.ephemerals().is_empty());
    buttons
        .answer_click(
            &chat,
            "ou_bob",
            &click,
            Some("Only Alice (the requester) or an admin can decide"),
        )
        .await
        .expect("answered");
    let ephemerals = fake.ephemerals();
    assert_eq!(ephemerals.len(), 1);
    assert_eq!(
        (ephemerals[0].0.as_str(), ephemerals[0].1.as_str()),
        ("oc_group1", "ou_bob")
    );
    assert_eq!(
        ephemerals[0].2["elements"][0]["content"],
        "Only Alice (the requester) or an admin can decide"
    );

    // Settling patches the card: the decision, no buttons.
    buttons
        .settle_buttons(&chat, &sent.platform_message_id, "❌ Denied by Bob")
        .await
        .expect("settled");
    let settled = fake
        .message(&sent.platform_message_id)
        .expect("still there");
    assert_eq!(settled.text(), "❌ Denied by Bob");
    assert!(settled.buttons().is_empty());
    assert_eq!(settled.updates, 1);

    // A direct chat has no ephemeral cards: the note is a reply to the card mentioning them.
    let direct = ChatKey::new("feishu", p2p_chat("ou_carol"), None);
    let sent = buttons
        .send_buttons(&direct, "Run `ls`?", &approval_buttons("r2"), None)
        .await
        .expect("sent");
    fake.click("ou_carol", &sent.platform_message_id, "antler", "ap:r2:a");
    let journalled = sink.wait_for(3).await;
    assert_eq!(journalled[2].chat_key(), direct);
    assert!(journalled[2].is_direct);
    let click = journalled[2].click.clone().expect("a click");
    buttons
        .answer_click(
            &direct,
            "ou_carol",
            &click,
            Some("Already approved by Carol"),
        )
        .await
        .expect("answered");
    let reply = fake
        .bot_messages(&direct.chat_id)
        .into_iter()
        .find(|m| m.parent_id.as_deref() == Some(sent.platform_message_id.as_str()))
        .expect("a reply to the card");
    assert_eq!(
        reply.text(),
        "<at id=ou_carol></at> Already approved by Carol"
    );
    assert_eq!(
        fake.ephemerals().len(),
        1,
        "no ephemeral card in a direct chat"
    );
}
