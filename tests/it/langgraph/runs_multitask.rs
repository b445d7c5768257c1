//! `multitask_strategy` on a busy thread: reject, enqueue (in order), interrupt (the run in
//! flight keeps its progress), rollback (its changes and its record go). The run in flight is
//! kept busy by a model reply held until the test opens its gate.

use antler_test_support::{FakeOpenAi, Gate, Reply};
use serde_json::{Value, json};

use super::runs::{create_run, get_run, join, model_asked, texts, thread_values};
use crate::daemon::{Daemon, Setup, TOKEN_A};

/// A daemon whose first model reply holds after one chunk until `gate` opens, then `replies`.
async fn busy_daemon(gate: &Gate, replies: &[&str]) -> (FakeOpenAi, Setup, Daemon, String, String) {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["busy ", "run"]).hold_after(1, gate));
    for reply in replies {
        fake.push(Reply::text(*reply));
    }
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let (status, run) = create_run(&daemon, &thread, "first", json!({})).await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    model_asked(&fake, 1).await;
    (fake, setup, daemon, thread, run_id)
}

fn run_id(run: &Value) -> &str {
    run["run_id"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_refuses_a_second_run_saying_what_would_wait() {
    let gate = Gate::new();
    let (_fake, _setup, daemon, thread, _) = busy_daemon(&gate, &[]).await;
    let (status, body) = create_run(
        &daemon,
        &thread,
        "me too",
        json!({"multitask_strategy": "reject"}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("enqueue"),
        "{body}"
    );
    let runs = daemon
        .get_json(&format!("/api/threads/{thread}/runs"), TOKEN_A)
        .await;
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "a refused run leaves no record"
    );
    let (status, body) = create_run(
        &daemon,
        &thread,
        "me too",
        json!({"multitask_strategy": "sometimes"}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_wait_pending_and_run_in_order() {
    let gate = Gate::new();
    let (_fake, _setup, daemon, thread, first) =
        busy_daemon(&gate, &["second answer", "third answer"]).await;
    let enqueue = json!({"multitask_strategy": "enqueue"});
    let (status, second) = create_run(&daemon, &thread, "second", enqueue.clone()).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["status"], "pending");
    let (_, third) = create_run(&daemon, &thread, "third", enqueue).await;
    assert_eq!(third["status"], "pending");

    gate.open();
    let values = join(&daemon, &thread, run_id(&third)).await;
    assert_eq!(texts(&values, "human"), ["first", "second", "third"]);
    assert_eq!(
        texts(&values, "ai"),
        ["busy run", "second answer", "third answer"]
    );
    for run in [first.as_str(), run_id(&second), run_id(&third)] {
        assert_eq!(get_run(&daemon, &thread, run).await.1["status"], "success");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_cancels_the_run_in_flight_and_keeps_its_progress() {
    let never = Gate::new();
    let (_fake, _setup, daemon, thread, first) = busy_daemon(&never, &["replacement"]).await;
    let (status, next) = create_run(
        &daemon,
        &thread,
        "instead",
        json!({"multitask_strategy": "interrupt"}),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    let values = join(&daemon, &thread, run_id(&next)).await;
    assert_eq!(texts(&values, "human"), ["first", "instead"]);
    assert_eq!(texts(&values, "ai").last().unwrap(), "replacement");
    assert_eq!(
        get_run(&daemon, &thread, &first).await.1["status"],
        "interrupted"
    );
    assert_eq!(
        get_run(&daemon, &thread, run_id(&next)).await.1["status"],
        "success"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_undoes_the_run_in_flight_and_removes_its_record() {
    let never = Gate::new();
    let (_fake, _setup, daemon, thread, first) = busy_daemon(&never, &["replacement"]).await;
    let (status, next) = create_run(
        &daemon,
        &thread,
        "instead",
        json!({"multitask_strategy": "rollback"}),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    join(&daemon, &thread, run_id(&next)).await;
    let values = thread_values(&daemon, &thread).await;
    assert_eq!(texts(&values, "human"), ["instead"]);
    assert_eq!(texts(&values, "ai"), ["replacement"]);
    assert_eq!(get_run(&daemon, &thread, &first).await.0, 404);
    let runs = daemon
        .get_json(&format!("/api/threads/{thread}/runs"), TOKEN_A)
        .await;
    assert_eq!(runs.as_array().unwrap().len(), 1);
}
