//! Sub-agents through the daemon: a run with `subagent_enabled` delegates with `task`, and the
//! SSE stream carries `task_started`, `task_running`, then `task_completed` or `task_failed`
//! (custom events) before the lead's answer; the sub-agent's tokens count for the user.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Setup, TOKEN_A, collect_sse};

async fn stream_with_subagents(
    daemon: &super::Daemon,
    thread: &str,
    text: &str,
) -> Vec<(String, Value)> {
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&json!({
            "input": {"messages": [{"role": "user", "content": text}]},
            "context": {"subagent_enabled": true},
        }))
        .send()
        .await
        .expect("stream request");
    assert_eq!(response.status(), 200);
    collect_sse(response).await
}

/// The `task_*` custom events, in order.
fn task_events(events: &[(String, Value)]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|(name, data)| {
            name == "custom"
                && data["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("task_"))
        })
        .map(|(_, data)| {
            (
                data["type"].as_str().unwrap().to_string(),
                data["data"].clone(),
            )
        })
        .collect()
}

fn delegate(description: &str) -> Reply {
    Reply::tool_call(
        "task",
        json!({"description": description, "prompt": "Count the files and report.", "subagent_type": "general-purpose"}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_task_streams_its_events_and_counts_its_tokens() {
    let fake = FakeOpenAi::start().await;
    fake.push(delegate("Count files").usage(10, 5))
        .push(Reply::text("There are 3 files.").usage(100, 20))
        .push(Reply::text("The sub-agent found 3 files.").usage(10, 5));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = stream_with_subagents(&daemon, &thread, "how many files?").await;

    let tasks = task_events(&events);
    let names: Vec<&str> = tasks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["task_started", "task_running", "task_completed"],
        "{events:?}"
    );
    let task_id = tasks[0].1["task_id"].as_str().unwrap();
    assert!(tasks.iter().all(|(_, d)| d["task_id"] == task_id));
    assert_eq!(tasks[0].1["description"], "Count files");
    assert_eq!(tasks[1].1["message_index"], 1);
    assert_eq!(tasks[2].1["result"], "There are 3 files.");
    assert_eq!(tasks[2].1["token_usage"]["total_tokens"], 120);

    let tool_message = events
        .iter()
        .find(|(name, data)| name == "custom" && data["type"] == "tool_finished")
        .map(|(_, data)| data["result"].clone())
        .expect("the task's tool message");
    assert_eq!(
        tool_message["content"],
        "Task Succeeded. Result: There are 3 files."
    );
    assert_eq!(tool_message["artifact"]["subagent_status"], "completed");
    let finished_at = events.iter().position(|(n, _)| n == "end").unwrap();
    let completed_at = events
        .iter()
        .position(|(n, d)| n == "custom" && d["type"] == "task_completed")
        .unwrap();
    assert!(completed_at < finished_at);

    // The sub-agent's request: its own prompt, no `task` tool, the delegated instructions.
    let sub = &fake.requests()[1];
    let tools: Vec<&str> = sub["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(!tools.contains(&"task"), "{tools:?}");
    assert!(
        sub["messages"]
            .to_string()
            .contains("Count the files and report.")
    );
    assert!(!sub["messages"].to_string().contains("how many files?"));

    let usage = daemon.get_json("/api/usage", TOKEN_A).await;
    let kinds = &usage["kinds"];
    assert_eq!(
        (
            kinds["lead"]["total_tokens"].as_u64(),
            kinds["subagent"]["total_tokens"].as_u64()
        ),
        (Some(30), Some(120)),
        "the lead's calls and the sub-agent's, apart from the title's: {usage}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_streams_task_failed_and_the_lead_goes_on() {
    let fake = FakeOpenAi::start().await;
    fake.push(delegate("Count files"))
        .push(Reply::status(400))
        .push(Reply::text("The sub-agent could not do it."));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let events = stream_with_subagents(&daemon, &thread, "how many files?").await;

    let tasks = task_events(&events);
    let names: Vec<&str> = tasks.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["task_started", "task_failed"], "{events:?}");
    assert!(
        tasks[1].1["error"]
            .as_str()
            .unwrap()
            .starts_with("Task failed. Error: "),
        "{:?}",
        tasks[1]
    );
    let end = events.last().unwrap();
    assert_eq!(end.1["stop_reason"], "completed");
    assert_eq!(fake.requests().len(), 3);
}
