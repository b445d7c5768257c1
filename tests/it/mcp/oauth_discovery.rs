//! OAuth discovered from the server (MCP 2025-11-25 "Authorization"): no `token_url`
//! configured, the first request answered 401 with a `resource_metadata` challenge, the
//! authorization server found through the protected-resource metadata, a client_credentials
//! token fetched with each client authentication method, and a 403 `insufficient_scope` on a
//! tool call answered with a wider token (at most three times). The fakes sit in front of the
//! real server-everything.

use antler::agent_api::StopReason;
use antler_store::messages::ToolStatus;
use antler_test_support::{AuthProxy, FakeTokenEndpoint, SeenTokenRequest};
use serde_json::{Value, json};

use super::{Fixture, answer, calls, everything, start_http_server, tool_messages};

/// A P-256 key made for these tests only (`openssl genpkey -algorithm EC`).
const EC_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgJY+hti+IS/4VTmYw
LJZbFqJaLZtqhxm6N00Ayn2rfZihRANCAAQ8HfXXErQ+fPXZrUQpWBO+ldhAtA08
NlV1mIpwFU99it+D2t/VlISNpPFYtRDoQiFrXH9uyU/rcy6P9xP4aaug
-----END PRIVATE KEY-----
";
const EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEPB311xK0Pnz12a1EKVgTvpXYQLQN
PDZVdZiKcBVPfYrfg9rf1ZSEjaTxWLUQ6EIha1x/bslP63Muj/cT+GmroA==
-----END PUBLIC KEY-----
";

/// One run calling `secured_echo` once through `proxy` with `oauth` settings.
async fn echo_once(proxy: &AuthProxy, oauth: Value) -> (Fixture, antler::agent::RunOutcome) {
    let f = Fixture::new(
        json!({"secured": {
            "type": "http",
            "trusted": true,
            "url": format!("{}/mcp", proxy.url),
            "oauth": oauth,
        }}),
        false,
        vec![
            calls(&[("secured_echo", json!({"message": "one"}))]),
            answer("done"),
        ],
    );
    let outcome = f.run("o", "go").await;
    (f, outcome)
}

fn assert_echoed(outcome: &antler::agent::RunOutcome) {
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let results = tool_messages(outcome);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].status,
        ToolStatus::Success,
        "{}",
        results[0].content
    );
}

/// The discovery requests and the token request every method shares.
fn assert_discovered(proxy: &AuthProxy, request: &SeenTokenRequest) {
    assert_eq!(
        proxy.metadata_requests(),
        ["/.well-known/oauth-protected-resource/mcp"],
        "the challenge's metadata URL, once"
    );
    assert_eq!(
        request.field("grant_type").as_deref(),
        Some("client_credentials")
    );
    let resource = format!("{}/mcp", proxy.url);
    assert_eq!(request.field("resource"), Some(resource), "RFC 8707");
}

#[tokio::test]
async fn discovered_client_credentials_with_each_client_authentication_method() {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, "streamableHttp").await;
    let upstream = format!("http://127.0.0.1:{port}");
    let settings = json!({
        "grant_type": "client_credentials",
        "client_id": "antler",
        "client_secret": "s3cret",
    });

    // The server lists client_secret_basic: the pair goes in the Authorization header.
    let tokens = FakeTokenEndpoint::start_with(3600, &["client_secret_basic"], &[]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &[], None).await;
    let (_f, outcome) = echo_once(&proxy, settings.clone()).await;
    assert_echoed(&outcome);
    let requests = tokens.requests();
    assert_eq!(requests.len(), 1, "one token for the whole session");
    assert_discovered(&proxy, &requests[0]);
    assert_eq!(requests[0].method(), "client_secret_basic");
    assert_eq!(requests[0].field("client_secret"), None, "not in the body");
    assert_eq!(
        requests[0].field("scope"),
        None,
        "nothing to ask for: omitted"
    );
    let seen = proxy.authorizations();
    assert_eq!(seen[0], None, "nothing is sent before the challenge");
    assert!(
        seen[1..]
            .iter()
            .all(|a| a.as_deref() == Some("Bearer tok-1")),
        "{seen:?}"
    );

    // Only client_secret_post: the secret goes in the form; the resource's scopes are asked.
    let tokens = FakeTokenEndpoint::start_with(3600, &["client_secret_post"], &[]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &["mcp:read", "mcp:tools"], None).await;
    let (_f, outcome) = echo_once(&proxy, settings.clone()).await;
    assert_echoed(&outcome);
    let requests = tokens.requests();
    assert_eq!(requests.len(), 1);
    assert_discovered(&proxy, &requests[0]);
    assert_eq!(requests[0].method(), "client_secret_post");
    assert_eq!(
        requests[0].field("scope").as_deref(),
        Some("mcp:read mcp:tools")
    );

    // private_key_jwt: an assertion signed with the key, for the issuer.
    let tokens = FakeTokenEndpoint::start_with(3600, &["private_key_jwt"], &[]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &[], None).await;
    let (_f, outcome) = echo_once(
        &proxy,
        json!({
            "grant_type": "client_credentials",
            "client_id": "antler",
            "private_key": EC_KEY,
            "scope": "configured",
        }),
    )
    .await;
    assert_echoed(&outcome);
    let requests = tokens.requests();
    assert_eq!(requests.len(), 1);
    assert_discovered(&proxy, &requests[0]);
    assert_eq!(requests[0].method(), "private_key_jwt");
    assert_eq!(requests[0].field("scope").as_deref(), Some("configured"));
    let assertion = requests[0].field("client_assertion").unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_audience(&[tokens.issuer.as_str()]);
    let claims = jsonwebtoken::decode::<Value>(
        &assertion,
        &jsonwebtoken::DecodingKey::from_ec_pem(EC_PUBLIC.as_bytes()).unwrap(),
        &validation,
    )
    .expect("a valid ES256 assertion for the issuer")
    .claims;
    assert_eq!(claims["iss"], "antler");
    assert_eq!(claims["sub"], "antler");
    assert!(claims["jti"].is_string());

    // A refused client: the error names the server's answer and what to check.
    let tokens = FakeTokenEndpoint::start_with(3600, &["client_secret_basic"], &[]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &[], None).await;
    let (f, _) = echo_once(
        &proxy,
        json!({"grant_type": "client_credentials", "client_id": "antler", "client_secret": "wrong"}),
    )
    .await;
    let reports = f.harness.mcp().servers().await.unwrap();
    let error = match &reports[0].status {
        antler::mcp::ServerStatus::Failed { error } => error.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        error.contains("invalid_client") && error.contains("check oauth.client_id"),
        "{error}"
    );
    assert!(!error.contains("wrong"), "never the secret: {error}");
}

#[tokio::test]
async fn a_tool_call_refused_for_scope_is_retried_with_a_wider_token_at_most_three_times() {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, "streamableHttp").await;
    let upstream = format!("http://127.0.0.1:{port}");
    let settings = json!({
        "grant_type": "client_credentials",
        "client_id": "antler",
        "client_secret": "s3cret",
    });

    // Step-up: the session starts with the resource's scope; the call asks for tools:call.
    let tokens = FakeTokenEndpoint::start_with(3600, &[], &[]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &["mcp:read"], Some("tools:call")).await;
    let (_f, outcome) = echo_once(&proxy, settings.clone()).await;
    assert_echoed(&outcome);
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
        Some("Bearer tok-2")
    );

    // The authorization server never grants the scope: three authorizations, then the call
    // fails with the server's refusal instead of looping.
    let tokens = FakeTokenEndpoint::start_with(3600, &[], &["tools:call"]).await;
    let proxy = AuthProxy::protected(&upstream, &tokens, &["mcp:read"], Some("tools:call")).await;
    let (_f, outcome) = echo_once(&proxy, settings).await;
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
    let results = tool_messages(&outcome);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].status,
        ToolStatus::Error,
        "{}",
        results[0].content
    );
    assert!(results[0].content.contains("403"), "{}", results[0].content);
    let scopes: Vec<_> = tokens
        .requests()
        .iter()
        .map(|r| r.field("scope").unwrap_or_default())
        .collect();
    // One token for the session, then three step-ups for the call (the token in force is
    // kept for what it does allow: no further request).
    assert_eq!(
        scopes,
        [
            "mcp:read",
            "mcp:read tools:call",
            "mcp:read tools:call",
            "mcp:read tools:call"
        ]
    );
}
