//! The daemon's TCP listener: the accept backlog, a cap on connections served at once, and the
//! per-connection HTTP limits (request head size, idle timeout), from `gateway.*`.
//!
//! axum's `serve` takes the kernel's default backlog (128 connections waiting to be accepted:
//! a burst of a thousand clients got resets) and no limits, so the daemon runs its own accept
//! loop on hyper's connection builder. Past `max_connections`, accepting pauses and new
//! connections wait in the backlog rather than being refused.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::GatewayConfig;

/// hyper's smallest accepted read buffer; the request head must fit in the buffer.
const MIN_BUFFER: usize = 8192;
/// How long accepting pauses after an error such as running out of file descriptors.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The limits of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerLimits {
    pub backlog: u32,
    pub max_connections: usize,
    pub max_header_bytes: usize,
    pub idle_timeout: Duration,
}

impl ListenerLimits {
    pub fn from_config(gateway: &GatewayConfig) -> Self {
        Self {
            backlog: gateway.backlog.max(1),
            max_connections: gateway.max_connections.max(1),
            max_header_bytes: gateway.max_header_bytes.max(MIN_BUFFER),
            idle_timeout: Duration::from_secs(gateway.idle_timeout_seconds.max(1)),
        }
    }
}

/// Binds `addr` with a listen backlog of `backlog` (the kernel caps it at `somaxconn`).
pub fn bind(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As std's `TcpListener::bind` does: a restart may bind while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// Serves `app` on `listener` until `stop` fires, then lets open connections finish their
/// requests (graceful shutdown) and returns.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: ListenerLimits,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let builders = Arc::new(Builders::new(&limits));
    loop {
        let slot = tokio::select! {
            _ = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "Could not accept a connection; pausing briefly");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let (builders, watcher, stop) = (builders.clone(), graceful.watcher(), stop.clone());
        tokio::spawn(async move {
            let _slot = slot;
            // Bounded like a slow request head: a client that never speaks is closed, and one
            // still silent when the daemon stops does not hold the stop up.
            let protocol = tokio::select! {
                _ = stop.cancelled() => return,
                peeked = tokio::time::timeout(limits.idle_timeout, Protocol::of(&stream)) => {
                    match peeked {
                        Ok(Ok(protocol)) => protocol,
                        _ => return,
                    }
                }
            };
            let connection = builders
                .for_protocol(protocol)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%error, "Connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// What a connection speaks: HTTP/1.1, or HTTP/2 with prior knowledge (h2c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// HTTP/2's connection preface, the first bytes an h2c client sends.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Protocol {
    /// Tells the protocol from the first bytes without consuming them.
    ///
    /// hyper's automatic detection reads them and replays them in front of the stream, which
    /// makes the HTTP/1 read buffer grow past its first 8 KiB on every connection: 8 KiB more
    /// per request in flight. Peeking leaves the bytes where hyper reads them anyway.
    async fn of(stream: &TcpStream) -> io::Result<Self> {
        let mut first = [0u8; H2_PREFACE.len()];
        loop {
            let read = stream.peek(&mut first).await?;
            if read == 0 || first[..read] != H2_PREFACE[..read] {
                // A closed connection is left to hyper, which ends it quietly.
                return Ok(Self::Http1);
            }
            if read == H2_PREFACE.len() {
                return Ok(Self::Http2);
            }
            // A prefix of the preface (as short as the "P" of a POST): wait for more bytes.
            // Peeking again at once would return the same bytes in a busy loop.
            tokio::time::sleep(PREFACE_WAIT).await;
        }
    }
}

/// How long to wait for more bytes while the first ones could still be HTTP/2's preface.
const PREFACE_WAIT: Duration = Duration::from_millis(2);

/// A connection builder per protocol, both with the listener's limits.
struct Builders {
    http1: Builder<TokioExecutor>,
    http2: Builder<TokioExecutor>,
}

impl Builders {
    fn new(limits: &ListenerLimits) -> Self {
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            // Covers a slow request head and the wait for the next request on a kept-alive
            // connection: hyper arms it whenever it starts reading a head.
            .header_read_timeout(limits.idle_timeout)
            .max_buf_size(limits.max_header_bytes);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(limits.idle_timeout)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
        Self {
            http1: builder.clone().http1_only(),
            http2: builder.http2_only(),
        }
    }

    fn for_protocol(&self, protocol: Protocol) -> &Builder<TokioExecutor> {
        match protocol {
            Protocol::Http1 => &self.http1,
            Protocol::Http2 => &self.http2,
        }
    }
}
