//! Process lifecycle: restart keeps threads, SIGTERM drains in-flight runs, config errors exit 64.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};
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
        assert_eq!(daemon.wait_exit(Duration::from_secs(15)), Some(0));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_slow_run_finish_within_the_grace_period() {
    let fake = FakeOpenAi::start().await;
    // About 1 s of streaming, well inside the 5 s grace period.
    fake.push(Reply::slow(
        (0..20).map(|i| format!("c{i} ")),
        Duration::from_millis(50),
    ));
    let setup = Setup::new(&fake.base_url(), "");
    let mut daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = start_slow_run(&daemon, &thread).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    daemon.signal("TERM");
    let events = events.await.unwrap();
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "end");
    assert_eq!(data["stop_reason"], "completed", "{events:?}");
    assert_eq!(daemon.wait_exit(Duration::from_secs(15)), Some(0));

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
    // Far longer than the grace period.
    fake.push(Reply::slow(
        (0..600).map(|i| format!("c{i} ")),
        Duration::from_millis(50),
    ));
    let setup = Setup::new(&fake.base_url(), "");
    let mut daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = start_slow_run(&daemon, &thread).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    daemon.signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(15)), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the second signal did not cut the grace short"
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
    fake.push(Reply::slow(
        (0..600).map(|i| format!("c{i} ")),
        Duration::from_millis(50),
    ));
    let setup = Setup::new(&fake.base_url(), "");
    let yaml = std::fs::read_to_string(&setup.config_path).unwrap();
    std::fs::write(
        &setup.config_path,
        yaml.replace("shutdown_grace_seconds: 5", "shutdown_grace_seconds: 1"),
    )
    .unwrap();
    let mut daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = start_slow_run(&daemon, &thread).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(15)), Some(0));
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
