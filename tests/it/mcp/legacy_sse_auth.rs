//! The legacy HTTP+SSE transport answers a server's 401/403 through the token source, like
//! streamable HTTP: a message POST refused for scope is sent again with the wider token.

use antler_test_support::{AuthProxy, FakeTokenEndpoint};
use serde_json::json;

use super::{Fixture, answer, calls, everything, start_http_server, tool_messages};

#[tokio::test]
async fn a_message_refused_for_scope_is_sent_again_with_a_wider_token() {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, "sse").await;
    let upstream = format!("http://127.0.0.1:{port}");
    let tokens = FakeTokenEndpoint::start_with(3600, &[], &[]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &["mcp:read"], Some("tools:call")).await;
    let f = Fixture::new(
        json!({"secured": {
            "type": "sse",
            "trusted": true,
            "url": format!("{}/sse", proxy.url),
            "oauth": {
                "grant_type": "client_credentials",
                "token_url": tokens.url,
                "client_id": "antler",
                "client_secret": "s3cret",
                "scope": "mcp:read"
            }
        }}),
        false,
        vec![
            calls(&[("secured_echo", json!({"message": "over sse"}))]),
            answer("done"),
        ],
    );
    let outcome = f.run("s", "go").await;
    let results = tool_messages(&outcome);
    assert_eq!(results.len(), 1, "{:?}", outcome.error);
    assert!(
        results[0].content.contains("over sse"),
        "{}",
        results[0].content
    );
    let scopes: Vec<_> = tokens
        .requests()
        .iter()
        .map(|r| r.field("scope").unwrap_or_default())
        .collect();
    assert_eq!(
        scopes,
        ["mcp:read", "mcp:read tools:call"],
        "held ∪ challenged"
    );
    assert_eq!(
        proxy.authorizations().last().unwrap().as_deref(),
        Some("Bearer tok-2"),
        "the refused POST went again with the wider token"
    );
}
