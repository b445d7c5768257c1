//! server-everything over stdio: discovery, calls, images, prefixing, a server dying mid-call,
//! a server that cannot start.

use std::time::Duration;

use antler::agent_api::StopReason;
use antler::mcp::ServerStatus;
use antler_store::messages::ToolStatus;
use serde_json::json;

use super::{Fixture, answer, calls, everything, stdio_server, tool_messages};

#[tokio::test]
async fn stdio_tools_are_listed_and_echo_and_sum_are_called_through_a_run() {
    let Some(index) = everything() else { return };
    let f = Fixture::new(
        json!({"everything": stdio_server(&index)}),
        false,
        vec![
            calls(&[
                ("everything_echo", json!({"message": "hello mcp"})),
                ("everything_get-sum", json!({"a": 2, "b": 40})),
            ]),
            answer("done"),
        ],
    );
    let outcome = f.run("t1", "use the tools").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let results = tool_messages(&outcome);
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[0].status,
        ToolStatus::Success,
        "{}",
        results[0].content
    );
    assert!(
        results[0].content.contains("hello mcp"),
        "{}",
        results[0].content
    );
    assert!(results[1].content.contains("42"), "{}", results[1].content);

    // The model saw the MCP tools with their schemas.
    let first = &f.model.requests()[0];
    let echo = first
        .tools
        .iter()
        .find(|t| t.name == "everything_echo")
        .expect("echo offered to the model");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");

    let servers = f.harness.mcp().servers().await.unwrap();
    assert_eq!(servers[0].status, ServerStatus::Connected);
    assert!(servers[0].tools.iter().any(|t| t == "everything_get-sum"));
}

#[tokio::test]
async fn an_image_result_is_saved_to_the_outputs_for_view_image() {
    let Some(index) = everything() else { return };
    let f = Fixture::new(
        json!({"everything": stdio_server(&index)}),
        false,
        vec![
            calls(&[("everything_get-tiny-image", json!({}))]),
            answer("seen"),
        ],
    );
    let outcome = f.run("img", "show me").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let result = &tool_messages(&outcome)[0];
    assert_eq!(result.status, ToolStatus::Success, "{}", result.content);
    let virtual_path = result
        .content
        .split_whitespace()
        .find(|w| w.starts_with("/mnt/user-data/outputs/mcp/"))
        .expect("the image's path is in the message")
        .trim_end_matches(';')
        .to_string();
    assert!(result.content.contains("view_image"), "{}", result.content);
    let host = f
        .dir
        .path()
        .join("data/users/alice/threads/img/user-data/outputs/mcp")
        .join(virtual_path.rsplit('/').next().unwrap());
    let bytes = std::fs::read(&host).expect("the image is on disk");
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG was saved");
}

#[tokio::test]
async fn without_prefix_tools_keep_their_own_names() {
    let Some(index) = everything() else { return };
    let mut server = stdio_server(&index);
    server["tool_name_prefix"] = json!(false);
    let f = Fixture::new(
        json!({"plain": server}),
        false,
        vec![calls(&[("echo", json!({"message": "raw"}))]), answer("ok")],
    );
    let outcome = f.run("p", "go").await;
    let result = &tool_messages(&outcome)[0];
    assert_eq!(result.status, ToolStatus::Success, "{}", result.content);
    assert!(result.content.contains("raw"));
    let names: Vec<String> = f.model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"echo".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("plain_")), "{names:?}");
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_skipped() {
    let Some(index) = everything() else { return };
    let f = Fixture::new(
        json!({
            "broken": {"command": "/nonexistent/mcp-server"},
            "everything": stdio_server(&index),
            "off": {"command": "/nonexistent/too", "enabled": false}
        }),
        false,
        vec![
            calls(&[("everything_echo", json!({"message": "still here"}))]),
            answer("ok"),
        ],
    );
    let outcome = f.run("b", "go").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    assert!(tool_messages(&outcome)[0].content.contains("still here"));
    let servers = f.harness.mcp().servers().await.unwrap();
    let broken = servers.iter().find(|s| s.name == "broken").unwrap();
    match &broken.status {
        ServerStatus::Failed { error } => assert!(error.contains("could not start"), "{error}"),
        other => panic!("{other:?}"),
    }
    let off = servers.iter().find(|s| s.name == "off").unwrap();
    assert_eq!(off.status, ServerStatus::Disabled);
}

/// Kills the node process whose command line holds `marker` (a server this test started).
fn kill_marked(marker: &str) -> bool {
    let mut killed = false;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
            killed = true;
        }
    }
    killed
}

#[tokio::test]
async fn a_server_exiting_mid_call_gives_an_error_result_and_the_run_goes_on() {
    let Some(index) = everything() else { return };
    let marker = format!("antler-mcp-test-{}", uuid::Uuid::new_v4());
    let f = Fixture::new(
        json!({"dying": {"command": "node", "args": [index, "stdio", marker]}}),
        false,
        vec![
            calls(&[(
                "dying_trigger-long-running-operation",
                json!({"duration": 30, "steps": 3}),
            )]),
            calls(&[("dying_echo", json!({"message": "back again"}))]),
            answer("recovered"),
        ],
    );
    let run = f.run("d", "go");
    let killer = async {
        // The call is in flight once the server has started and a moment has passed.
        for _ in 0..300 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if f.model.requests().len() == 1 && kill_marked(&marker) {
                return;
            }
        }
        panic!("the server never started");
    };
    let (outcome, ()) = tokio::join!(run, killer);
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let results = tool_messages(&outcome);
    assert_eq!(
        results[0].status,
        ToolStatus::Error,
        "{}",
        results[0].content
    );
    assert!(
        results[0].content.contains("dying"),
        "{}",
        results[0].content
    );
    // The next call starts the server again.
    assert_eq!(
        results[1].status,
        ToolStatus::Success,
        "{}",
        results[1].content
    );
    assert!(results[1].content.contains("back again"));
    let last = outcome.state.messages.last().unwrap();
    assert_eq!(last.content(), "recovered");
}
