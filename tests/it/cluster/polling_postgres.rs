//! Two daemons on one PostgreSQL database and one shared data dir, one bot token in polling
//! mode: only one polls at any moment (the fake answers a concurrent `getUpdates` with 409 and
//! counts it), and when the poller is SIGKILLed the other polls within 2 × `lease_seconds` and
//! answers the next message. Prints the failover time (kill → first reply by the survivor).

use std::path::Path;
use std::time::{Duration, Instant};

use antler_test_support::postgres::{TestDatabase, fresh_database};
use antler_test_support::{FAKE_BOT_TOKEN, FakeOpenAi, FakeTelegram, Reply, private_chat};
use serde_json::Value;

use crate::daemon::{Daemon, Setup};

const WAIT: Duration = Duration::from_secs(60);
const LEASE_SECONDS: u64 = 3;

fn config(fake: &FakeTelegram, instance: &str) -> String {
    format!(
        "store:\n  backend: postgres\n  postgres:\n    url: $ANTLER_DATABASE_URL\n    pool_size: 4\n\
         cluster:\n  instance_id: {instance}\n  lease_seconds: {LEASE_SECONDS}\n\
         channels:\n  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n    allowed_users: [1]\n",
        api = fake.api_url()
    )
}

fn start(config: &Path, database: &TestDatabase) -> Daemon {
    Daemon::spawn(
        config,
        &[("ANTLER_DATABASE_URL", database.url.as_str())],
        None,
    )
}

fn telegram_state(ready: &Value) -> String {
    ready["channels"]["telegram"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn answers(telegram: &FakeTelegram, text: &str) -> usize {
    telegram.chat_texts(1).iter().filter(|t| *t == text).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_poll_one_bot_one_at_a_time_and_the_survivor_takes_over() {
    let Some(database) = fresh_database() else {
        return;
    };
    let telegram = FakeTelegram::start().await;
    telegram.refuse_concurrent_polls();
    let model = FakeOpenAi::start().await;
    model.push(Reply::text("first answer"));
    model.push(Reply::text("answer after the failover"));
    let setup = Setup::new(&model.base_url(), &config(&telegram, "a"));
    // b shares a's data dir, as instances on one shared volume do.
    let text = std::fs::read_to_string(&setup.config_path).expect("config");
    let config_b = setup.dir.path().join("config-b.yaml");
    std::fs::write(&config_b, text.replace("instance_id: a", "instance_id: b")).expect("write");
    let daemons = [
        start(&setup.config_path, &database),
        start(&config_b, &database),
    ];

    // One runs the transport, the other stands by; both list both instances.
    let deadline = Instant::now() + WAIT;
    let poller = loop {
        let mut states = Vec::new();
        for daemon in &daemons {
            states.push(telegram_state(&daemon.readyz().await));
        }
        match (states[0].as_str(), states[1].as_str()) {
            ("running", "standby") => break 0,
            ("standby", "running") => break 1,
            _ => assert!(Instant::now() < deadline, "states: {states:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let survivor = 1 - poller;
    let ready = daemons[survivor].readyz().await;
    assert_eq!(
        ready["cluster"]["instances"].as_array().map(Vec::len),
        Some(2),
        "{ready}"
    );
    let sockets = std::fs::read_dir(setup.data_dir().join("instances")).expect("instances");
    assert_eq!(
        sockets.count(),
        2,
        "a socket per instance in the shared data dir"
    );

    // Three leases of polling: many getUpdates, never two at once.
    let polls = telegram.calls_of("getupdates").len();
    telegram
        .wait_for(WAIT, "polls over three leases", |t| {
            t.calls_of("getupdates").len() >= polls + 3 * LEASE_SECONDS as usize
        })
        .await;
    telegram.send_text(private_chat(1), 1, "hello");
    telegram
        .wait_for(WAIT, "the first answer", |t| {
            answers(t, "first answer") == 1
        })
        .await;
    assert_eq!(telegram.overlaps(), 0);

    // SIGKILL the poller: its lease runs out and the survivor polls and answers.
    daemons[poller].signal("KILL");
    let killed = Instant::now();
    telegram.send_text(private_chat(1), 1, "still there?");
    let deadline = killed + WAIT;
    let polled = loop {
        if let Some(call) = telegram
            .calls_of("getupdates")
            .into_iter()
            .find(|call| call.at > killed + Duration::from_millis(200))
        {
            break call.at;
        }
        assert!(Instant::now() < deadline, "nobody polled after the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let lease = Duration::from_secs(LEASE_SECONDS);
    assert!(
        polled - killed <= lease * 2,
        "polled {:?} after the kill",
        polled - killed
    );
    telegram
        .wait_for(WAIT, "the survivor's answer", |t| {
            answers(t, "answer after the failover") == 1
        })
        .await;
    let replied = Instant::now();
    println!(
        "failover: polled {:?} and replied {:?} after the SIGKILL (lease_seconds {LEASE_SECONDS})",
        polled - killed,
        replied - killed
    );
    assert!(replied - killed <= lease * 2 + Duration::from_secs(5));
    let ready = daemons[survivor].readyz().await;
    assert_eq!(telegram_state(&ready), "running", "{ready}");
    assert_eq!(telegram.overlaps(), 0, "never two pollers at once");
    assert_eq!(answers(&telegram, "first answer"), 1);
}
