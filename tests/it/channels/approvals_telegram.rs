//! Approvals in a Telegram chat, end to end: a gated `bash` call parks the run, the request is
//! posted with an inline keyboard, clicks (`callback_query`) and typed `/approve` `/deny`
//! decide it, and the resumed run answers in the chat once, across redeliveries and a restart.

use std::path::Path;

use antler_test_support::{FakeOpenAi, FakeTelegram, Reply, group_chat, private_chat};
use serde_json::{Value, json};

use super::telegram::has_text;
use super::{Bot, WAIT, config_yaml};

const GROUP: i64 = -100_777;
pub(crate) const COMMAND: &str =
    "echo ran >> /mnt/user-data/workspace/runs.txt; wc -l < /mnt/user-data/workspace/runs.txt";
pub(crate) const ANSWER: &str = "The command ran.";

/// Telegram against the fakes, `bash` always gated and allowed on the host sandbox.
fn yaml(dir: &Path, fake: &FakeTelegram, model: &FakeOpenAi) -> String {
    gate_bash(&config_yaml(
        dir,
        fake,
        model,
        &format!("    allowed_chats: [\"{GROUP}\"]\n"),
    ))
}

/// A daemon config (`daemon_yaml`'s) with `bash` always needing approval and allowed to run on
/// the host sandbox: every platform's approval tests use it.
pub(crate) fn gate_bash(yaml: &str) -> String {
    yaml.replace(
        "sandbox:\n  provider: local\n",
        "sandbox:\n  provider: local\n  allow_host_bash: true\napprovals:\n  tools: [bash]\n",
    )
}

/// The model asks for [`COMMAND`] (saying so first), then answers [`ANSWER`].
pub(crate) fn script(model: &FakeOpenAi) {
    model
        .push(Reply::tool_call("bash", json!({"command": COMMAND})).with_text("Let me run it."))
        .push(Reply::text(ANSWER));
}

/// The message with the request's keyboard in `chat`, once it is there, and the request id.
async fn posted_request(fake: &FakeTelegram, chat: i64) -> (i64, String) {
    fake.wait_for(WAIT, "the approval request", |f| {
        f.last_with_keyboard(chat).is_some()
    })
    .await;
    let message_id = fake.last_with_keyboard(chat).expect("a keyboard");
    let buttons = fake.buttons_of(chat, message_id);
    let id = buttons[0]
        .1
        .strip_prefix("ap:")
        .and_then(|rest| rest.strip_suffix(":a"))
        .expect("an approve value")
        .to_string();
    (message_id, id)
}

/// How many times the command ran: the lines of the file it appends to, wherever the thread's
/// workspace is under the data dir.
pub(crate) fn runs(dir: &Path) -> usize {
    fn find(dir: &Path) -> Option<std::path::PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if let Some(found) = find(&path) {
                    return Some(found);
                }
            } else if path.file_name().is_some_and(|name| name == "runs.txt") {
                return Some(path);
            }
        }
        None
    }
    find(dir).map_or(0, |file| {
        std::fs::read_to_string(file)
            .expect("runs.txt")
            .lines()
            .count()
    })
}

/// The tool results the model was shown in its last request.
pub(crate) fn tool_results(model: &FakeOpenAi) -> Vec<String> {
    let requests = model.requests();
    let Some(last) = requests.last() else {
        return Vec::new();
    };
    last["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn count_text(fake: &FakeTelegram, chat: i64, text: &str) -> usize {
    fake.chat_texts(chat).iter().filter(|t| *t == text).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_request_refuses_a_bystander_and_resumes_once_on_the_requesters_click() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&yaml(dir.path(), &fake, &model)).await;
    script(&model);
    fake.send_text(
        group_chat(GROUP, false),
        42,
        "@AntlerBot please run the script",
    );
    let (request_message, id) = posted_request(&fake, GROUP).await;

    // One message: what, why, who, the id, and the three buttons.
    let text = fake.text_of(GROUP, request_message).expect("request text");
    for part in ["bash", "wc -l", "always needs approval", "User42", &id] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
    let buttons = fake.buttons_of(GROUP, request_message);
    let labels: Vec<&str> = buttons.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(labels, ["Approve", "Approve for this conversation", "Deny"]);
    let values: Vec<&str> = buttons.iter().map(|(_, value)| value.as_str()).collect();
    assert_eq!(
        values,
        [
            format!("ap:{id}:a"),
            format!("ap:{id}:c"),
            format!("ap:{id}:d")
        ]
    );
    let with_keyboard = fake
        .calls_of("sendMessage")
        .iter()
        .filter(|call| call.body.get("reply_markup").is_some())
        .count();
    assert_eq!(with_keyboard, 1, "the request is one platform send");
    assert!(
        fake.chat_texts(GROUP).iter().any(|t| t == "Let me run it."),
        "what the run said before parking is delivered: {:?}",
        fake.chat_texts(GROUP)
    );
    assert_eq!(runs(dir.path()), 0, "nothing ran before a decision");
    let polled = fake.calls_of("getUpdates");
    let asked = &polled.last().expect("a poll").body["allowed_updates"];
    assert_eq!(
        *asked,
        json!(["message", "callback_query"]),
        "clicks are asked for"
    );

    // A bystander's click is answered with a refusal and changes nothing.
    let refused = fake.click(GROUP, 43, request_message, &format!("ap:{id}:a"));
    fake.wait_for(WAIT, "the bystander's answer", |f| {
        f.answered_clicks()
            .iter()
            .any(|(query, _)| *query == refused)
    })
    .await;
    let (_, note) = fake
        .answered_clicks()
        .into_iter()
        .find(|(query, _)| *query == refused)
        .expect("answered");
    let note = note.expect("a refusal note");
    assert!(note.to_lowercase().contains("only"), "{note}");
    assert!(fake.keyboard_of(GROUP, request_message).is_some());

    // The requester's click: acknowledged, the request settled, the command run once, the
    // answer delivered once.
    let approved = fake.click(GROUP, 42, request_message, &format!("ap:{id}:a"));
    fake.wait_for(WAIT, "the resumed answer", |f| has_text(f, GROUP, ANSWER))
        .await;
    assert!(
        fake.answered_clicks().contains(&(approved.clone(), None)),
        "{:?}",
        fake.answered_clicks()
    );
    assert_eq!(
        fake.keyboard_of(GROUP, request_message),
        None,
        "buttons gone"
    );
    let settled = fake.text_of(GROUP, request_message).expect("settled text");
    assert!(settled.contains("✅ Approved by User42"), "{settled}");
    assert_eq!(runs(dir.path()), 1);
    assert!(
        tool_results(&model)
            .iter()
            .any(|result| result.trim() == "1"),
        "the model read the command's output: {:?}",
        tool_results(&model)
    );

    // The same click delivered again changes nothing: a later message's answer comes after
    // anything it could have started.
    fake.redeliver_last();
    model.push(Reply::text("You're welcome."));
    fake.send_text(group_chat(GROUP, false), 42, "@AntlerBot thanks");
    fake.wait_for(WAIT, "the next answer", |f| {
        has_text(f, GROUP, "You're welcome.")
    })
    .await;
    assert_eq!(count_text(&fake, GROUP, ANSWER), 1, "answered once");
    assert_eq!(runs(dir.path()), 1, "ran once");
    let settle_edits = fake
        .calls_of("editMessageText")
        .iter()
        .filter(|call| call.body["message_id"] == json!(request_message))
        .count();
    assert_eq!(settle_edits, 1, "the request was edited once");
    assert_eq!(model.requests().len(), 3, "park, resume, the next message");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_deny_and_approve_decide_without_the_buttons() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bot = Bot::start(&yaml(dir.path(), &fake, &model)).await;
    script(&model);
    fake.send_text(private_chat(42), 42, "run the script");
    let (request_message, id) = posted_request(&fake, 42).await;

    fake.send_text(private_chat(42), 42, "/approve");
    fake.wait_for(WAIT, "the usage", |f| {
        f.chat_texts(42)
            .iter()
            .any(|t| t.starts_with("Usage: /approve ID"))
    })
    .await;
    fake.send_text(private_chat(42), 42, "/approve nosuchid");
    fake.wait_for(WAIT, "the unknown id's answer", |f| {
        f.chat_texts(42).iter().any(|t| t.contains("nosuchid"))
    })
    .await;

    fake.send_text(private_chat(42), 42, &format!("/deny {id} not on a Friday"));
    fake.wait_for(WAIT, "the answer after the denial", |f| {
        has_text(f, 42, ANSWER)
    })
    .await;
    let settled = fake.text_of(42, request_message).expect("settled");
    assert!(
        settled.contains("❌ Denied by User42: not on a Friday"),
        "{settled}"
    );
    assert_eq!(fake.keyboard_of(42, request_message), None);
    assert_eq!(runs(dir.path()), 0, "a denied call never runs");
    let denial = tool_results(&model).join("\n");
    assert!(
        denial.contains("Denied") && denial.contains("not on a Friday"),
        "the model read the denial: {denial}"
    );

    // Deciding again is answered, and changes nothing.
    fake.send_text(private_chat(42), 42, &format!("/approve {id}"));
    fake.wait_for(WAIT, "the repeat's answer", |f| {
        f.chat_texts(42)
            .iter()
            .any(|t| t.starts_with("Already decided"))
    })
    .await;
    assert_eq!(count_text(&fake, 42, ANSWER), 1);
    assert_eq!(model.requests().len(), 2);

    // A second request, approved by typing.
    model
        .push(Reply::tool_call("bash", json!({"command": COMMAND})))
        .push(Reply::text("Ran it this time."));
    fake.send_text(private_chat(42), 42, "please try again");
    fake.wait_for(WAIT, "the second request", |f| {
        f.last_with_keyboard(42)
            .is_some_and(|message| message != request_message)
    })
    .await;
    let (second, second_id) = posted_request(&fake, 42).await;
    assert_ne!(second_id, id);
    fake.send_text(private_chat(42), 42, &format!("/approve {second_id}"));
    fake.wait_for(WAIT, "the approved answer", |f| {
        has_text(f, 42, "Ran it this time.")
    })
    .await;
    let settled = fake.text_of(42, second).expect("settled");
    assert!(settled.contains("✅ Approved by User42"), "{settled}");
    assert_eq!(runs(dir.path()), 1, "the approved call ran once");
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_the_request_and_the_click_resumes_once() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = yaml(dir.path(), &fake, &model);
    let bot = Bot::start(&yaml).await;
    script(&model);
    fake.send_text(private_chat(42), 42, "run the script");
    let (request_message, id) = posted_request(&fake, 42).await;
    bot.stop().await;

    let bot = Bot::start(&yaml).await;
    fake.click(42, 42, request_message, &format!("ap:{id}:c"));
    fake.wait_for(WAIT, "the resumed answer", |f| has_text(f, 42, ANSWER))
        .await;
    let settled = fake.text_of(42, request_message).expect("settled");
    assert!(
        settled.contains("✅ Approved for this conversation by User42"),
        "{settled}"
    );
    // Redelivered after another restart: nothing more.
    bot.stop().await;
    let bot = Bot::start(&yaml).await;
    fake.redeliver_last();
    model.push(Reply::text("Next."));
    fake.send_text(private_chat(42), 42, "next");
    fake.wait_for(WAIT, "the next answer", |f| has_text(f, 42, "Next."))
        .await;
    assert_eq!(runs(dir.path()), 1, "ran once");
    assert_eq!(count_text(&fake, 42, ANSWER), 1, "answered once");
    let with_keyboard: Vec<Value> = fake
        .calls_of("sendMessage")
        .into_iter()
        .filter(|call| call.body.get("reply_markup").is_some())
        .map(|call| call.body)
        .collect();
    assert_eq!(with_keyboard.len(), 1, "posted once: {with_keyboard:?}");
    bot.stop().await;
}
