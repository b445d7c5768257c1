//! Telegram long polling under the transport lease, against the fake Bot API refusing a
//! concurrent `getUpdates` with 409 as Telegram does.

use std::time::{Duration, Instant};

use antler_test_support::{FAKE_BOT_TOKEN, FakeOpenAi, FakeTelegram, Reply, private_chat};
use serde_json::Value;

use crate::daemon::cli::antler;
use crate::daemon::{Daemon, Setup};

const WAIT: Duration = Duration::from_secs(60);

fn telegram_section(fake: &FakeTelegram) -> String {
    format!(
        "channels:\n  telegram:\n    enabled: true\n    bot_token: \"{FAKE_BOT_TOKEN}\"\n    api_url: {api}\n    poll_timeout: 1\n    allowed_users: [1, 2, 3]\n",
        api = fake.api_url()
    )
}

/// Polls `/readyz` until `check` holds and returns that answer.
async fn readyz_until(daemon: &Daemon, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let ready = daemon.readyz().await;
        if check(&ready) {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {ready}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn holds_transport(ready: &Value) -> bool {
    ready["cluster"]["leases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|name| name.starts_with("telegram:transport:"))
}

/// The first `getUpdates` the fake received after `since`.
async fn first_poll_after(telegram: &FakeTelegram, since: Instant) -> Instant {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(call) = telegram
            .calls_of("getupdates")
            .into_iter()
            .find(|call| call.at > since)
        {
            return call.at;
        }
        assert!(Instant::now() < deadline, "nobody polled after {since:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_daemon_on_sled_holds_its_leases_and_polls_at_once_after_a_crash() {
    let telegram = FakeTelegram::start().await;
    telegram.refuse_concurrent_polls();
    let model = FakeOpenAi::start().await;
    model.push(Reply::text("after the crash"));
    let setup = Setup::new(&model.base_url(), &telegram_section(&telegram));
    let daemon = setup.start();
    let ready = readyz_until(&daemon, "the poller", |r| {
        r["channels"]["telegram"]["state"] == "running"
    })
    .await;
    assert_eq!(ready["store"]["backend"], "sled", "{ready}");
    let me = ready["cluster"]["instance"]
        .as_str()
        .expect("instance")
        .to_string();
    let leases = ready["cluster"]["leases"].to_string();
    assert!(leases.contains(&format!("instance:{me}")), "{ready}");
    assert!(holds_transport(&ready), "{ready}");
    assert!(
        !leases.contains(FAKE_BOT_TOKEN) && !leases.contains("TEST-TOKEN"),
        "{leases}"
    );
    assert_eq!(
        ready["cluster"]["instances"][0]["id"],
        me.as_str(),
        "{ready}"
    );

    let status = antler(&setup.config_path, &["status"], "").await;
    let printed = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(printed.contains("store     sled\n"), "{printed}");
    assert!(
        printed.contains(&format!("instance  {me} (holds telegram:transport:")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("cluster   1 instance: {me} (this one, joined ")),
        "{printed}"
    );

    // A crash leaves both leases live in the store for another 15 s; sled admits one process,
    // so the next daemon releases them and polls at once.
    daemon.signal("KILL");
    let mut daemon = daemon;
    daemon.wait_exit(WAIT);
    let restarted = Instant::now();
    let again = setup.start();
    let polled = first_poll_after(&telegram, restarted).await;
    assert!(
        polled.duration_since(restarted) < Duration::from_secs(10),
        "polled {:?} after the restart",
        polled.duration_since(restarted)
    );
    telegram.send_text(private_chat(1), 1, "still there?");
    telegram
        .wait_for(WAIT, "the answer", |t| {
            t.chat_texts(1).iter().any(|text| text == "after the crash")
        })
        .await;
    assert_eq!(telegram.overlaps(), 0);
    drop(again);
}
