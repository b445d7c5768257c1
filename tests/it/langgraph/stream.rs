//! Stream modes through the daemon binary: a real run streamed with the SDK's modes, with
//! DeerFlow's UI's full list, with `stream_subgraphs` and a sub-agent; a refused mode; and a
//! request without `stream_mode` still getting Antler's own frames.

use std::time::Duration;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A, collect_sse};

/// DeerFlow's web UI asks for all of these on every run.
const DEERFLOW_MODES: [&str; 7] = [
    "values",
    "messages-tuple",
    "updates",
    "debug",
    "tasks",
    "checkpoints",
    "custom",
];

/// Streams one run on `base` (`/api` or `/api/langgraph`) and collects its frames until `end`,
/// failing after a deadline.
async fn stream(daemon: &Daemon, base: &str, thread: &str, body: Value) -> Vec<(String, Value)> {
    let response = daemon
        .post(&format!("{base}/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&body)
        .send()
        .await
        .expect("stream request");
    assert_eq!(response.status(), 200, "stream status");
    tokio::time::timeout(Duration::from_secs(60), collect_sse(response))
        .await
        .expect("the stream ended within a minute")
}

fn input(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

fn of<'a>(frames: &'a [(String, Value)], name: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|(event, _)| event == name)
        .map(|(_, data)| data)
        .collect()
}

/// A plan (`write_todos`, reported as `custom`; done already, so the plan does not ask the
/// model to go on), then an answer streamed in two deltas.
fn plan_then_answer(fake: &FakeOpenAi) {
    fake.push(Reply::tool_call(
        "write_todos",
        json!({"todos": [{"content": "Say hello", "status": "completed"}]}),
    ))
    .push(Reply::chunks(["Hel", "lo"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_modes_stream_in_the_shapes_the_sdk_parses() {
    let fake = FakeOpenAi::start().await;
    plan_then_answer(&fake);
    let daemon = Setup::new(&fake.base_url(), "").start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let body = json!({
        "assistant_id": "lead_agent",
        "input": input("hi"),
        "context": {"is_plan_mode": true},
        "stream_mode": ["values", "messages-tuple", "updates", "custom"],
    });
    let frames = stream(&daemon, "/api", &thread, body).await;

    let allowed = ["metadata", "values", "messages", "updates", "custom", "end"];
    assert!(
        frames
            .iter()
            .all(|(name, _)| allowed.contains(&name.as_str())),
        "only the requested modes: {frames:?}"
    );
    assert_eq!(frames[0].0, "metadata");
    assert!(frames[0].1["run_id"].is_string() && frames[0].1["attempt"] == 1);
    let (last, end) = frames.last().unwrap();
    assert_eq!((last.as_str(), &end["status"]), ("end", &json!("success")));

    let messages = of(&frames, "messages");
    let deltas: Vec<&str> = messages
        .iter()
        .filter(|pair| pair[0]["type"] == "AIMessageChunk" && pair[0]["content"] != "")
        .map(|pair| pair[0]["content"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Hel", "lo"], "{messages:?}");
    let tool_calls = messages
        .iter()
        .find(|pair| pair[0]["tool_call_chunks"][0]["name"] == "write_todos")
        .expect("the plan's call as a tool call chunk");
    assert_eq!(tool_calls[1]["langgraph_node"], "model");
    assert_eq!(tool_calls[1]["langgraph_step"], 1);
    let tool = messages
        .iter()
        .find(|pair| pair[0]["type"] == "tool")
        .expect("the tool's result");
    assert_eq!(tool[1]["langgraph_node"], "tools");
    assert_eq!(tool[1]["thread_id"], thread.as_str());
    assert_eq!(tool[1]["run_id"], frames[0].1["run_id"]);

    let updates = of(&frames, "updates");
    let nodes: Vec<&str> = updates
        .iter()
        .filter_map(|update| update.as_object()?.keys().next().map(String::as_str))
        .collect();
    // A later update may follow (state an `after_agent` hook changed, e.g. the title).
    assert_eq!(&nodes[..3], ["model", "tools", "model"], "{updates:?}");
    assert_eq!(updates[1]["tools"]["messages"][0]["type"], "tool");
    assert_eq!(updates[1]["tools"]["todos"][0]["content"], "Say hello");
    assert_eq!(updates[2]["model"]["messages"][0]["content"], "Hello");

    let custom = of(&frames, "custom");
    let todos = custom
        .iter()
        .find(|event| event["type"] == "todos_updated")
        .expect("the plan as a custom event");
    assert_eq!(todos["todos"][0]["content"], "Say hello", "flat: {todos}");

    let values = of(&frames, "values");
    assert!(values.len() >= 3, "a state per step: {values:?}");
    let final_messages = values.last().unwrap()["messages"].as_array().unwrap();
    assert_eq!(final_messages.last().unwrap()["content"], "Hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deerflows_full_list_is_served_under_its_proxy_path() {
    let fake = FakeOpenAi::start().await;
    plan_then_answer(&fake);
    let daemon = Setup::new(&fake.base_url(), "").start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let body = json!({
        "input": input("hi"),
        "context": {"is_plan_mode": true},
        "stream_mode": DEERFLOW_MODES,
    });
    let frames = stream(&daemon, "/api/langgraph", &thread, body).await;

    let tasks = of(&frames, "tasks");
    let started: Vec<&str> = tasks
        .iter()
        .filter(|task| task.get("triggers").is_some())
        .map(|task| task["name"].as_str().unwrap())
        .collect();
    assert_eq!(&started[..3], ["model", "tools", "model"], "{tasks:?}");
    // The input's checkpoint (step 0), then one per step of the loop.
    let checkpoints = of(&frames, "checkpoints");
    let next: Vec<(u64, &Value)> = checkpoints
        .iter()
        .map(|checkpoint| {
            (
                checkpoint["metadata"]["step"].as_u64().unwrap(),
                &checkpoint["next"],
            )
        })
        .collect();
    assert_eq!(
        &next[..4],
        [
            (0, &json!(["model"])),
            (1, &json!(["tools"])),
            (2, &json!(["model"])),
            (3, &json!([]))
        ]
    );
    assert_eq!(
        checkpoints[1]["config"]["configurable"]["thread_id"],
        thread.as_str()
    );
    assert_eq!(checkpoints[1]["parent_config"], checkpoints[0]["config"]);
    let debug = of(&frames, "debug");
    assert!(debug.iter().any(|event| event["type"] == "checkpoint"));
    assert!(debug.iter().any(|event| event["type"] == "task_result"));
    for mode in ["values", "messages", "updates", "custom"] {
        assert!(!of(&frames, mode).is_empty(), "{mode} frames: {frames:?}");
    }
    assert_eq!(frames.last().unwrap().0, "end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_subgraphs_a_subagents_messages_stream_under_its_namespace() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "task",
        json!({"description": "Count files", "prompt": "Count the files and report.",
            "subagent_type": "general-purpose"}),
    ))
    .push(Reply::text("There are 3 files."))
    .push(Reply::text("The sub-agent found 3 files."));
    let daemon = Setup::new(&fake.base_url(), "").start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let body = json!({
        "input": input("how many files?"),
        "context": {"subagent_enabled": true},
        "stream_mode": ["messages-tuple", "updates", "custom"],
        "stream_subgraphs": true,
    });
    let frames = stream(&daemon, "/api", &thread, body).await;

    let started = of(&frames, "custom")
        .into_iter()
        .find(|event| event["type"] == "task_started")
        .expect("task_started");
    let call_id = started["task_id"].as_str().unwrap();
    let namespace = format!("tools:{call_id}");
    let sub_messages = of(&frames, &format!("messages|{namespace}"));
    assert_eq!(sub_messages.len(), 1, "{frames:?}");
    assert_eq!(sub_messages[0][0]["content"], "There are 3 files.");
    assert_eq!(
        sub_messages[0][1]["langgraph_checkpoint_ns"],
        namespace.as_str()
    );
    let sub_updates = of(&frames, &format!("updates|{namespace}"));
    assert_eq!(
        sub_updates[0]["model"]["messages"][0]["content"],
        "There are 3 files."
    );
    // The lead's own messages stay in the root namespace.
    assert!(
        of(&frames, "messages")
            .iter()
            .any(|pair| pair[0]["content"] == "The sub-agent found 3 files.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_mode_is_refused_naming_stream_mode_and_no_mode_keeps_antlers_frames() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::chunks(["Hel", "lo"]));
    let daemon = Setup::new(&fake.base_url(), "").start();
    let thread = daemon.create_thread(TOKEN_A).await;

    let refused = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&json!({"input": input("hi"), "stream_mode": ["values", "telepathy"]}))
        .send()
        .await
        .expect("stream request");
    assert_eq!(refused.status(), 422);
    let body: Value = refused.json().await.expect("error body");
    let detail = body["detail"].as_str().expect("detail");
    assert!(
        detail.starts_with("stream_mode:") && detail.contains("telepathy"),
        "{detail}"
    );
    assert!(
        detail.contains("messages-tuple"),
        "lists the accepted modes: {detail}"
    );

    let frames = stream(&daemon, "/api", &thread, json!({"input": input("hi")})).await;
    let names: Vec<&str> = frames.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[0], "metadata");
    assert_eq!(names.last(), Some(&"end"));
    assert!(
        frames[0].1.get("attempt").is_none(),
        "today's metadata: {frames:?}"
    );
    let deltas: Vec<&Value> = of(&frames, "messages");
    assert_eq!(
        deltas[0],
        &json!([{"type": "AIMessageChunk", "id": deltas[0][0]["id"], "content": "Hel"},
            {"run_id": frames[0].1["run_id"], "thread_id": thread}])
    );
    assert!(
        of(&frames, "custom")
            .iter()
            .any(|event| event["type"] == "message")
    );
    assert!(of(&frames, "updates").is_empty());
    assert_eq!(
        frames.last().unwrap().1,
        json!({"stop_reason": "completed"})
    );
}
