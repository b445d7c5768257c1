//! Threads as the LangGraph SDKs read them: create (`if_exists`), patch, search, state
//! (checkpoint fields, a title update), history, delete, the `interrupted` status of a thread
//! waiting on a clarification, and 422 naming an unsupported field.

use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Gate, Reply};
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A, TOKEN_B, collect_sse};

/// No background title call (it would take the fake's scripted replies and rename threads
/// while a test checks a title it set).
const CONFIG: &str = "title:\n  enabled: false\n";

/// Sends `body` with `method` to `path` and answers (status, JSON body).
async fn call(
    daemon: &Daemon,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = daemon
        .http
        .request(method, daemon.url(path))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post(daemon: &Daemon, path: &str, token: &str, body: Value) -> (u16, Value) {
    call(daemon, reqwest::Method::POST, path, token, Some(body)).await
}

async fn get(daemon: &Daemon, path: &str, token: &str) -> (u16, Value) {
    call(daemon, reqwest::Method::GET, path, token, None).await
}

/// A refusal in the SDK's form (`detail`) and Antler's (`error.code`), naming `needle`.
fn assert_refused(answer: &(u16, Value), status: u16, code: &str, needle: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{}", answer.1);
    let detail = answer.1["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(needle),
        "{needle:?} missing from {detail:?}"
    );
}

fn ids(threads: &Value) -> Vec<&str> {
    threads
        .as_array()
        .expect("a list of threads")
        .iter()
        .map(|t| t["thread_id"].as_str().expect("thread_id"))
        .collect()
}

async fn wait_for_status(daemon: &Daemon, base: &str, thread: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, found) = get(daemon, &format!("{base}/threads/{thread}"), TOKEN_A).await;
        if found["status"] == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "thread never became {status}: {found}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_are_created_patched_searched_and_deleted_under_both_bases() {
    let fake = FakeOpenAi::start().await;
    let daemon = Setup::new(&fake.base_url(), CONFIG).start();
    for base in ["/api", "/api/langgraph"] {
        let tag = base.trim_start_matches('/').replace('/', "-");
        let id = format!("sdk-{tag}-1");
        let created = post(
            &daemon,
            &format!("{base}/threads"),
            TOKEN_A,
            json!({"thread_id": id, "metadata": {"graph_id": "lead_agent", "base": tag}}),
        )
        .await;
        assert_eq!(created.0, 200, "{}", created.1);
        let thread = &created.1;
        for field in ["created_at", "updated_at", "user_id", "last_checkpoint"] {
            assert!(thread.get(field).is_some(), "{field} missing: {thread}");
        }
        assert_eq!(thread["thread_id"], id.as_str());
        assert_eq!(thread["status"], "idle");
        assert_eq!(thread["values"]["messages"], json!([]));
        assert_eq!(thread["interrupts"], json!({}));
        assert_eq!(thread["metadata"]["graph_id"], "lead_agent");

        // `if_exists`: the existing thread back by default and with `do_nothing`, 409 with
        // `raise`.
        for if_exists in [Value::Null, json!("do_nothing")] {
            let again = post(
                &daemon,
                &format!("{base}/threads"),
                TOKEN_A,
                json!({"thread_id": id, "if_exists": if_exists}),
            )
            .await;
            assert_eq!(again.0, 200, "{}", again.1);
            assert_eq!(again.1["created_at"], thread["created_at"]);
        }
        let raised = post(
            &daemon,
            &format!("{base}/threads"),
            TOKEN_A,
            json!({"thread_id": id, "if_exists": "raise"}),
        )
        .await;
        assert_refused(&raised, 409, "thread_exists", &id);

        // PATCH merges metadata.
        let patched = call(
            &daemon,
            reqwest::Method::PATCH,
            &format!("{base}/threads/{id}"),
            TOKEN_A,
            Some(json!({"metadata": {"topic": "rust"}})),
        )
        .await;
        assert_eq!(patched.0, 200, "{}", patched.1);
        assert_eq!(
            patched.1["metadata"],
            json!({"graph_id": "lead_agent", "base": tag, "topic": "rust"})
        );
        let fetched = get(&daemon, &format!("{base}/threads/{id}"), TOKEN_A).await;
        assert_eq!(fetched.1["metadata"]["topic"], "rust");

        // Another user's thread is absent: get, patch.
        let foreign = get(&daemon, &format!("{base}/threads/{id}"), TOKEN_B).await;
        assert_refused(&foreign, 404, "thread_not_found", &id);
        let foreign = call(
            &daemon,
            reqwest::Method::PATCH,
            &format!("{base}/threads/{id}"),
            TOKEN_B,
            Some(json!({"metadata": {"x": 1}})),
        )
        .await;
        assert_eq!(foreign.0, 404, "{}", foreign.1);

        // An unsupported field is a 422 naming it.
        let ttl = post(
            &daemon,
            &format!("{base}/threads"),
            TOKEN_A,
            json!({"ttl": {"ttl": 5}}),
        )
        .await;
        assert_refused(&ttl, 422, "unsupported_field", "ttl");
    }

    // Search: the caller's threads only, filtered, sorted and paged.
    for name in ["b", "c", "a"] {
        let made = post(
            &daemon,
            "/api/threads",
            TOKEN_A,
            json!({"thread_id": format!("search-{name}"), "metadata": {"kind": "search", "tags": [name, "all"]}}),
        )
        .await;
        assert_eq!(made.0, 200);
    }
    let made = post(
        &daemon,
        "/api/threads",
        TOKEN_B,
        json!({"thread_id": "search-bob", "metadata": {"kind": "search"}}),
    )
    .await;
    assert_eq!(made.0, 200);
    for base in ["/api", "/api/langgraph"] {
        let path = format!("{base}/threads/search");
        let search = |body: Value| post(&daemon, &path, TOKEN_A, body);
        let (status, found) = search(json!({
            "metadata": {"kind": "search"}, "sort_by": "thread_id", "sort_order": "asc", "limit": 10
        }))
        .await;
        assert_eq!(status, 200, "{found}");
        assert_eq!(ids(&found), ["search-a", "search-b", "search-c"]);
        let (_, found) = search(json!({
            "metadata": {"kind": "search"}, "sort_by": "thread_id", "sort_order": "desc",
            "limit": 2, "offset": 1
        }))
        .await;
        assert_eq!(ids(&found), ["search-b", "search-a"]);
        let (_, found) = search(json!({"metadata": {"tags": ["c"]}})).await;
        assert_eq!(ids(&found), ["search-c"]);
        let (_, found) = search(json!({"ids": ["search-a", "search-bob"], "status": "idle"})).await;
        assert_eq!(ids(&found), ["search-a"]);
        let (_, found) = search(json!({"metadata": {"kind": "search"}, "status": "busy"})).await;
        assert_eq!(ids(&found), Vec::<&str>::new());
        // Newest update first by default: the last one created leads.
        let (_, found) = search(json!({"metadata": {"kind": "search"}})).await;
        assert_eq!(ids(&found)[0], "search-a");
        let (_, found) = search(json!({
            "ids": ["search-a"], "select": ["thread_id", "metadata"]
        }))
        .await;
        assert_eq!(
            found,
            json!([{"thread_id": "search-a", "metadata": {"kind": "search", "tags": ["a", "all"]}}])
        );
        let refused = search(json!({"sort_by": "title"})).await;
        assert_refused(&refused, 422, "unsupported_field", "sort_by");
        let refused = search(json!({"query": "x"})).await;
        assert_refused(&refused, 422, "unsupported_field", "query");
    }

    // Delete: gone for its owner, under either base.
    let deleted = call(
        &daemon,
        reqwest::Method::DELETE,
        "/api/langgraph/threads/search-a",
        TOKEN_A,
        None,
    )
    .await;
    assert_eq!(deleted.0, 200, "{}", deleted.1);
    let gone = get(&daemon, "/api/threads/search-a", TOKEN_A).await;
    assert_refused(&gone, 404, "thread_not_found", "search-a");
    let (_, found) = post(
        &daemon,
        "/api/threads/search",
        TOKEN_A,
        json!({"metadata": {"kind": "search"}}),
    )
    .await;
    assert_eq!(ids(&found).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_history_and_a_title_update_follow_the_checkpoints() {
    let fake = FakeOpenAi::start().await;
    let gate = Gate::new();
    fake.push(Reply::text("First answer."))
        .push(Reply::chunks(["Held ", "answer."]).hold_after(1, &gate));
    let daemon = Setup::new(&fake.base_url(), CONFIG).start();
    let thread = daemon.create_thread(TOKEN_A).await;

    // A thread never run: empty values, no checkpoint yet, no history.
    let (status, state) = get(&daemon, &format!("/api/threads/{thread}/state"), TOKEN_A).await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["checkpoint"]["checkpoint_id"], Value::Null);
    let (_, history) = post(
        &daemon,
        &format!("/api/threads/{thread}/history"),
        TOKEN_A,
        json!({}),
    )
    .await;
    assert_eq!(history, json!([]));

    let answered = daemon.run_wait(TOKEN_A, &thread, "hi").await;
    assert_eq!(answered.status(), 200);
    for base in ["/api", "/api/langgraph"] {
        let (status, state) =
            get(&daemon, &format!("{base}/threads/{thread}/state"), TOKEN_A).await;
        assert_eq!(status, 200, "{state}");
        assert_eq!(state["thread_id"], thread.as_str());
        assert_eq!(state["status"], "idle");
        assert_eq!(state["next"], json!([]));
        assert_eq!(state["tasks"], json!([]));
        assert_eq!(state["interrupts"], json!([]));
        assert_eq!(state["checkpoint"]["thread_id"], thread.as_str());
        assert_eq!(state["checkpoint"]["checkpoint_ns"], "");
        assert!(state["checkpoint"]["checkpoint_id"].is_string(), "{state}");
        assert!(
            state["parent_checkpoint"]["checkpoint_id"].is_string(),
            "{state}"
        );
        assert_eq!(state["metadata"]["source"], "loop");
        assert!(state["created_at"].is_string(), "{state}");
        let messages = state["values"]["messages"].as_array().expect("messages");
        assert_eq!(messages.last().unwrap()["content"], "First answer.");
    }
    let (_, before) = get(&daemon, &format!("/api/threads/{thread}/state"), TOKEN_A).await;
    let old_id = before["checkpoint"]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A title update is a checkpoint of its own, seen by every reader.
    let (status, updated) = post(
        &daemon,
        &format!("/api/langgraph/threads/{thread}/state"),
        TOKEN_A,
        json!({"values": {"title": "Renamed chat"}, "as_node": "lead_agent"}),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    let new_id = updated["checkpoint"]["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_id, old_id);
    let (_, state) = get(&daemon, &format!("/api/threads/{thread}/state"), TOKEN_A).await;
    assert_eq!(state["values"]["title"], "Renamed chat");
    assert_eq!(state["checkpoint"]["checkpoint_id"], new_id.as_str());
    assert_eq!(state["parent_checkpoint"]["checkpoint_id"], old_id.as_str());
    assert_eq!(state["metadata"]["source"], "update");
    let (_, record) = get(&daemon, &format!("/api/threads/{thread}"), TOKEN_A).await;
    assert_eq!(record["title"], "Renamed chat");
    assert_eq!(record["values"]["title"], "Renamed chat");
    let (_, found) = post(
        &daemon,
        "/api/threads/search",
        TOKEN_A,
        json!({"values": {"title": "Renamed chat"}}),
    )
    .await;
    assert_eq!(ids(&found), [thread.as_str()]);

    // The state at a checkpoint: the latest is given back, an older one is a 404 saying why.
    let (status, at) = get(
        &daemon,
        &format!("/api/threads/{thread}/state/{new_id}"),
        TOKEN_A,
    )
    .await;
    assert_eq!(status, 200, "{at}");
    assert_eq!(at["values"]["title"], "Renamed chat");
    let old = get(
        &daemon,
        &format!("/api/threads/{thread}/state/{old_id}"),
        TOKEN_A,
    )
    .await;
    assert_refused(&old, 404, "checkpoint_not_found", "latest checkpoint only");

    // History: newest first, with full values; `before` and `limit` apply.
    for base in ["/api", "/api/langgraph"] {
        let path = format!("{base}/threads/{thread}/history");
        let (status, history) = post(&daemon, &path, TOKEN_A, json!({"limit": 10})).await;
        assert_eq!(status, 200, "{history}");
        let history = history.as_array().expect("a list of states");
        assert_eq!(history.len(), 1);
        assert_eq!(history[0]["checkpoint"]["checkpoint_id"], new_id.as_str());
        assert_eq!(history[0]["values"]["title"], "Renamed chat");
        assert_eq!(history[0]["values"], state["values"]);
        let (_, none) = post(
            &daemon,
            &path,
            TOKEN_A,
            json!({"before": {"configurable": {"checkpoint_id": new_id}}}),
        )
        .await;
        assert_eq!(none, json!([]));
        let (_, none) = post(&daemon, &path, TOKEN_A, json!({"limit": 0})).await;
        assert_eq!(none, json!([]));
        let (_, by_source) = post(
            &daemon,
            &path,
            TOKEN_A,
            json!({"metadata": {"source": "update"}}),
        )
        .await;
        assert_eq!(by_source.as_array().map(Vec::len), Some(1));
        let (status, got) = get(&daemon, &path, TOKEN_A).await;
        assert_eq!(status, 200, "{got}");
        assert_eq!(got.as_array().map(Vec::len), Some(1));
    }

    // What the update refuses, by field.
    let path = format!("/api/threads/{thread}/state");
    let refused = post(&daemon, &path, TOKEN_A, json!({"values": {"messages": []}})).await;
    assert_refused(&refused, 422, "unsupported_field", "values.messages");
    let refused = post(
        &daemon,
        &path,
        TOKEN_A,
        json!({"values": {"title": "x"}, "checkpoint_id": old_id}),
    )
    .await;
    assert_refused(&refused, 422, "unsupported_field", "checkpoint_id");
    let refused = post(
        &daemon,
        &path,
        TOKEN_A,
        json!({"values": {}, "command": {}}),
    )
    .await;
    assert_refused(&refused, 422, "unsupported_field", "command");

    // While a run is in flight the state cannot change under it.
    let stream = daemon.start_stream(TOKEN_A, &thread, "again").await;
    wait_for_status(&daemon, "/api", &thread, "busy").await;
    let busy = post(
        &daemon,
        &path,
        TOKEN_A,
        json!({"values": {"title": "Mid-run"}}),
    )
    .await;
    assert_refused(&busy, 409, "thread_busy", "cancel");
    gate.open();
    let events = collect_sse(stream).await;
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("end"));
    let (status, _) = post(
        &daemon,
        &path,
        TOKEN_A,
        json!({"values": {"title": "After"}}),
    )
    .await;
    assert_eq!(status, 200);
    let (_, state) = get(&daemon, &path, TOKEN_A).await;
    assert_eq!(state["values"]["title"], "After");
    let messages = state["values"]["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"], "Held answer.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clarification_leaves_the_thread_interrupted_until_the_next_run() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "ask_clarification",
        json!({"question": "PDF or Markdown?", "clarification_type": "approach_choice"}),
    ))
    .push(Reply::text("Here is the PDF."));
    let daemon = Setup::new(&fake.base_url(), CONFIG).start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let asked = daemon.run_wait(TOKEN_A, &thread, "write me a report").await;
    assert_eq!(asked.status(), 200);
    let (_, record) = get(
        &daemon,
        &format!("/api/langgraph/threads/{thread}"),
        TOKEN_A,
    )
    .await;
    assert_eq!(record["status"], "interrupted", "{record}");
    let waiting = record["interrupts"]["lead_agent"]
        .as_array()
        .expect("the question, by task");
    assert_eq!(waiting.len(), 1, "{record}");
    let (_, state) = get(&daemon, &format!("/api/threads/{thread}/state"), TOKEN_A).await;
    assert_eq!(state["status"], "interrupted");
    let interrupt = &state["interrupts"][0];
    assert!(interrupt["id"].is_string(), "{state}");
    assert!(
        interrupt["value"].to_string().contains("PDF or Markdown?"),
        "{state}"
    );
    assert_eq!(state["tasks"][0]["interrupts"][0], *interrupt);
    let (_, found) = post(
        &daemon,
        "/api/threads/search",
        TOKEN_A,
        json!({"status": "interrupted"}),
    )
    .await;
    assert_eq!(ids(&found), [thread.as_str()]);

    // The answer is the next run: the thread is idle again, nothing waits.
    let answered = daemon.run_wait(TOKEN_A, &thread, "PDF").await;
    assert_eq!(answered.status(), 200);
    let (_, state) = get(&daemon, &format!("/api/threads/{thread}/state"), TOKEN_A).await;
    assert_eq!(state["status"], "idle", "{state}");
    assert_eq!(state["interrupts"], json!([]));
    assert_eq!(state["tasks"], json!([]));
    let (_, record) = get(&daemon, &format!("/api/threads/{thread}"), TOKEN_A).await;
    assert_eq!(record["interrupts"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_approval_is_the_interrupted_threads_interrupt() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call("bash", json!({"command": "echo hi"})));
    let daemon = Setup::new(
        &fake.base_url(),
        &format!("{CONFIG}approvals:\n  tools: [bash]\n"),
    )
    .start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = daemon.stream_run(TOKEN_A, &thread, "say hi").await;
    let (_, end) = events.last().expect("events");
    assert_eq!(end["stop_reason"], "awaiting_approval", "{events:?}");

    let (_, state) = get(
        &daemon,
        &format!("/api/langgraph/threads/{thread}/state"),
        TOKEN_A,
    )
    .await;
    assert_eq!(state["status"], "interrupted", "{state}");
    let interrupts = state["interrupts"].as_array().expect("interrupts");
    assert_eq!(interrupts.len(), 1, "{state}");
    let request = &interrupts[0]["value"];
    assert_eq!(request["type"], "approval_request", "{state}");
    assert_eq!(request["tool"], "bash", "{state}");
    assert_eq!(interrupts[0]["id"], request["approval_id"]);
    let (_, approvals) = get(
        &daemon,
        &format!("/api/threads/{thread}/approvals"),
        TOKEN_A,
    )
    .await;
    assert_eq!(
        approvals["approvals"][0]["id"], request["approval_id"],
        "{approvals}"
    );
    let (_, record) = get(&daemon, &format!("/api/threads/{thread}"), TOKEN_A).await;
    assert_eq!(record["interrupts"]["lead_agent"][0], interrupts[0]);
}
