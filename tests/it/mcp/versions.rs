//! Protocol version negotiation against a scripted server: an older version the client
//! supports is used as answered; a version it does not know is refused, naming both.

use std::time::Duration;

use antler::config::MapEnv;
use antler::mcp::ExtensionsConfig;
use antler::mcp::connect::{ConnectError, ConnectOptions, Connection, connect_plain};
use antler::mcp::handler::{ElicitationPolicy, OFFERED_VERSION};
use antler_test_support::{FakeMcpServer, ToolCallReply};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use serde_json::{Value, json};

/// Long enough for any of these calls on a loaded machine; a hang fails instead of stalling.
pub(super) const DEADLINE: Duration = Duration::from_secs(20);

/// Opens a session to `url` over streamable HTTP, as the daemon would.
pub(super) async fn open(
    url: &str,
    elicitation: ElicitationPolicy,
) -> Result<Connection, ConnectError> {
    let file = json!({"mcpServers": {"fake": {"type": "http", "url": url}}});
    let config = ExtensionsConfig::parse(file.to_string().as_bytes(), "test", &MapEnv::new())
        .expect("the server entry parses");
    let options = ConnectOptions { elicitation };
    connect_plain(&config.servers[0], &reqwest::Client::new(), &options).await
}

/// Calls `echo` with `arguments` and returns the text of its answer.
pub(super) async fn call_echo(connection: &Connection, arguments: Value) -> String {
    let mut params = CallToolRequestParams::new("echo");
    params.arguments = arguments.as_object().cloned();
    let call = connection.session.call_tool(params);
    let result = tokio::time::timeout(DEADLINE, call)
        .await
        .expect("the tool call answers within the deadline")
        .expect("the tool call succeeds");
    let result = serde_json::to_value(&result).unwrap();
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn an_older_version_the_client_supports_is_used_as_answered() {
    let server = FakeMcpServer::start("2025-03-26", ToolCallReply::Json).await;
    let connection = open(&server.url(), ElicitationPolicy::Unsupported)
        .await
        .expect("a 2025-03-26 server is accepted");
    assert_eq!(connection.protocol_version(), ProtocolVersion::V_2025_03_26);

    let text = call_echo(&connection, json!({"word": "hello"})).await;
    assert_eq!(text, r#"{"word":"hello"}"#);

    let initialize = server.request("initialize").unwrap();
    assert_eq!(
        initialize.body["params"]["protocolVersion"],
        OFFERED_VERSION.as_str()
    );
    assert_eq!(initialize.body["params"]["clientInfo"]["name"], "antler");
    // Requests after the handshake are made at the negotiated version.
    let call = server.request("tools/call").unwrap();
    assert_eq!(call.header("mcp-protocol-version"), Some("2025-03-26"));
}

#[tokio::test]
async fn the_offered_version_is_used_when_the_server_supports_it() {
    let server = FakeMcpServer::start(OFFERED_VERSION.as_str(), ToolCallReply::Json).await;
    let connection = open(&server.url(), ElicitationPolicy::Unsupported)
        .await
        .expect("the offered version is accepted");
    assert_eq!(connection.protocol_version(), OFFERED_VERSION);
    assert_eq!(call_echo(&connection, json!({})).await, "{}");
}

#[tokio::test]
async fn a_version_the_client_does_not_support_is_refused_naming_both() {
    let server = FakeMcpServer::start("2099-01-01", ToolCallReply::Json).await;
    let error = match open(&server.url(), ElicitationPolicy::Unsupported).await {
        Ok(_) => panic!("a 2099-01-01 server must be refused"),
        Err(error) => error,
    };
    let ConnectError::UnsupportedVersion {
        offered, answered, ..
    } = &error
    else {
        panic!("expected UnsupportedVersion, got {error}");
    };
    assert_eq!(offered, &OFFERED_VERSION);
    assert_eq!(answered.as_str(), "2099-01-01");
    let text = error.to_string();
    assert!(text.contains("2099-01-01"), "{text}");
    assert!(text.contains(OFFERED_VERSION.as_str()), "{text}");
    assert!(text.contains("upgrade"), "{text}");
    // Refused before any use: nothing but the handshake reached the server.
    assert!(server.request("tools/list").is_none());
    assert!(server.request("tools/call").is_none());
}

/// A stdio MCP server in a few lines of sh: answers `initialize` with `$VERSION`, `tools/call`
/// with "stdio ok", any other request with an empty result.
const SH_SERVER: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{[^{]*"id":\([0-9][0-9]*\).*/\1/p')
  [ -z "$id" ] && continue
  case "$line" in
    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" "$VERSION" ;;
    *'"method":"tools/call"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"stdio ok"}]}}\n' "$id" ;;
    *) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done
"#;

async fn open_stdio(version: &str) -> Result<Connection, ConnectError> {
    let file = json!({"mcpServers": {"sh": {
        "command": "sh",
        "args": ["-c", SH_SERVER],
        "env": {"VERSION": version}
    }}});
    let config = ExtensionsConfig::parse(file.to_string().as_bytes(), "test", &MapEnv::new())
        .expect("the server entry parses");
    let options = ConnectOptions::default();
    connect_plain(&config.servers[0], &reqwest::Client::new(), &options).await
}

#[tokio::test]
async fn over_stdio_an_older_version_is_used_and_an_unknown_one_refused() {
    let connection = open_stdio("2024-11-05")
        .await
        .expect("a 2024-11-05 server is accepted");
    assert_eq!(connection.protocol_version(), ProtocolVersion::V_2024_11_05);
    assert_eq!(call_echo(&connection, json!({})).await, "stdio ok");

    match open_stdio("1999-12-31").await {
        Err(ConnectError::UnsupportedVersion { answered, .. }) => {
            assert_eq!(answered.as_str(), "1999-12-31")
        }
        Err(other) => panic!("expected UnsupportedVersion, got {other}"),
        Ok(_) => panic!("a 1999-12-31 server must be refused"),
    }
}
