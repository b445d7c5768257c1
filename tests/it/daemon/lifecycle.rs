//! Process lifecycle: restart keeps threads, SIGTERM drains in-flight runs, config errors exit 64.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Gate, Reply};
use serde_json::{Value, json};

use super::{Setup, TOKEN_A};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_returns_the_same_thread_state() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("persisted answer"));
    let setup = Setup::new(&fake.base_url(), "");
    let thread;
    let before: Value;
    {
        let mut daemon = setup.start();
        thread = daemon.create_thread(TOKEN_A).await;
        let waited: Value = daemon
            .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
            .json(&json!({"input": {"messages": [{"role": "user", "content": "remember this"}]}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(waited["stop_reason"], "completed", "{waited}");
        before = daemon
            .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
            .await;
        daemon.signal("TERM");
        assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
    }
    let daemon = setup.start();
    let after: Value = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert_eq!(after["values"], before["values"]);
    assert!(after.to_string().contains("persisted answer"));
}

async fn start_slow_run(
    daemon: &super::Daemon,
    thread: &str,
) -> tokio::task::JoinHandle<Vec<(String, Value)>> {
    tokio::spawn(super::collect_sse(
        daemon.start_stream(TOKEN_A, thread, "slow please").await,
    ))
}

/// A setup whose model streams one chunk, then waits for `gate`, with this grace period.
fn held_model_setup(fake: &FakeOpenAi, gate: &Gate, grace_seconds: u64) -> super::Setup {
    fake.push(Reply::chunks((0..20).map(|i| format!("c{i} "))).hold_after(1, gate));
    let setup = Setup::new(&fake.base_url(), "");
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap();
    std::fs::write(
        &setup.config_path,
        yaml.replace(
            "shutdown_grace_seconds: 5",
            &format!("shutdown_grace_seconds: {grace_seconds}"),
        ),
    )
    .unwrap();
    setup
}

/// Starts the daemon logging to `log` at INFO, a thread, and a run whose model call has begun.
async fn daemon_with_a_run_in_flight(
    setup: &super::Setup,
    fake: &FakeOpenAi,
    log: &std::path::Path,
) -> (
    super::Daemon,
    String,
    tokio::task::JoinHandle<Vec<(String, Value)>>,
) {
    let daemon = super::Daemon::spawn(&setup.config_path, &[("RUST_LOG", "info")], Some(log));
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = start_slow_run(&daemon, &thread).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while fake.requests().is_empty() {
        assert!(Instant::now() < deadline, "the run never called the model");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (daemon, thread, events)
}

/// The daemon logs this once the first signal started the drain (a second one now cuts it).
const DRAINING: &str = "Shutting down: finishing runs in flight";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_slow_run_finish_within_the_grace_period() {
    let fake = FakeOpenAi::start().await;
    let gate = Gate::new();
    // A grace period no loaded machine outlasts; the model answers once the drain began.
    let setup = held_model_setup(&fake, &gate, 120);
    let log = setup.dir.path().join("daemon.log");
    let (mut daemon, thread, events) = daemon_with_a_run_in_flight(&setup, &fake, &log).await;
    daemon.signal("TERM");
    super::log_lines(&log, DRAINING, 1).await;
    gate.open();
    let events = events.await.unwrap();
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "end");
    assert_eq!(data["stop_reason"], "completed", "{events:?}");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));

    let daemon = setup.start();
    let state: Value = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert!(
        state.to_string().contains("c19"),
        "the finished answer was persisted"
    );
    assert_eq!(state["status"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_cancels_the_run_and_still_exits_cleanly() {
    let fake = FakeOpenAi::start().await;
    // The model never finishes and the grace period is longer than the test may take: only
    // the second signal can end this run in time.
    let never = Gate::new();
    let setup = held_model_setup(&fake, &never, 3600);
    let log = setup.dir.path().join("daemon.log");
    let (mut daemon, thread, events) = daemon_with_a_run_in_flight(&setup, &fake, &log).await;
    daemon.signal("TERM");
    super::log_lines(&log, DRAINING, 1).await;
    daemon.signal("TERM");
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(60)),
        Some(0),
        "the second signal cut the grace period short"
    );
    let events = events.await.unwrap();
    assert_eq!(
        events
            .last()
            .map(|(n, d)| (n.as_str(), d["stop_reason"].clone())),
        Some(("end", json!("cancelled")))
    );

    let daemon = setup.start();
    let record: Value = daemon
        .get_json(&format!("/api/threads/{thread}"), TOKEN_A)
        .await;
    assert_eq!(record["status"], "interrupted");
    // The human message (the last completed step) survived.
    let state: Value = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert!(state.to_string().contains("slow please"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_grace_period_cancels_and_exits_cleanly() {
    let fake = FakeOpenAi::start().await;
    let never = Gate::new();
    let setup = held_model_setup(&fake, &never, 1);
    let log = setup.dir.path().join("daemon.log");
    let (mut daemon, _thread, events) = daemon_with_a_run_in_flight(&setup, &fake, &log).await;
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(60)), Some(0));
    let events = events.await.unwrap();
    assert_eq!(events.last().unwrap().1["stop_reason"], "cancelled");
}

#[test]
fn config_errors_exit_64_and_list_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        "models:\n  - name: a\n    model: m\n    base_url: not-a-url\n    tempreature: 3\ngateway:\n  listen: nowhere\n  api_tokenz: []\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(&path)
        .arg("run")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in [
        "models[0].base_url",
        "models[0].tempreature",
        "gateway.listen",
        "gateway.api_tokenz",
    ] {
        assert!(stderr.contains(needle), "{needle} missing from:\n{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn antler_status_reports_a_running_daemon_and_a_missing_one() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap();
    std::fs::write(
        &setup.config_path,
        yaml.replace("listen: 127.0.0.1:0", &format!("listen: 127.0.0.1:{port}")),
    )
    .unwrap();
    let status = || {
        Command::new(env!("CARGO_BIN_EXE_antler"))
            .arg("--config")
            .arg(&setup.config_path)
            .arg("status")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .output()
            .unwrap()
    };
    let down = status();
    assert_eq!(down.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&down.stdout).contains("not answering"));

    let _daemon = setup.start();
    let up = status();
    assert!(up.status.success(), "{up:?}");
    assert!(String::from_utf8_lossy(&up.stdout).contains("daemon    ready"));
}
