//! The library side of `antler mcp call` and `antler mcp probe`: one session opened outside a
//! model's run (a configured server, or a URL with a server entry's headers and OAuth), its
//! handshake reported, its tools listed, one tool called.
//!
//! A person runs these, so the session's token source is interactive: a server that wants an
//! authorization the settings cannot obtain by themselves may send the person to a browser.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Map, Value};

use crate::mcp::config::{OAuthConfig, ServerConfig, Transport};
use crate::mcp::connect::{ConnectError, ConnectOptions, Connection, START_TIMEOUT, connect};
use crate::mcp::handler::ElicitationPolicy;
use crate::mcp::http::with_causes;
use crate::mcp::oauth::{TokenContext, TokenSource};

/// How a probe session differs from the daemon's.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProbeOptions {
    pub elicitation: ElicitationPolicy,
    /// Where authorization-code tokens are read and written (`None`: in memory only, so a
    /// probe of an ad-hoc URL leaves nothing behind).
    pub token_dir: Option<PathBuf>,
    /// A remote server without `oauth` settings still gets a token source (authorization code,
    /// everything discovered), so a server that answers 401 can be authorized in a browser.
    pub discover_oauth: bool,
}

/// What went wrong; each says what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("could not open a session with {server}: {source}")]
    Connect {
        server: String,
        #[source]
        source: ConnectError,
    },
    #[error(
        "{server} did not list its tools: {detail}; check that the server implements tools/list"
    )]
    List { server: String, detail: String },
    #[error(
        "calling `{tool}` of {server} failed: {detail}; check the tool's name and arguments (`antler mcp probe URL` lists the tools)"
    )]
    Call {
        server: String,
        tool: String,
        detail: String,
    },
    #[error(
        "`{tool}` of {server} did not answer within {timeout:?}; raise the server's tool_call_timeout if it is slow"
    )]
    Timeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
}

/// What the server said about itself in the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Handshake {
    /// The protocol version both sides agreed on.
    pub protocol_version: String,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    /// The capabilities the server declared, by name (`tools`, `resources`, …).
    pub capabilities: Vec<String>,
    pub instructions: Option<String>,
}

/// One open session.
pub(crate) struct ProbeSession {
    server: ServerConfig,
    connection: Connection,
}

impl ProbeSession {
    /// Connects `server` (within the usual start deadline) and runs the handshake.
    pub(crate) async fn open(
        server: &ServerConfig,
        options: &ProbeOptions,
    ) -> Result<Self, ProbeError> {
        let http = reqwest::Client::new();
        let oauth = token_source(server, &http, options);
        let connect_options = ConnectOptions {
            elicitation: options.elicitation,
        };
        let connection = connect(server, &http, oauth, &connect_options)
            .await
            .map_err(|source| ProbeError::Connect {
                server: describe(server),
                source,
            })?;
        Ok(Self {
            server: server.clone(),
            connection,
        })
    }

    /// The handshake's outcome (`None` if the session holds none, which rmcp never leaves so).
    pub(crate) fn handshake(&self) -> Option<Handshake> {
        let info = self.connection.session.peer_info()?;
        let capabilities = match serde_json::to_value(&info.capabilities) {
            Ok(Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        };
        Some(Handshake {
            protocol_version: info.protocol_version.to_string(),
            server_name: info.server_info.as_ref().map(|i| i.name.clone()),
            server_version: info.server_info.as_ref().map(|i| i.version.clone()),
            capabilities,
            instructions: info.instructions.clone(),
        })
    }

    /// Every tool the server lists (all pages).
    pub(crate) async fn tools(&self) -> Result<Vec<rmcp::model::Tool>, ProbeError> {
        let peer = self.connection.session.peer();
        let listed = tokio::time::timeout(START_TIMEOUT, peer.list_all_tools()).await;
        let list_error = |detail: String| ProbeError::List {
            server: describe(&self.server),
            detail,
        };
        match listed {
            Err(_) => Err(list_error(format!("no answer within {START_TIMEOUT:?}"))),
            Ok(Err(error)) => Err(list_error(service_error_words(&error))),
            Ok(Ok(tools)) => Ok(tools),
        }
    }

    /// Calls `tool` by the server's own name; a result with `isError` is still `Ok` (the
    /// caller decides what an error result means).
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, ProbeError> {
        let peer = self.connection.session.peer();
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let timeout = self.server.tool_call_timeout;
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => Err(ProbeError::Timeout {
                server: describe(&self.server),
                tool: tool.to_string(),
                timeout,
            }),
            Ok(Err(error)) => Err(ProbeError::Call {
                server: describe(&self.server),
                tool: tool.to_string(),
                detail: service_error_words(&error),
            }),
            Ok(Ok(result)) => Ok(result),
        }
    }

    /// Ends the session (a stdio server is stopped, an HTTP session deleted).
    pub(crate) async fn close(self) {
        let _ = self.connection.session.cancel().await;
    }
}

/// rmcp's transport errors name the transport's Rust type; what went wrong is in the error
/// it wraps (the token source's refusal, the HTTP status), said here with its causes.
fn service_error_words(error: &rmcp::ServiceError) -> String {
    match error {
        rmcp::ServiceError::TransportSend(inner) => {
            let text = with_causes(inner.error.as_ref());
            text.strip_prefix("Client error: ")
                .unwrap_or(&text)
                .to_string()
        }
        other => other.to_string(),
    }
}

/// Parses `--args`: absent is no arguments, anything but a JSON object is refused.
pub(crate) fn parse_arguments(text: Option<&str>) -> Result<Option<Map<String, Value>>, String> {
    let Some(text) = text else { return Ok(None) };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(other) => Err(format!(
            "--args must be a JSON object like '{{\"name\": \"value\"}}', not {}",
            kind_of(&other)
        )),
        Err(error) => Err(format!(
            "--args is not valid JSON ({error}); quote it for the shell, e.g. --args '{{\"a\": 1}}'"
        )),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The server as named in messages: its name, and its URL for a remote one.
fn describe(server: &ServerConfig) -> String {
    match &server.transport {
        Transport::Remote { url, .. } => format!("`{}` ({url})", server.name),
        Transport::Stdio { command, .. } => format!("`{}` (`{command}`)", server.name),
    }
}

/// The session's token source: the configured OAuth settings, or (when asked) discovered
/// authorization-code settings for a remote server that has none.
fn token_source(
    server: &ServerConfig,
    http: &reqwest::Client,
    options: &ProbeOptions,
) -> Option<Arc<TokenSource>> {
    let Transport::Remote { url, oauth, .. } = &server.transport else {
        return None;
    };
    let config = match oauth {
        Some(config) => config.as_ref().clone(),
        None if options.discover_oauth => OAuthConfig::discovered_authorization_code(),
        None => return None,
    };
    Some(Arc::new(TokenSource::new(
        config,
        http.clone(),
        TokenContext {
            server_name: server.name.clone(),
            server_url: url.clone(),
            token_dir: options.token_dir.clone(),
            interactive: true,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(parse_arguments(None), Ok(None));
        let parsed = parse_arguments(Some(r#"{"a": 1}"#)).unwrap().unwrap();
        assert_eq!(parsed["a"], 1);
        let array = parse_arguments(Some("[1]")).unwrap_err();
        assert!(
            array.contains("must be a JSON object") && array.contains("an array"),
            "{array}"
        );
        let broken = parse_arguments(Some("{a:")).unwrap_err();
        assert!(broken.contains("not valid JSON"), "{broken}");
    }
}
