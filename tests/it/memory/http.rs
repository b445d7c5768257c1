//! The memory HTTP API against the real binary: each user sees and edits only their own memory,
//! per agent; export/import round-trips the seed's JSON; bad input changes nothing.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use crate::daemon::{Setup, TOKEN_A, TOKEN_B};

#[tokio::test]
async fn users_own_their_memory_through_the_api() {
    let model = FakeOpenAi::start().await;
    let setup = Setup::new(&model.base_url(), "memory:\n  enabled: true\n");
    let daemon = setup.start();

    let empty = daemon.get_json("/api/memory", TOKEN_A).await;
    assert_eq!(empty["version"], "1.0");
    assert_eq!(empty["facts"], json!([]));
    assert_eq!(
        empty["user"]["workContext"],
        json!({"summary": "", "updatedAt": ""})
    );

    let created = daemon
        .post("/api/memory/facts", TOKEN_A)
        .json(&json!({"content": "Likes tea", "category": "preference"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let fact: Value = created.json().await.unwrap();
    let id = fact["id"].as_str().unwrap().to_string();
    assert_eq!(
        (fact["confidence"].as_f64(), fact["source"].as_str()),
        (Some(1.0), Some("api"))
    );

    let duplicate = daemon
        .post("/api/memory/facts", TOKEN_A)
        .json(&json!({"content": "  likes TEA", "category": "preference"}))
        .send()
        .await
        .unwrap();
    assert_eq!(duplicate.status(), 409);
    let bad = daemon
        .post("/api/memory/facts", TOKEN_A)
        .json(&json!({"content": "x", "category": "gossip"}))
        .send()
        .await
        .unwrap();
    assert!(bad.status().is_client_error(), "{}", bad.status());
    let out_of_range = daemon
        .http
        .patch(daemon.url(&format!("/api/memory/facts/{id}")))
        .bearer_auth(TOKEN_A)
        .json(&json!({"confidence": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(out_of_range.status(), 400);

    let patched: Value = daemon
        .http
        .patch(daemon.url(&format!("/api/memory/facts/{id}")))
        .bearer_auth(TOKEN_A)
        .json(&json!({"confidence": 0.8, "content": "Likes green tea"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(patched["content"], "Likes green tea");
    assert_eq!(patched["confidence"], 0.8);

    // Bob sees none of it, and cannot touch Alice's fact.
    assert_eq!(
        daemon.get_json("/api/memory", TOKEN_B).await["facts"],
        json!([])
    );
    let foreign = daemon
        .delete(&format!("/api/memory/facts/{id}"), TOKEN_B)
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 404);

    // A custom agent's memory is separate.
    let coder = daemon
        .post("/api/memory/facts?agent=coder", TOKEN_A)
        .json(&json!({"content": "Uses Rust", "category": "knowledge", "confidence": 0.9}))
        .send()
        .await
        .unwrap();
    assert_eq!(coder.status(), 201);
    let default_facts = daemon.get_json("/api/memory", TOKEN_A).await["facts"].clone();
    assert_eq!(default_facts.as_array().unwrap().len(), 1);
    assert_eq!(
        daemon.get_json("/api/memory?agent=coder", TOKEN_A).await["facts"][0]["content"],
        "Uses Rust"
    );

    // Export, then import into Bob's memory; an invalid document changes nothing.
    let export = daemon
        .get("/api/memory/export", TOKEN_A)
        .send()
        .await
        .unwrap();
    assert!(
        export.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("memory.json")
    );
    let exported: Value = export.json().await.unwrap();
    let mut broken = exported.clone();
    let duplicate_fact = broken["facts"][0].clone();
    broken["facts"].as_array_mut().unwrap().push(duplicate_fact);
    let rejected = daemon
        .post("/api/memory/import", TOKEN_B)
        .json(&broken)
        .send()
        .await
        .unwrap();
    assert_eq!(rejected.status(), 400);
    assert_eq!(
        daemon.get_json("/api/memory", TOKEN_B).await["facts"],
        json!([])
    );
    let imported = daemon
        .post("/api/memory/import", TOKEN_B)
        .json(&exported)
        .send()
        .await
        .unwrap();
    assert_eq!(imported.status(), 200);
    let bob = daemon.get_json("/api/memory", TOKEN_B).await;
    assert_eq!(bob["facts"], exported["facts"]);

    let deleted = daemon
        .delete(&format!("/api/memory/facts/{id}"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let again = daemon
        .delete(&format!("/api/memory/facts/{id}"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    let body: Value = again.json().await.unwrap();
    assert!(body.to_string().contains("fact_not_found"), "{body}");
    let cleared: Value = daemon
        .delete("/api/memory", TOKEN_B)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cleared["deleted_facts"], 1);
    // The emptied document beside the count, as DeerFlow's UI reads it back.
    assert_eq!(cleared["facts"], json!([]));
    assert_eq!(
        daemon.get_json("/api/memory", TOKEN_B).await["facts"],
        json!([])
    );
}
