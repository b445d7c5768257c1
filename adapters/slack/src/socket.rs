//! Socket Mode as a supervised transport: `apps.connections.open` → WebSocket → `hello` →
//! envelopes, each journalled before it is acknowledged.
//!
//! Our own loop rather than slack-morphism's listener, which (verified here) retries a refused
//! app token quietly every 30 s with no error reaching the caller, ignores a `disconnect`
//! without `debug_info.host`, and can finish opening a socket after it was shut down (a ghost
//! Slack keeps delivering to). Here every connection slot is one sequence: open a URL, connect,
//! wait for `hello` (then the channel is live), serve envelopes one at a time, and on
//! `disconnect`, a close, or silence past `stale_after` (pings go out every `ping_interval`)
//! close the socket — handshake included — *before* opening the next. A refused token ends the
//! transport with a fatal error; other failures end it with an error the daemon retries with
//! backoff (visible as degraded health), never silently.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{ChannelError, Transport, TransportContext};
use async_trait::async_trait;
use futures::stream::FuturesUnordered;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use slack_morphism::SlackApiToken;
use slack_morphism::prelude::SlackApiAppsConnectionOpenRequest;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use crate::SlackChannel;
use crate::api::{SlackApi, token};
use crate::buttons::click_message;
use crate::config::{DmThreading, SocketTiming};
use crate::convert::{command_message, event_message};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a closing socket may take to finish the close handshake before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// A connection that ends sooner than this after its hello waits before the next one.
const SHORT_LIVED: Duration = Duration::from_secs(5);

/// `apps.connections.open` with the app token: a fresh WebSocket URL.
pub(crate) async fn open_url(
    api: &SlackApi,
    app_token: &SlackApiToken,
) -> Result<String, ChannelError> {
    let opened = api
        .call(
            "apps.connections.open",
            api.session(app_token)
                .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new()),
        )
        .await
        .map_err(|error| match error {
            ChannelError::Unauthorized(detail) => ChannelError::Unauthorized(format!(
                "{detail} for channels.slack.app_token (an app-level token, xapp-…, with connections:write, and Socket Mode turned on for the app)"
            )),
            other => other,
        })?;
    Ok(opened.url.0.to_string())
}

pub(crate) struct SocketTransport {
    channel: Arc<SlackChannel>,
    app_token: SlackApiToken,
    connections: u32,
    timing: SocketTiming,
    dm_threading: DmThreading,
    /// The URL opened while connecting, for the first connection (`apps.connections.open` is a
    /// Tier 1 method: no need to call it twice in a row).
    first_url: Mutex<Option<String>>,
}

/// Why a connection ended.
enum End {
    /// The transport is stopping.
    Stopped,
    /// Slack asked for it or the connection died after working: connect again now.
    Reconnect(String),
    /// The transport must end with this error (the daemon retries, or stops if fatal).
    Failed(ChannelError),
}

/// What one frame from Slack asks for.
enum Frame {
    Hello,
    Disconnect(String),
    Ack(String),
    Failed(ChannelError),
    Nothing,
}

impl SocketTransport {
    pub(crate) fn new(
        channel: Arc<SlackChannel>,
        app_token: &str,
        connections: u32,
        timing: SocketTiming,
        dm_threading: DmThreading,
        first_url: String,
    ) -> Self {
        Self {
            channel,
            app_token: token(app_token),
            connections,
            timing,
            dm_threading,
            first_url: Mutex::new(Some(first_url)),
        }
    }

    /// One connection slot: connections one after the other until stopped or failed.
    async fn slot(
        &self,
        ctx: &TransportContext,
        halt: &CancellationToken,
    ) -> Result<(), ChannelError> {
        loop {
            let first = self
                .first_url
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            let url = match first {
                Some(url) => url,
                None => tokio::select! {
                    _ = halt.cancelled() => return Ok(()),
                    url = open_url(&self.channel.api, &self.app_token) => url?,
                },
            };
            let mut socket = tokio::select! {
                _ = halt.cancelled() => return Ok(()),
                socket = tokio::time::timeout(self.timing.hello_timeout, self.connect(&url)) => match socket {
                    Ok(socket) => socket?,
                    Err(_) => return Err(ChannelError::Network("connecting to slack's socket timed out".into())),
                },
            };
            let (end, lived) = self.serve(&mut socket, ctx, halt).await;
            close(socket).await;
            match end {
                End::Stopped => return Ok(()),
                End::Failed(error) => return Err(error),
                End::Reconnect(reason) => {
                    tracing::info!(reason, "Slack socket closed; reconnecting");
                    if lived < SHORT_LIVED {
                        tokio::select! {
                            _ = halt.cancelled() => return Ok(()),
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                }
            }
        }
    }

    async fn connect(&self, url: &str) -> Result<Socket, ChannelError> {
        let failed =
            |e: &dyn std::fmt::Display| ChannelError::Network(format!("slack socket: {e}"));
        // Plain ws:// only against a plain-http API (tests, local servers).
        let plain_allowed = self.channel.api.base_url.scheme() == "http";
        let connector = if url.starts_with("wss://") {
            Connector::Rustls(tls_config().map_err(|e| failed(&e))?)
        } else if url.starts_with("ws://") && plain_allowed {
            Connector::Plain
        } else {
            return Err(ChannelError::Platform(format!(
                "slack gave an unexpected socket url scheme: {}",
                url.split(':').next().unwrap_or("")
            )));
        };
        let (socket, _) =
            tokio_tungstenite::connect_async_tls_with_config(url, None, true, Some(connector))
                .await
                .map_err(|e| failed(&e))?;
        Ok(socket)
    }

    /// Serves one connection; returns why it ended and how long it was live.
    async fn serve(
        &self,
        socket: &mut Socket,
        ctx: &TransportContext,
        halt: &CancellationToken,
    ) -> (End, Duration) {
        let connected = Instant::now();
        let mut live_since: Option<Instant> = None;
        let lived = |since: Option<Instant>| since.map(|at| at.elapsed()).unwrap_or_default();
        let mut last_heard = Instant::now();
        let mut ping = tokio::time::interval_at(
            Instant::now() + self.timing.ping_interval,
            self.timing.ping_interval,
        );
        let hello_deadline = tokio::time::sleep_until(connected + self.timing.hello_timeout);
        tokio::pin!(hello_deadline);
        loop {
            let frame = tokio::select! {
                _ = halt.cancelled() => return (End::Stopped, lived(live_since)),
                _ = &mut hello_deadline, if live_since.is_none() => {
                    let error = ChannelError::Network(format!(
                        "slack sent no hello within {} s of connecting",
                        self.timing.hello_timeout.as_secs()
                    ));
                    return (End::Failed(error), Duration::ZERO);
                }
                _ = ping.tick() => {
                    if last_heard.elapsed() > self.timing.stale_after {
                        let reason = format!("nothing from slack for {} s", last_heard.elapsed().as_secs());
                        return (End::Reconnect(reason), lived(live_since));
                    }
                    if let Err(error) = socket.send(Message::Ping(Vec::new().into())).await {
                        return (End::Reconnect(format!("ping failed: {error}")), lived(live_since));
                    }
                    continue;
                }
                frame = socket.next() => frame,
            };
            last_heard = Instant::now();
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(_))) | None => {
                    let reason = "slack closed the connection".to_string();
                    return match live_since {
                        Some(_) => (End::Reconnect(reason), lived(live_since)),
                        None => (End::Failed(ChannelError::Network(reason)), Duration::ZERO),
                    };
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => {
                    let reason = format!("socket error: {error}");
                    return match live_since {
                        Some(_) => (End::Reconnect(reason), lived(live_since)),
                        None => (End::Failed(ChannelError::Network(reason)), Duration::ZERO),
                    };
                }
            };
            match self.frame(text.as_str(), ctx).await {
                Frame::Hello => {
                    live_since = Some(Instant::now());
                    ctx.report_live();
                }
                Frame::Disconnect(reason) => {
                    return (
                        End::Reconnect(format!("slack asked to reconnect ({reason})")),
                        lived(live_since),
                    );
                }
                Frame::Ack(ack) => {
                    if let Err(error) = socket.send(Message::Text(ack.into())).await {
                        return (
                            End::Reconnect(format!("ack failed: {error}")),
                            lived(live_since),
                        );
                    }
                }
                // Not acknowledged: Slack delivers the envelope again.
                Frame::Failed(error) => return (End::Failed(error), lived(live_since)),
                Frame::Nothing => {}
            }
        }
    }

    async fn frame(&self, text: &str, ctx: &TransportContext) -> Frame {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            tracing::warn!("Slack sent an unreadable socket frame");
            return Frame::Nothing;
        };
        let kind = value["type"].as_str().unwrap_or("");
        match kind {
            "hello" => return Frame::Hello,
            "disconnect" => {
                return Frame::Disconnect(
                    value["reason"].as_str().unwrap_or("unknown").to_string(),
                );
            }
            "events_api" | "slash_commands" | "interactive" => {}
            other => {
                tracing::debug!(kind = other, "Ignoring a slack socket frame");
                return Frame::Nothing;
            }
        }
        let Some(envelope_id) = value["envelope_id"].as_str() else {
            return Frame::Nothing;
        };
        let identity = &self.channel.identity;
        let payload = &value["payload"];
        let message = match kind {
            "events_api" => event_message(payload, identity, self.dm_threading),
            "slash_commands" => command_message(payload, identity),
            _ => click_message(payload, identity),
        };
        if let Some(message) = message
            && let Err(error) = ctx.sink.accept(vec![message]).await
        {
            return Frame::Failed(ChannelError::Platform(error.to_string()));
        }
        Frame::Ack(json!({"envelope_id": envelope_id}).to_string())
    }
}

#[async_trait]
impl Transport for SocketTransport {
    /// Runs every connection slot; the first failure stops the others (each closes its socket)
    /// and ends the run with that failure.
    async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError> {
        let halt = ctx.stop.child_token();
        let mut slots: FuturesUnordered<_> = (0..self.connections)
            .map(|_| self.slot(&ctx, &halt))
            .collect();
        let mut failure = None;
        while let Some(result) = slots.next().await {
            if let Err(error) = result {
                halt.cancel();
                failure.get_or_insert(error);
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Closes a socket with the close handshake (bounded), so Slack stops counting it before the
/// next connection opens.
async fn close(mut socket: Socket) {
    let handshake = async {
        let _ = socket.close(None).await;
        while let Some(Ok(_)) = socket.next().await {}
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, handshake).await;
}

/// TLS for `wss://` with ring and webpki roots, independent of any process-wide provider.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_builds_without_a_process_provider() {
        assert!(tls_config().is_ok());
    }
}
