//! server-everything over streamable HTTP and over the legacy HTTP+SSE transport.

use antler::agent_api::StopReason;
use antler_store::messages::ToolStatus;
use serde_json::json;

use super::{Fixture, answer, calls, everything, start_http_server, tool_messages};

async fn echo_over(kind: &str, mode: &str, path: &str) {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, mode).await;
    // Trusted: the second run's call would otherwise wait for approval (the first run's
    // results tainted the thread); this test is about the transports.
    let f = Fixture::new(
        json!({"remote": {
            "type": kind,
            "url": format!("http://127.0.0.1:{port}{path}"),
            "trusted": true
        }}),
        false,
        vec![
            calls(&[
                ("remote_echo", json!({"message": format!("over {kind}")})),
                ("remote_get-sum", json!({"a": 1, "b": 2})),
            ]),
            answer("done"),
        ],
    );
    let outcome = f.run("r", "go").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let results = tool_messages(&outcome);
    assert_eq!(
        results[0].status,
        ToolStatus::Success,
        "{}",
        results[0].content
    );
    assert!(results[0].content.contains(&format!("over {kind}")));
    assert!(results[1].content.contains('3'), "{}", results[1].content);
    // A second run reuses the cached session and tools.
    f.model
        .push(calls(&[("remote_echo", json!({"message": "again"}))]));
    f.model.push(answer("done"));
    let outcome = f.run("r", "again").await;
    assert!(
        tool_messages(&outcome)
            .last()
            .unwrap()
            .content
            .contains("again")
    );
}

#[tokio::test]
async fn streamable_http_server_is_called() {
    echo_over("http", "streamableHttp", "/mcp").await;
}

#[tokio::test]
async fn legacy_sse_server_is_called() {
    echo_over("sse", "sse", "/sse").await;
}
