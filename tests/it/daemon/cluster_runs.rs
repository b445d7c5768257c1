//! Two daemons on one PostgreSQL database, as two replicas behind a load balancer: a run on a
//! thread from instance A makes a second run on the same thread from instance B a 409, and a
//! cancel sent to B stops A's run.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A};
use antler_test_support::postgres::fresh_database;
use antler_test_support::{FakeOpenAi, Gate, Reply};

/// One instance's config: the shared database, its own id, a short lease.
fn instance(url: &str, id: &str) -> String {
    format!(
        "store:\n  backend: postgres\n  postgres:\n    url: {url}\n\
         cluster:\n  instance_id: {id}\n  lease_seconds: 3\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_one_instance_is_busy_on_the_other_and_a_cancel_sent_there_stops_it() {
    let Some(database) = fresh_database() else {
        return;
    };
    let url = database.url.clone();
    let fake = FakeOpenAi::start().await;
    // A's run streams one chunk and then waits for a gate nobody opens: only a cancel ends it.
    fake.push(Reply::chunks(["thinking ", "more"]).hold_after(1, &Gate::new()));
    let setup_a = Setup::new(&fake.base_url(), &instance(&url, "a"));
    let setup_b = Setup::new(&fake.base_url(), &instance(&url, "b"));
    let a = setup_a.start();
    let b = setup_b.start();

    let thread = a.create_thread(TOKEN_A).await;
    let response = a.start_stream(TOKEN_A, &thread, "go slowly").await;
    let mut events = response.bytes_stream().eventsource();
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(first.event, "metadata");
    let run_id = serde_json::from_str::<Value>(&first.data).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();

    // B reads the same thread and refuses a second run on it.
    let record = b.get_json(&format!("/api/threads/{thread}"), TOKEN_A).await;
    assert_eq!(record["status"], "busy", "{record}");
    let busy = b
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": "me too"}]}}))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(busy, 409, "thread_busy", &["cancel"]).await;

    // A cancel sent to B: only for the run in flight, and it reaches A's run.
    let cancel = |run: String| {
        b.post(&format!("/api/threads/{thread}/runs/{run}/cancel"), TOKEN_A)
            .send()
    };
    assert_eq!(cancel("not-a-run".into()).await.unwrap().status(), 404);
    assert_eq!(cancel(run_id.clone()).await.unwrap().status(), 202);
    let end = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(Ok(event)) = events.next().await {
            if event.event == "end" {
                return event.data;
            }
        }
        String::new()
    })
    .await
    .expect("A's run kept going after the cancel sent to B");
    assert!(end.contains("cancelled"), "{end}");

    // The thread is free on either instance, and B runs on it.
    let record = b.get_json(&format!("/api/threads/{thread}"), TOKEN_A).await;
    assert_eq!(record["status"], "interrupted", "{record}");
    fake.push(Reply::text("answered by b"));
    let answer = b
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": "now"}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let state = a
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    assert!(state.to_string().contains("answered by b"), "{state}");
}
