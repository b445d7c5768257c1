//! Memory history through the HTTP API of the real binary: every change is an attributed
//! version, a revert puts back the exact content as a new version, only the last
//! `memory.history_limit` are kept, and one user never sees or reverts another's history.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A, TOKEN_B};

async fn add_fact(daemon: &Daemon, content: &str) -> String {
    let created: Value = daemon
        .post("/api/memory/facts", TOKEN_A)
        .json(&json!({"content": content, "category": "knowledge", "confidence": 0.9}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["id"].as_str().unwrap().to_string()
}

async fn revert(daemon: &Daemon, token: &str, body: Value) -> reqwest::Response {
    daemon
        .post("/api/memory/revert", token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn memory_versions_are_listed_reverted_bounded_and_private() {
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), "memory:\n  history_limit: 3\n");
    let daemon = setup.start();

    let tea = add_fact(&daemon, "Likes tea").await;
    add_fact(&daemon, "Writes Rust").await;
    let deleted = daemon
        .delete(&format!("/api/memory/facts/{tea}"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);

    let history = daemon.get_json("/api/memory/history", TOKEN_A).await;
    assert_eq!(history["limit"], 3);
    let versions = history["versions"].as_array().unwrap();
    let numbers: Vec<u64> = versions
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [3, 2, 1]);
    assert_eq!(
        versions[0]["source"],
        json!({"kind": "api", "request": format!("DELETE /api/memory/facts/{tea}")})
    );
    assert_eq!(versions[0]["summary"], "−1 fact");
    assert_eq!(versions[2]["changes"]["facts_added"], 1);
    assert!(versions[0].get("document").is_none(), "the list is short");

    // Version 2 held both facts; reverting to it brings "Likes tea" back, byte for byte.
    let version_two = daemon.get_json("/api/memory/history/2", TOKEN_A).await;
    let response = revert(&daemon, TOKEN_A, json!({"version": 2})).await;
    assert_eq!(response.status(), 200);
    let reverted: Value = response.json().await.unwrap();
    assert_eq!(
        (reverted["restored"].as_u64(), reverted["version"].as_u64()),
        (Some(2), Some(4))
    );
    let now = daemon.get_json("/api/memory", TOKEN_A).await;
    for part in ["facts", "user", "history"] {
        assert_eq!(now[part], version_two["document"][part], "{part}");
    }
    assert_eq!(now["facts"][0]["id"], tea.as_str());
    // Reverting to what memory already is writes nothing.
    let again: Value = revert(&daemon, TOKEN_A, json!({"version": 4}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["version"], Value::Null);

    // Only the last three are kept: version 1 is gone.
    let history = daemon.get_json("/api/memory/history", TOKEN_A).await;
    let numbers: Vec<u64> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [4, 3, 2]);
    assert_eq!(history["versions"][0]["restores"], 2);
    let gone = revert(&daemon, TOKEN_A, json!({"version": 1})).await;
    assert_eq!(gone.status(), 404);
    let body: Value = gone.json().await.unwrap();
    assert!(body.to_string().contains("/memory history"), "{body}");
    assert_eq!(
        daemon
            .get("/api/memory/history/1", TOKEN_A)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // Bob has no history and cannot revert Alice's; an agent's history is its own.
    assert_eq!(
        daemon.get_json("/api/memory/history", TOKEN_B).await["versions"],
        json!([])
    );
    assert_eq!(
        revert(&daemon, TOKEN_B, json!({"version": 3}))
            .await
            .status(),
        404
    );
    assert!(daemon.get_json("/api/memory", TOKEN_B).await["facts"] == json!([]));
    assert_eq!(
        daemon
            .get_json("/api/memory/history?agent=coder", TOKEN_A)
            .await["versions"],
        json!([])
    );

    // Bad input is refused and changes nothing.
    let bad = revert(&daemon, TOKEN_A, json!({"version": "latest"})).await;
    assert!(bad.status().is_client_error(), "{}", bad.status());
    assert_eq!(
        daemon.get_json("/api/memory", TOKEN_A).await["facts"],
        now["facts"]
    );
}
