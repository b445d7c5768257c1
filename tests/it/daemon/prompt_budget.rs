//! What a model reads with the shipped configuration, through the real daemon: a "hi" on a new
//! thread is one request of at most 15 KiB (system prompt, message and every tool schema, the
//! web tools included) whose system prompt is at most 9 KiB, and plan mode with sub-agents stays
//! within the same prompt budget. The sizes are the bytes the fake OpenAI server received.

use std::path::Path;

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::Daemon;

/// 14 KiB until `schedule_task` joined the default tools (`scheduler.enabled`): its schema
/// is about 1.2 KiB of every request.
const REQUEST_BUDGET: usize = 15 * 1024;
const SYSTEM_PROMPT_BUDGET: usize = 9 * 1024;

fn system_prompt(request: &Value) -> &str {
    assert_eq!(request["messages"][0]["role"], "system", "{request}");
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
}

fn tool_names(request: &Value) -> Vec<&str> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_config_s_hi_request_fits_its_budget() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Hello! How can I help?"))
        .push(Reply::text("Here is a plan."));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config.yaml"),
        &config,
    )
    .unwrap();
    let home = dir.path().join("home");
    let daemon = Daemon::spawn(
        &config,
        &[
            ("ANTLER_LISTEN", "127.0.0.1:0"),
            ("ANTLER_HOME", home.to_str().unwrap()),
            ("ANTLER_MODEL_URL", &fake.base_url()),
            ("ANTLER_MODEL", "fake-model"),
        ],
        None,
    );

    let thread = daemon.create_thread("").await;
    let response = daemon.run_wait("", &thread, "hi").await;
    assert_eq!(response.status(), 200);
    let recorded = fake.recorded();
    let hi = &recorded[0];
    let prompt = system_prompt(&hi.body);
    println!(
        "\"hi\" request: {} bytes, system prompt {} bytes",
        hi.body_len,
        prompt.len()
    );
    assert!(
        hi.body_len <= REQUEST_BUDGET,
        "the \"hi\" request is {} bytes, over {REQUEST_BUDGET}",
        hi.body_len
    );
    assert!(
        prompt.len() <= SYSTEM_PROMPT_BUDGET,
        "the system prompt is {} bytes, over {SYSTEM_PROMPT_BUDGET}",
        prompt.len()
    );
    // What the budget covers: the default tools with the web ones, and the skills they serve.
    let tools = tool_names(&hi.body);
    for tool in [
        "web_search",
        "web_fetch",
        "bash",
        "write_file",
        "ask_clarification",
    ] {
        assert!(tools.contains(&tool), "{tool} missing from {tools:?}");
    }
    assert!(prompt.contains("<name>research-report</name>"));
    assert!(prompt.contains("<citations>"));
    assert!(
        !prompt.contains("<name>bootstrap</name>"),
        "bootstrap needs setup_agent, which only a bootstrap run has"
    );

    let planned = daemon.create_thread("").await;
    let response = daemon
        .post(&format!("/api/threads/{planned}/runs/wait"), "")
        .json(&json!({
            "input": {"messages": [{"role": "user", "content": "Compare three log databases"}]},
            "context": {"is_plan_mode": true, "subagent_enabled": true},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let recorded = fake.recorded();
    let plan = system_prompt(&recorded[1].body);
    println!(
        "plan mode with sub-agents: system prompt {} bytes",
        plan.len()
    );
    assert!(plan.contains("<todo_list_system>") && plan.contains("<subagent_system>"));
    assert!(
        plan.len() <= SYSTEM_PROMPT_BUDGET,
        "the plan-mode system prompt is {} bytes, over {SYSTEM_PROMPT_BUDGET}",
        plan.len()
    );
    assert!(tool_names(&recorded[1].body).contains(&"write_todos"));
}
