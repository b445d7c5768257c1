//! Scheduled tasks end to end on Telegram: the real daemon binary, the fake Bot API and the
//! scripted model. A person asks in a chat for "every Monday at 9"; the model calls
//! `schedule_task`; at Monday 09:00 Berlin time (the daemon's clock started just before it with
//! `ANTLER_CLOCK_START`) the slot runs once and its answer arrives in that chat once, under the
//! schedule's header, also across a SIGKILL mid-run; in a group it runs as the member who asked.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, FakeTelegram, Reply, group_chat, private_chat};
use serde_json::{Value, json};

use super::WAIT;
use crate::daemon::{Daemon, Setup};

const PROMPT: &str = "Remind the user to send the weekly report.";
const ANSWER: &str = "Time to send the weekly report!";
const CONFIRMED: &str = "Done: every Monday at 09:00 Berlin time.";
/// Monday 7 December 2026, 09:00 in Berlin (CET).
const SLOT: &str = "2026-12-07T08:00:00Z";

fn setup(fake: &FakeTelegram, model: &FakeOpenAi) -> Setup {
    let extra = format!(
        "sandbox:\n  provider: local\nchannels:\n  telegram:\n    enabled: true\n    bot_token: \"{}\"\n    api_url: {}\n    poll_timeout: 1\n    allowed_chats: [-100]\n",
        antler_test_support::FAKE_BOT_TOKEN,
        fake.api_url()
    );
    Setup::new(&model.base_url(), &extra)
}

/// The daemon with its clock started at `clock` (RFC 3339).
fn start_at(setup: &Setup, clock: &str) -> Daemon {
    Daemon::spawn(&setup.config_path, &[("ANTLER_CLOCK_START", clock)], None)
}

/// The model's side of "remind me every Monday at 9": the tool call, then the confirmation.
fn script_creation(model: &FakeOpenAi) {
    model.push(Reply::tool_call(
        "schedule_task",
        json!({
            "action": "create",
            "name": "Weekly report",
            "prompt": PROMPT,
            "when": {"cron": "0 9 * * MON"},
            "timezone": "Europe/Berlin",
        }),
    ));
    model.push(Reply::text(CONFIRMED));
}

/// Creates the schedule from a chat message, at 08:55 Berlin time, and checks what the tool
/// told the model and the daemon's next fire.
async fn create_in_chat(
    fake: &FakeTelegram,
    model: &FakeOpenAi,
    setup: &Setup,
    chat: Value,
    user: i64,
    text: &str,
) {
    let chat_id = chat["id"].as_i64().expect("chat id");
    script_creation(model);
    let daemon = start_at(setup, "2026-12-07T07:55:00Z");
    fake.send_text(chat, user, text);
    fake.wait_for(WAIT, "the confirmation", |f| {
        f.chat_texts(chat_id).iter().any(|t| t == CONFIRMED)
    })
    .await;
    let requests = model.requests();
    let tool_answer = requests[1].to_string();
    assert!(
        tool_answer.contains("Mon 2026-12-07 09:00 CET")
            && tool_answer.contains("Mon 2026-12-14 09:00 CET"),
        "the tool states the next fires in Berlin time: {tool_answer}"
    );
    let ready: Value = daemon
        .http
        .get(daemon.url("/readyz"))
        .send()
        .await
        .expect("readyz")
        .json()
        .await
        .expect("readyz json");
    assert_eq!(ready["scheduler"]["schedules"], 1, "{ready}");
    assert_eq!(ready["scheduler"]["next_fire"], SLOT, "{ready}");
    let mut daemon = daemon;
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(WAIT), Some(0), "a clean stop");
}

/// Bodies the bot sent or edited in `chat` that carry `text` as the final answer (not a
/// streaming frame, which ends with the cursor).
fn deliveries(fake: &FakeTelegram, chat: i64, text: &str) -> usize {
    ["sendMessage", "editMessageText"]
        .iter()
        .flat_map(|method| fake.calls_of(method))
        .filter(|call| call.body["chat_id"].as_i64() == Some(chat))
        .filter_map(|call| call.body["text"].as_str().map(str::to_string))
        .filter(|body| body.contains(text) && !body.ends_with('▉'))
        .count()
}

fn header_answer(fake: &FakeTelegram, chat: i64) -> bool {
    fake.chat_texts(chat)
        .iter()
        .any(|t| t.starts_with("⏰ Weekly report") && t.contains(ANSWER))
}

/// The human messages of a model request that carry `text`.
fn human_messages_with(request: &Value, text: &str) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(Value::to_string)
        .filter(|m| m.contains(text))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_monday_at_9_runs_once_and_answers_in_the_chat_once() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let setup = setup(&fake, &model);
    create_in_chat(
        &fake,
        &model,
        &setup,
        private_chat(42),
        42,
        "remind me every Monday at 9 to send the report",
    )
    .await;

    model.push(Reply::text(ANSWER));
    let daemon = start_at(&setup, "2026-12-07T07:59:57Z");
    fake.wait_for(WAIT, "the scheduled answer", |f| header_answer(f, 42))
        .await;
    // The chat's messages are answered in order: a later message answered proves the slot
    // was not answered again meanwhile.
    model.push(Reply::text("and the next one"));
    fake.send_text(private_chat(42), 42, "thanks");
    fake.wait_for(WAIT, "the next answer", |f| {
        f.chat_texts(42).iter().any(|t| t == "and the next one")
    })
    .await;
    assert_eq!(deliveries(&fake, 42, ANSWER), 1, "the answer arrived once");
    let texts = fake.chat_texts(42);
    let answer = texts.iter().find(|t| t.contains(ANSWER)).expect("answer");
    assert_eq!(answer, &format!("⏰ Weekly report\n\n{ANSWER}"));
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        4,
        "creation (2), the slot, the next message"
    );
    assert_eq!(human_messages_with(&requests[2], PROMPT).len(), 1);
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_run_still_answers_the_slot_once() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let setup = setup(&fake, &model);
    create_in_chat(
        &fake,
        &model,
        &setup,
        private_chat(42),
        42,
        "remind me every Monday at 9 to send the report",
    )
    .await;

    model.push(Reply::slow(["never", " finished"], Duration::from_secs(60)));
    let daemon = start_at(&setup, "2026-12-07T07:59:57Z");
    fake.wait_for(WAIT, "the slot's status message", |f| {
        f.chat_texts(42)
            .iter()
            .any(|t| t.starts_with("⏰ Weekly report"))
    })
    .await;
    let asked = || model.requests().len() == 3;
    fake.wait_for(WAIT, "the slot's model call", |_| asked())
        .await;
    daemon.signal("KILL");
    drop(daemon);

    model.push(Reply::text(ANSWER));
    let daemon = start_at(&setup, "2026-12-07T08:00:30Z");
    fake.wait_for(WAIT, "the scheduled answer", |f| header_answer(f, 42))
        .await;
    model.push(Reply::text("and the next one"));
    fake.send_text(private_chat(42), 42, "thanks");
    fake.wait_for(WAIT, "the next answer", |f| {
        f.chat_texts(42).iter().any(|t| t == "and the next one")
    })
    .await;
    assert_eq!(deliveries(&fake, 42, ANSWER), 1, "the answer arrived once");
    let statuses = fake
        .calls_of("sendMessage")
        .iter()
        .filter(|call| {
            call.body["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("⏰ Weekly report"))
        })
        .count();
    assert_eq!(statuses, 1, "the slot's status message was not sent twice");
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        5,
        "creation (2), the slot twice, the next message"
    );
    assert_eq!(
        human_messages_with(&requests[3], PROMPT).len(),
        1,
        "the re-run did not ask twice"
    );
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_schedule_in_a_group_runs_as_them_and_answers_in_the_group() {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let setup = setup(&fake, &model);
    create_in_chat(
        &fake,
        &model,
        &setup,
        group_chat(-100, false),
        7,
        "@AntlerBot remind us every Monday at 9 to send the report",
    )
    .await;

    model.push(Reply::text(ANSWER));
    let daemon = start_at(&setup, "2026-12-07T07:59:57Z");
    fake.wait_for(WAIT, "the scheduled answer", |f| header_answer(f, -100))
        .await;
    assert_eq!(deliveries(&fake, -100, ANSWER), 1);
    assert!(
        fake.chat_texts(7).is_empty(),
        "nothing went to the member privately"
    );
    let requests = model.requests();
    let asked = human_messages_with(&requests[2], PROMPT);
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains(&format!("[User7] {PROMPT}")),
        "the prompt is the member's words: {}",
        asked[0]
    );
    drop(daemon);
}
