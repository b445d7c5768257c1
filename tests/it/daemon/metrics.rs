//! `GET /metrics` on the real daemon: Prometheus text with run, model, tool and process
//! figures after real runs, open without a token like the probes, and free of user ids.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::{Setup, TOKEN_A};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_runs_tools_and_tokens_without_naming_users() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call("ls", json!({"path": "/mnt/user-data"})).usage(30, 5))
        .push(Reply::text("Done.").usage(40, 3));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let answer = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": "list files"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    // No bearer token: scrapers do not carry one.
    let response = daemon
        .http
        .get(daemon.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text().await.unwrap();
    for needle in [
        "antler_runs_started_total 1",
        "antler_runs_finished_total{reason=\"completed\"} 1",
        "antler_run_duration_seconds_count 1",
        "antler_model_call_duration_seconds_count{model=\"fake\"} 2",
        "antler_model_tokens_total{model=\"fake\",direction=\"input\"} 70",
        "antler_tool_calls_total{tool=\"ls\"} 1",
        "antler_queue_depth{queue=\"runs_in_flight\"} 0",
        "antler_process_resident_bytes ",
        "# HELP antler_runs_started_total",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    assert!(!text.contains("alice") && !text.contains(&thread), "{text}");
    // Channels that are not configured are not reported as unhealthy.
    assert!(
        !text.contains("antler_channel_healthy{channel=\"slack\"}"),
        "{text}"
    );
}
