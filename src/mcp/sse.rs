//! The legacy HTTP+SSE transport (MCP 2024-11-05) as an rmcp client transport: rmcp 3 dropped
//! its own, and many servers still speak only this.
//!
//! `GET url` opens an event stream whose first `endpoint` event names the URL to POST
//! messages to; every later `message` event carries one JSON-RPC message from the server. The
//! SSE framing is parsed by `sse-stream` (the parser rmcp itself uses); a reader task owned by the
//! transport feeds a bounded channel and is aborted when the transport is dropped.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::ACCEPT;
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::SseStream;
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::mcp::http::RemoteAuth;
use crate::mcp::oauth::OAuthError;

/// Messages the reader may hold before the service takes them.
const QUEUE: usize = 64;
/// A POST of one message taking longer than this fails that message.
const POST_TIMEOUT: Duration = Duration::from_secs(60);
/// Challenges answered for one request before its 401/403 stands (a 401 for a token, then a
/// 403 for a wider scope).
const MAX_CHALLENGES: usize = 2;

#[derive(Debug, thiserror::Error)]
pub(crate) enum SseError {
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("{0}")]
    OAuth(#[from] OAuthError),
    #[error("the server answered HTTP {status} to {what}")]
    Status { what: &'static str, status: u16 },
    #[error("{0}")]
    Protocol(Cow<'static, str>),
}

pub(crate) struct SseTransport {
    http: reqwest::Client,
    auth: RemoteAuth,
    endpoint: Arc<str>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    _reader: AbortOnDropHandle<()>,
}

impl SseTransport {
    /// Opens the event stream and waits for the `endpoint` event.
    pub(crate) async fn connect(
        http: reqwest::Client,
        auth: RemoteAuth,
        url: &str,
    ) -> Result<Self, SseError> {
        let base = url::Url::parse(url).map_err(|e| SseError::Protocol(e.to_string().into()))?;
        let build = || http.get(url).header(ACCEPT, "text/event-stream");
        let response = send_challenged(&auth, build).await?;
        if !response.status().is_success() {
            return Err(SseError::Status {
                what: "the event-stream GET",
                status: response.status().as_u16(),
            });
        }
        let mut events = SseStream::from_bytes_stream(response.bytes_stream());
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    let data = event.data.unwrap_or_default();
                    let joined = base.join(data.trim()).map_err(|e| {
                        SseError::Protocol(format!("bad endpoint event: {e}").into())
                    })?;
                    if joined.origin() != base.origin() {
                        // The endpoint would receive our headers and tokens.
                        return Err(SseError::Protocol(
                            "the endpoint event names another origin; refusing to post there"
                                .into(),
                        ));
                    }
                    break joined.to_string();
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => return Err(SseError::Protocol(error.to_string().into())),
                None => {
                    return Err(SseError::Protocol(
                        "the event stream ended before the endpoint event".into(),
                    ));
                }
            }
        };
        let (sender, incoming) = mpsc::channel(QUEUE);
        // Owned by the transport (`_reader`, an AbortOnDropHandle): aborted when it is dropped.
        #[allow(clippy::disallowed_methods)]
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::warn!(%error, "The MCP server's event stream broke");
                        break;
                    }
                };
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else { continue };
                match serde_json::from_str::<ServerJsonRpcMessage>(&data) {
                    Ok(message) => {
                        if sender.send(message).await.is_err() {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "Ignoring an MCP message that is not JSON-RPC")
                    }
                }
            }
        });
        Ok(Self {
            http,
            auth,
            endpoint: endpoint.into(),
            incoming,
            _reader: AbortOnDropHandle::new(reader),
        })
    }
}

/// Sends the request `build` makes; a 401/403 is put to the token source, and the request is
/// sent again (freshly decorated) when it obtained what the server asked for.
async fn send_challenged(
    auth: &RemoteAuth,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, SseError> {
    let mut challenges = 0;
    loop {
        let response = auth.decorate(build()).await?.send().await?;
        let status = response.status();
        if !matches!(
            status,
            reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN
        ) || challenges == MAX_CHALLENGES
        {
            return Ok(response);
        }
        let www_authenticate = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !auth.challenge(status, www_authenticate.as_deref()).await? {
            return Ok(response);
        }
        challenges += 1;
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let http = self.http.clone();
        let auth = self.auth.clone();
        let endpoint = self.endpoint.clone();
        async move {
            let build = || {
                http.post(endpoint.as_ref())
                    .json(&item)
                    .timeout(POST_TIMEOUT)
            };
            let response = send_challenged(&auth, build).await?;
            if !response.status().is_success() {
                return Err(SseError::Status {
                    what: "a message POST",
                    status: response.status().as_u16(),
                });
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}
