//! OAuth client credentials against a fake token endpoint, in front of a real server: the
//! token is fetched once, cached, refreshed before it expires, and sent on every request.

use std::time::Duration;

use antler::agent_api::StopReason;
use antler_store::messages::ToolStatus;
use antler_test_support::{AuthProxy, FakeTokenEndpoint};
use serde_json::json;

use super::{Fixture, answer, calls, everything, start_http_server, tool_messages};

#[tokio::test]
async fn client_credentials_token_is_cached_refreshed_and_injected() {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, "streamableHttp").await;
    let proxy = AuthProxy::start(&format!("http://127.0.0.1:{port}")).await;
    // 62 s tokens refreshed 60 s early: the cached token is good for 2 s.
    let tokens = FakeTokenEndpoint::start(62).await;
    // Trusted: later calls would otherwise wait for approval once the first result tainted
    // the thread; this test is about the tokens.
    let f = Fixture::new(
        json!({"secured": {
            "type": "http",
            "trusted": true,
            "url": format!("{}/mcp", proxy.url),
            "oauth": {
                "token_url": tokens.url,
                "grant_type": "client_credentials",
                "client_id": "antler",
                "client_secret": "s3cret",
                "scope": "tools",
                "audience": "mcp"
            }
        }}),
        false,
        vec![
            calls(&[("secured_echo", json!({"message": "one"}))]),
            calls(&[("secured_echo", json!({"message": "two"}))]),
            answer("done"),
        ],
    );
    let outcome = f.run("o", "go").await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    for result in tool_messages(&outcome) {
        assert_eq!(result.status, ToolStatus::Success, "{}", result.content);
    }
    // Handshake, listing and two calls: several requests, one token.
    assert_eq!(tokens.forms().len(), 1, "the token is cached");
    let form = &tokens.forms()[0];
    for (key, value) in [
        ("grant_type", "client_credentials"),
        ("client_id", "antler"),
        ("client_secret", "s3cret"),
        ("scope", "tools"),
        ("audience", "mcp"),
    ] {
        assert!(
            form.contains(&(key.to_string(), value.to_string())),
            "{key} in {form:?}"
        );
    }
    let seen = proxy.authorizations();
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(
        seen.iter().all(|a| a.as_deref() == Some("Bearer tok-1")),
        "{seen:?}"
    );

    // Past the refresh point (expiry minus the skew) the next request gets a new token.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    f.model
        .push(calls(&[("secured_echo", json!({"message": "three"}))]));
    f.model.push(answer("done"));
    let outcome = f.run("o", "again").await;
    let last = tool_messages(&outcome).pop().unwrap();
    assert_eq!(last.status, ToolStatus::Success, "{}", last.content);
    assert_eq!(tokens.forms().len(), 2, "refreshed once, ahead of expiry");
    assert_eq!(
        proxy.authorizations().last().unwrap().as_deref(),
        Some("Bearer tok-2")
    );
}
