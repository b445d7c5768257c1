//! Context before a mention on Telegram, which cannot fetch history: a mention that replies to
//! someone's message brings that message (or the part of it the person quoted) to the model as
//! the quoted block, once, with the author's name.

use antler_test_support::{Reply, group_chat};
use serde_json::json;

use super::WAIT;
use super::context_slack::{blocks, lines};
use super::group_support::user_texts;
use super::telegram::{has_text, setup_bot};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_mention_brings_the_message_it_replies_to_or_its_quoted_part() {
    let extra = "    allowed_chats: [-100]\n    allowed_users: [1, 2]\n";
    let (fake, model, _dir, _bot) = setup_bot(extra).await;
    let group = group_chat(-100, false);
    let said = "deploy on friday, then freeze until monday";
    let anns = fake.send_text(group.clone(), 1, said);
    let original = json!({"message_id": anns, "date": 1_700_000_000, "chat": group,
        "from": {"id": 1, "is_bot": false, "first_name": "Ann"}, "text": said});

    model.push(Reply::text("Yes, Friday."));
    fake.send_message(
        group.clone(),
        2,
        json!({"text": "@AntlerBot is this right?", "reply_to_message": original,
            "quote": {"text": "freeze until monday", "position": 24, "is_manual": true}}),
    );
    fake.wait_for(WAIT, "the answer", |f| has_text(f, -100, "Yes, Friday."))
        .await;
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "only the mention was answered");
    let found = blocks(&requests[0]);
    assert_eq!(found.len(), 1);
    assert_eq!(lines(&found[0]), ["Ann: freeze until monday"]);
    assert!(
        user_texts(&requests[0])
            .last()
            .is_some_and(|t| t.ends_with("[User2] is this right?")),
        "{:?}",
        user_texts(&requests[0])
    );

    // Without a quote, the whole message it replies to: the same conversation (a reply chain),
    // so the earlier quote stays and the whole message is added.
    model.push(Reply::text("Monday."));
    fake.send_message(
        group.clone(),
        2,
        json!({"text": "@AntlerBot and this?", "reply_to_message": original}),
    );
    fake.wait_for(WAIT, "the second answer", |f| has_text(f, -100, "Monday."))
        .await;
    let found = blocks(&model.requests()[1]);
    assert_eq!(found.len(), 2);
    assert_eq!(lines(&found[1]), [format!("Ann: {said}")]);

    // The same message again is not quoted twice.
    model.push(Reply::text("Still Monday."));
    fake.send_message(
        group.clone(),
        2,
        json!({"text": "@AntlerBot sure?", "reply_to_message": original}),
    );
    fake.wait_for(WAIT, "the third answer", |f| {
        has_text(f, -100, "Still Monday.")
    })
    .await;
    assert_eq!(blocks(&model.requests()[2]).len(), 2);
}
