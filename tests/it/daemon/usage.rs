//! Usage and budgets through the daemon: `GET /api/usage` (own usage, admins everyone's), a
//! spent budget answering 429 with no model call, and `antler usage` over the daemon's socket.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

use super::{Setup, TOKEN_A, TOKEN_B};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_is_429_and_usage_is_reported_by_role() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("costly").usage(100, 20));
    let setup = Setup::new(
        &fake.base_url(),
        "admins:\n  - bob\nbudgets:\n  users:\n    alice: 100\n\
         pricing:\n  fake:\n    input_per_million: 1000\n",
    );
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let run = |token: &'static str| {
        daemon
            .post(&format!("/api/threads/{thread}/runs/wait"), token)
            .json(&json!({"input": {"messages": [{"role": "user", "content": "hi"}]}}))
            .send()
    };
    assert_eq!(
        run(TOKEN_A).await.expect("first run").status().as_u16(),
        200
    );
    let refused = run(TOKEN_A).await.expect("second run");
    assert_eq!(refused.status().as_u16(), 429);
    let body: serde_json::Value = refused.json().await.expect("json");
    assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
    assert_eq!(fake.requests().len(), 1, "no model call for a spent budget");

    let own = daemon.get_json("/api/usage", TOKEN_A).await;
    assert_eq!(own["rows"][0]["user_id"], "alice", "{own}");
    assert_eq!(own["rows"][0]["total_tokens"], 120, "{own}");
    assert!(own["report"].as_str().unwrap().contains("$0.1000"), "{own}");
    let forbidden = daemon
        .get("/api/usage?user=bob", TOKEN_A)
        .send()
        .await
        .expect("usage");
    assert_eq!(forbidden.status().as_u16(), 403);
    let admin = daemon.get_json("/api/usage?days=7", TOKEN_B).await;
    assert_eq!(admin["rows"].as_array().map(Vec::len), Some(1), "{admin}");

    let cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(&setup.config_path)
        .arg("usage")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("RUST_LOG", "warn")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), cli)
        .await
        .expect("antler usage finished in time")
        .expect("antler usage");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("alice fake: 120 tokens (100 in, 20 out), 1 call, $0.1000"),
        "{stdout}"
    );
}
