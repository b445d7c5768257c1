//! Two daemons (real binaries) on one PostgreSQL database serving one Telegram bot in webhook
//! mode: every update reaches both, and every message is answered exactly once, also when one
//! daemon is SIGKILLed in the middle of the burst (the survivor finishes its planned replies)
//! or paused past its lease and resumed (it writes and sends nothing more). Skipped (saying
//! why) without `ANTLER_TEST_DATABASE_URL`, failed instead under `ANTLER_REQUIRE_POSTGRES=1`.

use std::time::{Duration, Instant};

use antler_test_support::bench::{answer_for, echo_model};
use antler_test_support::postgres::{TestDatabase, fresh_database};
use antler_test_support::{FAKE_BOT_TOKEN, FakeTelegram, private_chat};
use serde_json::Value;

use crate::daemon::{Daemon, Setup};

/// Twice this is the failover the issue allows; the shortest lease the config accepts.
const LEASE_SECONDS: u64 = 3;
const WAIT: Duration = Duration::from_secs(120);
const SECRET: &str = "s3cret_token";

fn setup(fake: &FakeTelegram, model_url: &str, name: &str) -> Setup {
    let extra = format!(
        "store:\n  backend: postgres\n  postgres:\n    url: $ANTLER_DATABASE_URL\n    pool_size: 4\n\
         cluster:\n  instance_id: {name}\n  lease_seconds: {LEASE_SECONDS}\n\
         channels:\n  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    mode: webhook\n    webhook_url: https://bot.example.test/channels/telegram/webhook\n    webhook_secret: {SECRET}\n",
        api = fake.api_url(),
    );
    Setup::new(model_url, &extra)
}

async fn start(setup: &Setup, database: &TestDatabase) -> Daemon {
    let daemon = Daemon::spawn(
        &setup.config_path,
        &[("ANTLER_DATABASE_URL", database.url.as_str())],
        None,
    );
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = daemon.readyz().await;
        if ready["channels"]["telegram"]["state"] == "running" {
            return daemon;
        }
        assert!(Instant::now() < deadline, "telegram never ran: {ready}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Posts `update` to the daemon's webhook as Telegram does; the status code.
async fn post(daemon: &Daemon, update: &Value) -> u16 {
    daemon
        .http
        .post(daemon.url("/channels/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(update)
        .send()
        .await
        .expect("webhook post")
        .status()
        .as_u16()
}

fn marker(chat: i64, turn: usize) -> String {
    format!("q{chat}x{turn}")
}

/// How often each of `markers`' answers shows, whole and final, in its chat (the texts as last
/// edited; a status message still streaming it ends in the cursor).
fn answers(fake: &FakeTelegram, markers: &[(i64, String)]) -> Vec<usize> {
    markers
        .iter()
        .map(|(chat, marker)| {
            let answer = answer_for(marker);
            fake.chat_texts(*chat)
                .iter()
                .filter(|text| text.trim() == answer)
                .count()
        })
        .collect()
}

async fn every_update_on_both_daemons(kill_midway: bool) {
    let Some(database) = fresh_database() else {
        return;
    };
    let fake = FakeTelegram::start().await;
    let model = echo_model(Duration::from_millis(200)).await;
    let (setup_a, setup_b) = (
        setup(&fake, &model.base_url(), "a"),
        setup(&fake, &model.base_url(), "b"),
    );
    let a = start(&setup_a, &database).await;
    let b = start(&setup_b, &database).await;
    let (chats, turns) = (6, 5);
    let mut markers = Vec::new();
    let mut a_alive = true;
    for idx in 0..chats * turns {
        let chat = 100 + (idx % chats) as i64;
        let marker = marker(chat, idx / chats);
        fake.send_text(private_chat(chat), chat, &format!("question {marker}"));
        let update = fake.last_update().expect("update");
        markers.push((chat, marker));
        if kill_midway && idx == chats * turns / 2 {
            a.signal("KILL");
            a_alive = false;
        }
        // Spread over both, and every update delivered again to the other one.
        let (first, second) = if idx % 2 == 0 { (&a, &b) } else { (&b, &a) };
        for daemon in [first, second] {
            // Once a is dead, the load balancer sends everything to b.
            let target = if !a_alive && std::ptr::eq(daemon, &a) {
                &b
            } else {
                daemon
            };
            assert_eq!(post(target, &update).await, 200);
        }
    }
    let deadline = Instant::now() + WAIT;
    while answers(&fake, &markers).contains(&0) {
        assert!(
            Instant::now() < deadline,
            "unanswered: {:?}",
            markers
                .iter()
                .zip(answers(&fake, &markers))
                .filter(|(_, n)| *n == 0)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counts = answers(&fake, &markers);
    assert!(
        counts.iter().all(|n| *n == 1),
        "answered more than once: {:?}",
        markers
            .iter()
            .zip(&counts)
            .filter(|(_, n)| **n > 1)
            .collect::<Vec<_>>()
    );
    if a_alive {
        a.signal("TERM");
    }
    b.signal("TERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_answer_every_webhook_update_once() {
    every_update_on_both_daemons(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_burst_loses_and_doubles_nothing() {
    every_update_on_both_daemons(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_paused_past_its_lease_writes_nothing_when_resumed() {
    let Some(database) = fresh_database() else {
        return;
    };
    let fake = FakeTelegram::start().await;
    // Long enough that the first daemon is mid-answer when it is paused.
    let model = echo_model(Duration::from_secs(4)).await;
    let (setup_a, setup_b) = (
        setup(&fake, &model.base_url(), "a"),
        setup(&fake, &model.base_url(), "b"),
    );
    let a = start(&setup_a, &database).await;
    let b = start(&setup_b, &database).await;
    let chat = 200;
    let first = marker(chat, 0);
    fake.send_text(private_chat(chat), chat, &format!("question {first}"));
    let update = fake.last_update().expect("update");
    assert_eq!(post(&a, &update).await, 200);
    let deadline = Instant::now() + WAIT;
    while model.first_call(&first).is_none() {
        assert!(Instant::now() < deadline, "a never asked the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.signal("STOP");
    let paused = Instant::now();
    // b takes the chat over once a's claim expires and answers in a's status message.
    let done = [(chat, first.clone())];
    while answers(&fake, &done) != [1] {
        assert!(Instant::now() < deadline, "b never finished the answer");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        paused.elapsed() < Duration::from_secs(2 * LEASE_SECONDS) + Duration::from_secs(10),
        "taken over in {:?}",
        paused.elapsed()
    );
    let texts_before = fake.chat_texts(chat);
    a.signal("CONT");
    // A later message of the chat, sent to the resumed daemon, is answered after whatever a
    // still had in hand: from then on a's stale turn can no longer touch the chat.
    let second = marker(chat, 1);
    fake.send_text(private_chat(chat), chat, &format!("question {second}"));
    let update = fake.last_update().expect("update");
    assert_eq!(post(&a, &update).await, 200);
    let both = [(chat, first.clone()), (chat, second)];
    while answers(&fake, &both) != [1, 1] {
        assert!(
            Instant::now() < deadline,
            "the later message was not answered once"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let texts = fake.chat_texts(chat);
    assert_eq!(
        texts[..texts_before.len()],
        texts_before[..],
        "the resumed daemon changed no message of b's answer"
    );
    let statuses = fake
        .calls_of("sendMessage")
        .iter()
        .filter(|call| call.body["chat_id"] == chat && call.body["text"] == "Working on it…")
        .count();
    assert_eq!(statuses, 2, "one status message per message");
    a.signal("TERM");
    b.signal("TERM");
}
