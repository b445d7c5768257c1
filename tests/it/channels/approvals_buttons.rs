//! Approvals on Slack, Discord and Feishu, end to end against each platform's fake: a gated
//! `bash` call parks the run and the request shows its buttons in the conversation; a click
//! from someone who may not decide is refused and changes nothing; the requester's click
//! settles the request message and resumes the run, which runs the command once and answers
//! once; the same click delivered again changes nothing.

use std::path::Path;

use antler_test_support::{FakeDiscord, FakeFeishu, FakeOpenAi, FakeSlack, Reply};

use super::approvals_telegram::{ANSWER, gate_bash, runs, script};
use super::discord_driver::discord_section;
use super::feishu_driver::{feishu_section, webhook_url};
use super::slack_driver::slack_section;
use super::{Bot, WAIT, daemon_yaml};

const THANKS: &str = "You're welcome.";

/// A daemon on `channels` (the keys under `channels:`) with `bash` always gated and allowed on
/// the host sandbox.
fn yaml(dir: &Path, model: &FakeOpenAi, channels: &str) -> String {
    gate_bash(&daemon_yaml(dir, model, channels))
}

/// The request id in an Approve button's value (`ap:{id}:a`).
fn request_id(approve_value: &str) -> String {
    approve_value
        .strip_prefix("ap:")
        .and_then(|rest| rest.strip_suffix(":a"))
        .expect("an approve value")
        .to_string()
}

fn labels<T>(buttons: &[(String, T, impl Sized)]) -> Vec<&str> {
    buttons.iter().map(|(label, _, _)| label.as_str()).collect()
}

const LABELS: [&str; 3] = ["Approve", "Approve for this conversation", "Deny"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_a_bystander_is_refused_and_the_requesters_click_resumes_once() {
    const CHANNEL: &str = "C0APPROV1";
    const ANN: &str = "U0ANN0001";
    const BOB: &str = "U0BOB0001";
    let fake = FakeSlack::start().await;
    fake.set_echo_bot_messages(false);
    fake.add_user(ANN, "Ann", "Ann Example");
    fake.add_user(BOB, "Bob", "Bob Example");
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let section = slack_section(&fake, &format!("    allowed_channels: [{CHANNEL}]\n"));
    let bot = Bot::start(&yaml(dir.path(), &model, &section)).await;
    script(&model);
    let root = fake.user_says_in_channel(CHANNEL, ANN, "please run the script", true, None);

    // The request: one message in the conversation's thread with the three buttons.
    fake.wait_for(WAIT, "the request", |f| {
        f.messages().iter().any(|m| !m.buttons().is_empty())
    })
    .await;
    let request = fake
        .messages()
        .into_iter()
        .find(|m| !m.buttons().is_empty())
        .expect("the request");
    assert_eq!(request.thread_ts.as_deref(), Some(root.as_str()));
    let buttons = request.buttons();
    assert_eq!(labels(&buttons), LABELS);
    let id = request_id(&buttons[0].1);
    for part in ["bash", "wc -l", &id] {
        assert!(
            request.text.contains(part),
            "{part:?} missing from {}",
            request.text
        );
    }
    assert_eq!(runs(dir.path()), 0, "nothing ran before a decision");

    // Bob may not decide: an ephemeral refusal to him, the buttons stay.
    fake.click(BOB, &request.ts, &format!("ap:{id}:a"));
    fake.wait_for(WAIT, "Bob's refusal", |f| {
        f.messages()
            .iter()
            .any(|m| m.ephemeral_to.as_deref() == Some(BOB))
    })
    .await;
    let refusal = fake
        .messages()
        .into_iter()
        .find(|m| m.ephemeral_to.as_deref() == Some(BOB))
        .expect("refusal");
    assert!(
        refusal.text.to_lowercase().contains("only"),
        "{}",
        refusal.text
    );
    let unchanged = fake
        .messages()
        .into_iter()
        .find(|m| m.ts == request.ts)
        .expect("request");
    assert_eq!(unchanged.buttons().len(), 3, "nothing changed");

    // Ann approves: the request settled, the command run once, the answer delivered once.
    let approval = fake.click(ANN, &request.ts, &format!("ap:{id}:a"));
    fake.wait_for(WAIT, "the resumed answer", |f| {
        f.channel_texts(CHANNEL).iter().any(|t| t == ANSWER)
    })
    .await;
    let settled = fake
        .messages()
        .into_iter()
        .find(|m| m.ts == request.ts)
        .expect("request");
    assert!(settled.buttons().is_empty(), "buttons gone: {settled:?}");
    assert!(
        settled.text.contains("✅ Approved by Ann"),
        "{}",
        settled.text
    );
    assert_eq!(runs(dir.path()), 1);

    // The same click again (Slack's redelivery) changes nothing.
    fake.deliver_interaction(approval, 1);
    model.push(Reply::text(THANKS));
    fake.user_says_in_channel(CHANNEL, ANN, "thanks", true, Some(&root));
    fake.wait_for(WAIT, "the next answer", |f| {
        f.channel_texts(CHANNEL).iter().any(|t| t == THANKS)
    })
    .await;
    let answers = fake
        .channel_texts(CHANNEL)
        .iter()
        .filter(|t| *t == ANSWER)
        .count();
    assert_eq!(answers, 1, "answered once");
    assert_eq!(runs(dir.path()), 1, "ran once");
    let settles = fake
        .calls_of("chat.update")
        .iter()
        .filter(|call| {
            call.params["ts"] == request.ts.as_str() && call.params.get("blocks").is_some()
        })
        .count();
    assert_eq!(settles, 1, "the request was settled once");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_a_bystander_is_refused_and_the_requesters_click_resumes_once() {
    const CHANNEL: &str = "400000000000000077";
    const ANN: &str = "300000000000000001";
    const BOB: &str = "300000000000000002";
    let fake = FakeDiscord::start().await;
    fake.add_text_channel(CHANNEL);
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let section = discord_section(&fake, &format!("    allowed_channels: [\"{CHANNEL}\"]\n"));
    let bot = Bot::start(&yaml(dir.path(), &model, &section)).await;
    script(&model);
    fake.user_says_in_channel(CHANNEL, ANN, "please run the script", true);

    fake.wait_for(WAIT, "the request", |f| {
        f.messages().iter().any(|m| !m.buttons().is_empty())
    })
    .await;
    let request = fake
        .messages()
        .into_iter()
        .find(|m| !m.buttons().is_empty())
        .expect("the request");
    let buttons = request.buttons();
    assert_eq!(labels(&buttons), LABELS);
    assert_eq!(
        buttons
            .iter()
            .map(|(_, _, style)| *style)
            .collect::<Vec<_>>(),
        [1, 2, 4]
    );
    let id = request_id(&buttons[0].1);
    for part in ["bash", "wc -l", &id] {
        assert!(
            request.content.contains(part),
            "{part:?} missing from {}",
            request.content
        );
    }
    assert_eq!(runs(dir.path()), 0);

    // Bob: an ephemeral follow-up refusing him, the components stay.
    let refused = fake.click(BOB, &request.id, &format!("ap:{id}:a"));
    fake.wait_for(WAIT, "Bob's refusal", |f| !f.followups(&refused).is_empty())
        .await;
    let refusal = &fake.followups(&refused)[0];
    assert_eq!(refusal["flags"], 64);
    let note = refusal["content"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(note.contains("only"), "{note}");
    let unchanged = fake
        .messages()
        .into_iter()
        .find(|m| m.id == request.id)
        .expect("request");
    assert_eq!(unchanged.buttons().len(), 3);

    // Ann approves: the message edited without components, the run resumed once.
    let approved = fake.click(ANN, &request.id, &format!("ap:{id}:a"));
    fake.wait_for(WAIT, "the resumed answer", |f| {
        f.channel_texts(&request.channel)
            .iter()
            .any(|t| t == ANSWER)
    })
    .await;
    assert!(
        fake.interaction_answers()
            .iter()
            .any(|(interaction, body)| *interaction == approved && body["type"] == 6),
        "a deferred update"
    );
    let settled = fake
        .messages()
        .into_iter()
        .find(|m| m.id == request.id)
        .expect("request");
    assert!(settled.buttons().is_empty(), "{settled:?}");
    assert!(
        settled
            .content
            .contains("✅ Approved by User 300000000000000001"),
        "{}",
        settled.content
    );
    assert_eq!(runs(dir.path()), 1);

    // The same interaction replayed changes nothing.
    fake.redeliver_click(&approved);
    model.push(Reply::text(THANKS));
    fake.user_says_in_channel(&request.channel, ANN, "thanks", true);
    fake.wait_for(WAIT, "the next answer", |f| {
        f.channel_texts(&request.channel)
            .iter()
            .any(|t| t == THANKS)
    })
    .await;
    let answers = fake
        .channel_texts(&request.channel)
        .iter()
        .filter(|t| *t == ANSWER)
        .count();
    assert_eq!(answers, 1, "answered once");
    assert_eq!(runs(dir.path()), 1, "ran once");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feishu_a_bystander_is_refused_and_the_requesters_click_resumes_once() {
    const GROUP: &str = "oc_group0077";
    const ANN: &str = "ou_user0001";
    const BOB: &str = "ou_user0002";
    let fake = FakeFeishu::start().await;
    fake.add_user(ANN, "Ann");
    fake.add_user(BOB, "Bob");
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let section = feishu_section(&fake, &format!("    allowed_chats: [{GROUP}]\n"));
    let bot = Bot::start(&yaml(dir.path(), &model, &section)).await;
    fake.set_webhook(webhook_url(bot.addr));
    script(&model);
    let root = fake.user_says_in_group(GROUP, ANN, "please run the script", true, None);

    fake.wait_for(WAIT, "the request card", |f| {
        f.bot_messages(GROUP)
            .iter()
            .any(|m| !m.buttons().is_empty())
    })
    .await;
    let card = fake
        .bot_messages(GROUP)
        .into_iter()
        .find(|m| !m.buttons().is_empty())
        .expect("the request");
    assert_eq!(
        card.root_id.as_deref(),
        Some(root.as_str()),
        "in the question's topic"
    );
    let buttons = card.buttons();
    assert_eq!(labels(&buttons), LABELS);
    let approve = buttons[0].1["antler"]
        .as_str()
        .expect("a value")
        .to_string();
    let id = request_id(&approve);
    for part in ["bash", "wc -l", &id] {
        assert!(
            card.text().contains(part),
            "{part:?} missing from {}",
            card.text()
        );
    }
    assert_eq!(runs(dir.path()), 0);

    // Bob: an ephemeral card refusing him, the card unchanged.
    fake.click(BOB, &card.message_id, "antler", &approve);
    fake.wait_for(WAIT, "Bob's refusal", |f| {
        f.ephemerals().iter().any(|(_, open_id, _)| open_id == BOB)
    })
    .await;
    let (chat, _, refusal) = fake.ephemerals().into_iter().next().expect("refusal");
    assert_eq!(chat, GROUP);
    let note = refusal["elements"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(note.contains("only"), "{note}");
    assert_eq!(
        fake.message(&card.message_id)
            .expect("card")
            .buttons()
            .len(),
        3
    );

    // Ann approves: the card patched without buttons, the run resumed once.
    fake.click(ANN, &card.message_id, "antler", &approve);
    fake.wait_for(WAIT, "the resumed answer", |f| {
        f.chat_texts(GROUP).iter().any(|t| t == ANSWER)
    })
    .await;
    let settled = fake.message(&card.message_id).expect("card");
    assert!(settled.buttons().is_empty(), "{settled:?}");
    assert!(
        settled.text().contains("✅ Approved by Ann"),
        "{}",
        settled.text()
    );
    assert_eq!(runs(dir.path()), 1);

    // Feishu's retry of the same callback changes nothing.
    fake.redeliver_last();
    model.push(Reply::text(THANKS));
    fake.user_says_in_group(GROUP, ANN, "thanks", true, Some(&root));
    fake.wait_for(WAIT, "the next answer", |f| {
        f.chat_texts(GROUP).iter().any(|t| t == THANKS)
    })
    .await;
    let answers = fake
        .chat_texts(GROUP)
        .iter()
        .filter(|t| *t == ANSWER)
        .count();
    assert_eq!(answers, 1, "answered once");
    assert_eq!(runs(dir.path()), 1, "ran once");
    bot.stop().await;
}
