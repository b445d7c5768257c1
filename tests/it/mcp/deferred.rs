//! Deferred MCP tools (`tool_search.enabled`): hidden until found, then callable; a call to a
//! tool never found is refused; promotion outlives the turn.

use antler::agent_api::StopReason;
use antler_store::messages::ToolStatus;
use serde_json::json;

use super::{Fixture, answer, calls, everything, stdio_server, tool_messages};

#[tokio::test]
async fn deferred_tools_are_hidden_until_tool_search_promotes_them() {
    let Some(index) = everything() else { return };
    let f = Fixture::new(
        json!({"everything": stdio_server(&index)}),
        true,
        vec![
            calls(&[("everything_echo", json!({"message": "too early"}))]),
            calls(&[("tool_search", json!({"query": "echo back message"}))]),
            calls(&[("everything_echo", json!({"message": "now it works"}))]),
            answer("done"),
        ],
    );
    let outcome = f.run("d", "go").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let results = tool_messages(&outcome);
    assert_eq!(results[0].status, ToolStatus::Error);
    assert!(
        results[0].content.contains("tool_search"),
        "the refusal says what to do: {}",
        results[0].content
    );
    assert!(
        results[1].content.contains("everything_echo"),
        "{}",
        results[1].content
    );
    assert_eq!(
        results[2].status,
        ToolStatus::Success,
        "{}",
        results[2].content
    );
    assert!(results[2].content.contains("now it works"));
    assert!(outcome.state.promoted_tools.contains("everything_echo"));

    let requests = f.model.requests();
    let offered =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert!(offered(0).contains(&"tool_search".to_string()));
    assert!(
        !offered(0).iter().any(|n| n.starts_with("everything_")),
        "schemas hidden: {:?}",
        offered(0)
    );
    assert!(offered(2).contains(&"everything_echo".to_string()));
    assert!(!offered(2).contains(&"everything_get-sum".to_string()));
    // The prompt names every deferred tool.
    let system = requests[0].system.clone().unwrap_or_default();
    assert!(
        system.contains("everything_get-sum"),
        "deferred names in the prompt"
    );

    // A later turn still has the promoted tool.
    f.model
        .push(calls(&[("everything_echo", json!({"message": "later"}))]));
    f.model.push(answer("done"));
    let outcome = f.run("d", "again").await;
    let last = tool_messages(&outcome).pop().unwrap();
    assert_eq!(last.status, ToolStatus::Success, "{}", last.content);
}
