//! `/runs/wait` when the model fails: an error status by cause (503 unreachable, 502 a broken
//! answer, 504 too slow) with the `{"error": {"code", "message"}}` shape and the run's ids.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Setup, TOKEN_A};

async fn wait_for_run(setup: &Setup) -> (u16, Value) {
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": "hello"}]}}))
        .send()
        .await
        .expect("runs/wait");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("a JSON answer");
    assert_eq!(body["thread_id"], thread, "{body}");
    assert!(body["run_id"].is_string(), "{body}");
    (status, body)
}

fn assert_failure(body: &Value, code: &str, needle: &str) {
    assert_eq!(body["stop_reason"], "error", "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains(needle),
        "{needle:?} missing from {message:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_model_is_503() {
    // Port 1 (tcpmux) is refused on loopback. A port freed by binding and dropping a listener
    // can be taken by another test's daemon meanwhile, which then answers 404 instead.
    let setup = Setup::new("http://127.0.0.1:1/v1", "");
    let (status, body) = wait_for_run(&setup).await;
    assert_eq!(status, 503, "{body}");
    assert_failure(&body, "model_unavailable", "could not reach model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_answering_an_error_is_502() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::status(500));
    let setup = Setup::new(&fake.base_url(), "");
    let (status, body) = wait_for_run(&setup).await;
    assert_eq!(status, 502, "{body}");
    assert_failure(&body, "model_error", "HTTP 500");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_too_slow_is_504() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::slow(["late"], Duration::from_secs(5)));
    let setup = Setup::new(&fake.base_url(), "");
    let yaml = std::fs::read_to_string(&setup.config_path).expect("config");
    std::fs::write(
        &setup.config_path,
        yaml.replace("timeout: 30", "timeout: 1"),
    )
    .expect("config");
    let (status, body) = wait_for_run(&setup).await;
    assert_eq!(status, 504, "{body}");
    assert_failure(&body, "model_timeout", "did not answer within");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_run_is_200_without_an_error() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("fine"));
    let setup = Setup::new(&fake.base_url(), "");
    let (status, body) = wait_for_run(&setup).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop_reason"], "completed");
    assert!(body["error"].is_null(), "{body}");
}
