//! Opens one MCP session: spawns a stdio server (in its own process group, killed with the
//! session) or connects over streamable HTTP or legacy SSE, then runs the MCP handshake and
//! checks the protocol version the server answered.
//!
//! Version negotiation: Antler offers [`OFFERED_VERSION`]; a server that supports it answers
//! it, one that does not answers a version of its own. rmcp accepts whatever comes back, so the
//! check that the answer is a version Antler can speak is here: an older known version is used
//! as is (rmcp adapts the session to it and sends it in `MCP-Protocol-Version`), anything else
//! ends the session with [`ConnectError::UnsupportedVersion`].

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use reqwest::header::HeaderName;
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::ProtocolVersion;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use tokio::io::AsyncBufReadExt;
use tokio_util::task::AbortOnDropHandle;

use crate::mcp::config::{ServerConfig, Transport};
use crate::mcp::handler::{ElicitationPolicy, McpClient, OFFERED_VERSION, supported_versions};
use crate::mcp::http::{RemoteAuth, StreamableClient, with_causes};
use crate::mcp::oauth::TokenSource;
use crate::mcp::sse::SseTransport;

/// How long starting a server and the MCP handshake may take.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a broken event stream is reopened before the request it carried fails.
const SSE_RECONNECTS: usize = 5;
/// The longest wait between two attempts to reopen a broken event stream.
const SSE_RECONNECT_MAX_DELAY: Duration = Duration::from_secs(30);

pub type Session = RunningService<RoleClient, McpClient>;

/// What differs between the daemon's sessions and a person's (`antler mcp probe`).
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    pub elicitation: ElicitationPolicy,
}

/// A live session and what must live as long as it (the stderr reader of a stdio server).
pub struct Connection {
    pub session: Session,
    _stderr: Option<AbortOnDropHandle<()>>,
}

impl Connection {
    /// The protocol version the session speaks: the one the server answered.
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.session
            .peer_info()
            .map(|info| info.protocol_version.clone())
            .unwrap_or(OFFERED_VERSION)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("could not start `{command}`: {source}; is it installed and on PATH?")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not connect: {0}")]
    Transport(String),
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("no answer within {0:?}; the server is not responding")]
    Timeout(Duration),
    #[error(
        "the server answered MCP protocol version {answered} to Antler's offer of {offered}, and \
         Antler speaks only {supported}; upgrade Antler or the server to a common version"
    )]
    UnsupportedVersion {
        offered: ProtocolVersion,
        answered: ProtocolVersion,
        supported: String,
    },
}

/// rmcp's transport errors name the transport's Rust type
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error`); what went wrong is in the
/// error it wraps, said here with its causes (a refused connection, a DNS failure, the status).
fn handshake_error(error: rmcp::service::ClientInitializeError) -> ConnectError {
    use rmcp::service::ClientInitializeError;
    let ClientInitializeError::TransportError { error, .. } = error else {
        return ConnectError::Handshake(error.to_string());
    };
    let text = with_causes(error.error.as_ref());
    // rmcp's own prefix for an HTTP client failure says nothing a reader can use.
    let text = text
        .strip_prefix("Client error: ")
        .unwrap_or(&text)
        .to_string();
    ConnectError::Transport(text)
}

/// Connects `server` without OAuth within [`START_TIMEOUT`]: a session outside the manager
/// (the wire tests, a person's one-off probe of a server that needs no token).
pub async fn connect_plain(
    server: &ServerConfig,
    http: &reqwest::Client,
    options: &ConnectOptions,
) -> Result<Connection, ConnectError> {
    connect(server, http, None, options).await
}

/// Connects `server` within [`START_TIMEOUT`].
pub(crate) async fn connect(
    server: &ServerConfig,
    http: &reqwest::Client,
    oauth: Option<Arc<TokenSource>>,
    options: &ConnectOptions,
) -> Result<Connection, ConnectError> {
    match tokio::time::timeout(START_TIMEOUT, open(server, http, oauth, options)).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError::Timeout(START_TIMEOUT)),
    }
}

async fn open(
    server: &ServerConfig,
    http: &reqwest::Client,
    oauth: Option<Arc<TokenSource>>,
    options: &ConnectOptions,
) -> Result<Connection, ConnectError> {
    let handshake = handshake_error;
    let client = McpClient::new(options.elicitation);
    match &server.transport {
        Transport::Stdio { command, args, env } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .envs(env.iter().map(|(k, v)| (k, v.expose())))
                .kill_on_drop(true);
            let mut wrapped = CommandWrap::from(cmd);
            // npx and shell wrappers start the real server as a grandchild: killing the group
            // takes it down too.
            wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
            let (child, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| ConnectError::Spawn {
                    command: command.clone(),
                    source,
                })?;
            // Owned by the session (`_stderr`): aborted when the session is dropped.
            #[allow(clippy::disallowed_methods)]
            let stderr = stderr.map(|stderr| {
                let name = server.name.clone();
                AbortOnDropHandle::new(tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(server = %name, "{line}");
                    }
                }))
            });
            let session = client.serve(child).await.map_err(handshake)?;
            let session = negotiated(session).await?;
            Ok(Connection {
                session,
                _stderr: stderr,
            })
        }
        Transport::Remote {
            kind, url, headers, ..
        } => {
            let headers = headers
                .iter()
                .filter_map(|(name, value)| {
                    HeaderName::from_bytes(name.as_bytes())
                        .ok()
                        .map(|name| (name, value.clone()))
                })
                .collect();
            let auth = RemoteAuth::new(headers, oauth);
            let session = match kind {
                crate::mcp::config::TransportKind::Sse => {
                    let transport = SseTransport::connect(http.clone(), auth, url)
                        .await
                        .map_err(|e| ConnectError::Transport(with_causes(&e)))?;
                    client.serve(transport).await.map_err(handshake)?
                }
                _ => {
                    let http_client = StreamableClient {
                        http: http.clone(),
                        auth,
                    };
                    let transport =
                        StreamableHttpClientTransport::with_client(http_client, http_config(url));
                    client.serve(transport).await.map_err(handshake)?
                }
            };
            let session = negotiated(session).await?;
            Ok(Connection {
                session,
                _stderr: None,
            })
        }
    }
}

/// The streamable-HTTP transport's settings: reconnecting a broken event stream follows the
/// stream's own `retry:` first (SEP-1699), then doubles from a second, a bounded number of
/// times (rmcp's default retries forever, which would hold a tool call until its timeout).
fn http_config(url: &str) -> StreamableHttpClientTransportConfig {
    let mut backoff = ExponentialBackoff::default();
    backoff.max_times = Some(SSE_RECONNECTS);
    backoff.max_delay = Some(SSE_RECONNECT_MAX_DELAY);
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    config.retry_config = Arc::new(backoff);
    config
}

/// `session` when the server answered a version Antler speaks; otherwise the session is
/// closed and the refusal names both versions.
async fn negotiated(session: Session) -> Result<Session, ConnectError> {
    let answered = session
        .peer_info()
        .map(|info| info.protocol_version.clone());
    let Some(answered) = answered else {
        return Ok(session);
    };
    let supported = supported_versions();
    if supported.contains(&answered) {
        tracing::debug!(version = %answered, "MCP protocol version negotiated");
        return Ok(session);
    }
    let _ = session.cancel().await;
    Err(ConnectError::UnsupportedVersion {
        offered: OFFERED_VERSION,
        answered,
        supported: supported
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::DynamicTransportError;

    #[test]
    fn transport_failures_name_what_happened_not_rust_types() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let error = ClientInitializeError::TransportError {
            error: DynamicTransportError::from_parts(
                "rmcp::transport::worker::WorkerTransport<antler::mcp::http::StreamableClient>",
                std::any::TypeId::of::<()>(),
                Box::new(io),
            ),
            context: "send initialize request".into(),
        };
        let text = handshake_error(error).to_string();
        assert_eq!(text, "could not connect: Connection refused");
        assert!(!text.contains("::"), "{text}");
    }
}
