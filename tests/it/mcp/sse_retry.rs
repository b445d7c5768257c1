//! SSE resumption (SEP-1699): a tool call's event stream that ends before its answer is
//! resumed with a GET carrying `Last-Event-ID`, no earlier than the stream's `retry:`, and the
//! answer on the resumed stream completes the call.

use std::time::Duration;

use antler::mcp::handler::ElicitationPolicy;
use antler_test_support::{FAKE_MCP_PRIMING_EVENT, FakeMcpServer, ToolCallReply};
use serde_json::json;

use super::versions::{call_echo, open};

#[tokio::test]
async fn a_stream_that_ends_early_is_resumed_after_retry_with_last_event_id() {
    // Longer than the first step of the reconnect backoff (1 s): a client that ignored the
    // stream's `retry:` and used its own backoff would reconnect too early.
    let retry = Duration::from_millis(1500);
    let server = FakeMcpServer::start(
        "2025-11-25",
        ToolCallReply::ResumeAfterClose {
            retry_ms: retry.as_millis() as u64,
        },
    )
    .await;
    let connection = open(&server.url(), ElicitationPolicy::Unsupported)
        .await
        .expect("connects");

    // The call completes only through the resumed stream.
    assert_eq!(call_echo(&connection, json!({})).await, "resumed");

    let resumed: Vec<_> = server
        .gets()
        .into_iter()
        .filter(|get| get.header("last-event-id").is_some())
        .collect();
    assert_eq!(resumed.len(), 1, "one resumption: {resumed:?}");
    let get = &resumed[0];
    assert_eq!(get.header("last-event-id"), Some(FAKE_MCP_PRIMING_EVENT));
    assert_eq!(get.header("mcp-session-id"), Some("fake-mcp-session"));
    let closed = server
        .stream_closed_at()
        .expect("the tool call's stream ended");
    let waited = get.at.duration_since(closed);
    assert!(
        waited >= retry,
        "reconnected after {waited:?}, before the stream's retry of {retry:?}"
    );
}
