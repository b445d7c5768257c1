//! Run records and their routes: background runs joined, listed and read; a run's stream
//! joined by a second client and resumed after a disconnect with `Last-Event-ID`; cancel with
//! `wait` (interrupt, rollback); stateless runs; a custom agent as `assistant_id`; records
//! after a restart.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Gate, Reply};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A};

/// How long a test waits for anything the daemon does.
pub(super) const DEADLINE: Duration = Duration::from_secs(60);

pub(super) type SseStream =
    futures::stream::BoxStream<'static, Result<eventsource_stream::Event, String>>;

pub(super) fn input(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

/// `POST /threads/{thread}/runs` with `extra` fields: the answer's status and body.
pub(super) async fn create_run(
    daemon: &Daemon,
    thread: &str,
    text: &str,
    extra: Value,
) -> (u16, Value) {
    let mut body = json!({"assistant_id": "lead_agent", "input": input(text)});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs"), TOKEN_A)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Waits until the model has been asked `count` times: a run held by its reply is in flight
/// (and the next scripted reply goes to the next request).
pub(super) async fn model_asked(fake: &FakeOpenAi, count: usize) {
    tokio::time::timeout(DEADLINE, async {
        while fake.requests().len() < count {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the model was asked in time");
}

/// `GET …/join`: the thread's values once the run has ended.
pub(super) async fn join(daemon: &Daemon, thread: &str, run_id: &str) -> Value {
    tokio::time::timeout(
        DEADLINE,
        daemon.get_json(
            &format!("/api/threads/{thread}/runs/{run_id}/join"),
            TOKEN_A,
        ),
    )
    .await
    .expect("the run ended")
}

pub(super) async fn get_run(daemon: &Daemon, thread: &str, run_id: &str) -> (u16, Value) {
    let response = daemon
        .get(&format!("/api/threads/{thread}/runs/{run_id}"), TOKEN_A)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// The texts of a thread's messages of `kind` (`human`, `ai`) in its values.
pub(super) fn texts(values: &Value, kind: &str) -> Vec<String> {
    values["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["type"] == kind)
        .filter_map(|message| message["content"].as_str().map(str::to_string))
        .collect()
}

pub(super) async fn thread_values(daemon: &Daemon, thread: &str) -> Value {
    daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await["values"]
        .clone()
}

fn sse(response: reqwest::Response) -> SseStream {
    assert_eq!(response.status(), 200, "stream status");
    response
        .bytes_stream()
        .eventsource()
        .map(|event| event.map_err(|e| e.to_string()))
        .boxed()
}

/// `(id, event, data)` of the next `count` events.
async fn next_events(stream: &mut SseStream, count: usize) -> Vec<(u64, String, String)> {
    let mut events = Vec::new();
    while events.len() < count {
        let event = tokio::time::timeout(DEADLINE, stream.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .expect("a well-formed event");
        events.push((
            event.id.parse().expect("a numeric id"),
            event.event,
            event.data,
        ));
    }
    events
}

/// Every remaining event up to and including `end`.
async fn rest(stream: &mut SseStream) -> Vec<(u64, String, String)> {
    let mut events = Vec::new();
    loop {
        let event = next_events(stream, 1).await.remove(0);
        let end = event.1 == "end";
        events.push(event);
        if end {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_run_is_joined_listed_and_keeps_its_final_status_across_a_restart() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("hello from the background"));
    fake.push(Reply::chunks(["never ", "ends"]).hold_after(1, &Gate::new()));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let (status, run) = create_run(&daemon, &thread, "hi", json!({"metadata": {"k": "v"}})).await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["thread_id"], thread.as_str());
    assert_eq!(run["assistant_id"], "lead_agent");
    assert_eq!(run["metadata"]["k"], "v");
    assert_eq!(run["multitask_strategy"], "reject");
    assert!(matches!(run["status"].as_str(), Some("running")), "{run}");

    let values = join(&daemon, &thread, &run_id).await;
    assert_eq!(texts(&values, "ai"), ["hello from the background"]);
    let (_, run) = get_run(&daemon, &thread, &run_id).await;
    assert_eq!(run["status"], "success");

    // A second run, streamed, still in flight when the daemon dies.
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&json!({"input": input("and then?")}))
        .send()
        .await
        .unwrap();
    let mut stream = sse(response);
    let first = next_events(&mut stream, 1).await.remove(0);
    assert_eq!((first.0, first.1.as_str()), (1, "metadata"));
    let held_id = serde_json::from_str::<Value>(&first.2).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let runs: Value = daemon
        .get_json(&format!("/api/threads/{thread}/runs"), TOKEN_A)
        .await;
    let listed: Vec<(&str, &str)> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            (
                run["run_id"].as_str().unwrap(),
                run["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(held_id.as_str(), "running"), (run_id.as_str(), "success")],
        "newest first"
    );
    let successes: Value = daemon
        .get_json(
            &format!("/api/threads/{thread}/runs?status=success&limit=5"),
            TOKEN_A,
        )
        .await;
    assert_eq!(successes.as_array().unwrap().len(), 1);

    // A stop cancels it past the grace period (the model never answers); the restarted daemon
    // reads its final status. (The start-up sweep for a stop that could not write it, a
    // SIGKILL, is `api_runs`' unit test: what a SIGKILL loses depends on the group commit.)
    let mut daemon = daemon;
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(DEADLINE), Some(0), "a clean exit");
    drop(stream);
    drop(daemon);
    let daemon = setup.start();
    let (_, held) = get_run(&daemon, &thread, &held_id).await;
    assert_eq!(held["status"], "interrupted", "{held}");
    let (_, done) = get_run(&daemon, &thread, &run_id).await;
    assert_eq!(done["status"], "success");
    // Joining a run from before the restart answers its end at once.
    let response = daemon
        .get(
            &format!("/api/threads/{thread}/runs/{held_id}/stream"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    let events = rest(&mut sse_without_ids(response)).await;
    assert_eq!(events.last().unwrap().1, "end");
}

/// Like `sse`, for streams whose events carry no id (they read as 0).
fn sse_without_ids(response: reqwest::Response) -> SseStream {
    assert_eq!(response.status(), 200, "stream status");
    response
        .bytes_stream()
        .eventsource()
        .map(|event| {
            event
                .map(|mut event| {
                    if event.id.is_empty() {
                        event.id = "0".into();
                    }
                    event
                })
                .map_err(|e| e.to_string())
        })
        .boxed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_client_joins_a_stream_and_a_dropped_client_resumes_without_gap_or_repeat() {
    let fake = FakeOpenAi::start().await;
    let gate = Gate::new();
    fake.push(Reply::chunks(["one ", "two ", "three ", "four"]).hold_after(2, &gate));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&json!({"input": input("count"), "on_disconnect": "continue"}))
        .send()
        .await
        .unwrap();
    let location = response.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_string();
    let mut first = sse(response);
    // metadata and the two chunks streamed before the model holds.
    let seen = next_events(&mut first, 3).await;
    assert_eq!(seen.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 2, 3]);
    let run_id = serde_json::from_str::<Value>(&seen[0].2).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(location, format!("/threads/{thread}/runs/{run_id}"));

    // A second client joins from the start while the run is held, with the query the Python
    // SDK sends when no mode is named.
    let joined = daemon
        .get(
            &format!(
                "/api/threads/{thread}/runs/{run_id}/stream?cancel_on_disconnect=false&stream_mode="
            ),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    let mut second = sse(joined);
    let early = next_events(&mut second, 3).await;
    assert_eq!(early, seen, "both clients see the same frames");

    // The first client goes away; the run goes on (`on_disconnect: continue`).
    drop(first);
    gate.open();
    let mut all = early;
    all.extend(rest(&mut second).await);
    let ids: Vec<u64> = all.iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "ids count up"
    );

    // The first client comes back after the last frame it saw.
    let resumed = daemon
        .get(
            &format!("/api/threads/{thread}/runs/{run_id}/stream"),
            TOKEN_A,
        )
        .header("Last-Event-ID", "3")
        .send()
        .await
        .unwrap();
    let after = rest(&mut sse(resumed)).await;
    assert_eq!(after, all[3..], "exactly the frames after the one it saw");
    let (_, run) = get_run(&daemon, &thread, &run_id).await;
    assert_eq!(run["status"], "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_with_wait_interrupts_a_run_or_rolls_it_back() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["stuck ", "here"]).hold_after(1, &Gate::new()));
    fake.push(Reply::text("kept answer"));
    fake.push(Reply::chunks(["undone ", "here"]).hold_after(1, &Gate::new()));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let (_, held) = create_run(&daemon, &thread, "first question", json!({})).await;
    let held_id = held["run_id"].as_str().unwrap();
    model_asked(&fake, 1).await;
    let cancelled = daemon
        .post(
            &format!("/api/threads/{thread}/runs/{held_id}/cancel?wait=1&action=interrupt"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    let record: Value = cancelled.json().await.unwrap();
    assert_eq!(record["status"], "interrupted", "{record}");
    // Its progress stays.
    let values = thread_values(&daemon, &thread).await;
    assert!(texts(&values, "human").contains(&"first question".to_string()));
    // A finished run cannot be cancelled again.
    let again = daemon
        .post(
            &format!("/api/threads/{thread}/runs/{held_id}/cancel"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);

    let (_, kept) = create_run(&daemon, &thread, "second question", json!({})).await;
    join(&daemon, &thread, kept["run_id"].as_str().unwrap()).await;
    let before = thread_values(&daemon, &thread).await["messages"].clone();

    let (_, undone) = create_run(&daemon, &thread, "third question", json!({})).await;
    let undone_id = undone["run_id"].as_str().unwrap();
    model_asked(&fake, 3).await;
    let rolled = daemon
        .post(
            &format!("/api/threads/{thread}/runs/{undone_id}/cancel?wait=true&action=rollback"),
            TOKEN_A,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(rolled.status(), 200);
    let (status, _) = get_run(&daemon, &thread, undone_id).await;
    assert_eq!(status, 404, "a rolled-back run's record is removed");
    let after = thread_values(&daemon, &thread).await;
    assert_eq!(
        after["messages"], before,
        "the thread is back to before the run"
    );
    let thread_record = daemon
        .get_json(&format!("/api/threads/{thread}"), TOKEN_A)
        .await;
    assert_eq!(thread_record["status"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_runs_use_a_thread_of_their_own() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("waited"));
    fake.push(Reply::text("streamed"));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();

    let waited = daemon
        .post("/api/runs/wait", TOKEN_A)
        .json(&json!({"assistant_id": "lead_agent", "input": input("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(waited.status(), 200);
    assert!(waited.headers().contains_key("content-location"));
    let body: Value = waited.json().await.unwrap();
    // Named an assistant, as the SDKs do: the values at the top level, as LangGraph answers.
    assert_eq!(texts(&body, "ai"), ["waited"]);
    assert!(body.get("values").is_none(), "the state once: {body}");
    let threads = daemon.get_json("/api/threads", TOKEN_A).await;
    assert_eq!(
        threads["threads"],
        json!([]),
        "its thread is removed at the end"
    );

    let streamed = daemon
        .post("/api/langgraph/runs/stream", TOKEN_A)
        .json(&json!({"input": input("hi"), "on_completion": "keep", "stream_mode": ["values"]}))
        .send()
        .await
        .unwrap();
    let events = rest(&mut sse(streamed)).await;
    assert!(
        events
            .iter()
            .any(|e| e.1 == "values" && e.2.contains("streamed"))
    );
    let threads = daemon.get_json("/api/threads", TOKEN_A).await;
    assert_eq!(threads["threads"].as_array().unwrap().len(), 1, "kept");

    let refused = daemon
        .post("/api/runs/wait", TOKEN_A)
        .json(&json!({"input": input("hi"), "interrupt_before": ["tools"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("interrupt_before"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_agent_is_chosen_by_assistant_id() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("as the helper"));
    // Custom agents are an admin's to create.
    let setup = Setup::new(&fake.base_url(), "admins: [alice]\n");
    let daemon = setup.start();
    let created = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({"name": "helper", "soul": "I am the helper agent."}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let thread = daemon.create_thread(TOKEN_A).await;
    let (status, run) = create_run(
        &daemon,
        &thread,
        "who are you",
        json!({"assistant_id": "helper"}),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["assistant_id"], "helper");
    join(&daemon, &thread, run["run_id"].as_str().unwrap()).await;
    let record = daemon
        .get_json(&format!("/api/threads/{thread}"), TOKEN_A)
        .await;
    assert_eq!(record["agent_name"], "helper");
    let prompt = fake.requests()[0].to_string();
    assert!(prompt.contains("I am the helper agent."), "{prompt}");

    let (status, body) =
        create_run(&daemon, &thread, "hi", json!({"assistant_id": "nobody"})).await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_going_away_cancels_its_run_with_on_disconnect_cancel() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["never ", "ends"]).hold_after(1, &Gate::new()));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&json!({"input": input("hold on"), "on_disconnect": "cancel"}))
        .send()
        .await
        .unwrap();
    let mut stream = sse(response);
    let first = next_events(&mut stream, 1).await.remove(0);
    let run_id = serde_json::from_str::<Value>(&first.2).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    drop(stream);
    // The model never answers: only the cancel can end the run.
    join(&daemon, &thread, &run_id).await;
    let (_, run) = get_run(&daemon, &thread, &run_id).await;
    assert_eq!(run["status"], "interrupted", "{run}");
}
