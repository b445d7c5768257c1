//! The daemon's TCP listener: the accept backlog, caps on connections (in all, per client, a
//! reserve for loopback), and the per-connection HTTP limits (request head size, idle timeout),
//! from `gateway.*`.
//!
//! axum's `serve` takes the kernel's default backlog (128 connections waiting to be accepted:
//! a burst of a thousand clients got resets) and no limits, so the daemon runs its own accept
//! loop on hyper's connection builder. Every connection is accepted and then admitted by
//! [`slots`]: at a cap the connection idle longest is closed to make room, so idle clients cannot
//! starve busy ones or the health checks. Each request carries its client's address
//! (`ConnectInfo<SocketAddr>`) for the HTTP layer.

mod slots;
mod sniff;

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::config::GatewayConfig;
use crate::http::peer::ClientKey;
use slots::{Activity, Refusal, Slots};
use sniff::Protocol;

/// hyper's smallest accepted read buffer; the request head must fit in the buffer.
const MIN_BUFFER: usize = 8192;
/// How long accepting pauses after an error such as running out of file descriptors.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// How long a client whose first bytes could still be HTTP/2's preface may take to send the
/// rest. A real client sends it in one write; waiting long only holds a slot for nothing.
pub const SNIFF_TIMEOUT: Duration = Duration::from_secs(5);
/// How often at most what the caps did is logged (with counts).
const CAP_LOG_EVERY: Duration = Duration::from_secs(60);

/// The limits of one listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerLimits {
    /// The kernel's accept queue; also how many accepted connections may wait for a slot.
    pub backlog: u32,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub max_header_bytes: usize,
    /// How long a connection may go without a request head, and wait for a slot.
    pub idle_timeout: Duration,
    /// How long a connection may take to finish what could be HTTP/2's preface.
    pub sniff_timeout: Duration,
}

impl ListenerLimits {
    pub fn from_config(gateway: &GatewayConfig) -> Self {
        Self {
            backlog: gateway.backlog.max(1),
            max_connections: gateway.max_connections.max(1),
            max_connections_per_ip: gateway.max_connections_per_ip.max(1),
            max_header_bytes: gateway.max_header_bytes.max(MIN_BUFFER),
            idle_timeout: Duration::from_secs(gateway.idle_timeout_seconds.max(1)),
            sniff_timeout: SNIFF_TIMEOUT,
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
    let shared = Arc::new(Shared {
        slots: Arc::new(Slots::new(
            limits.max_connections,
            limits.max_connections_per_ip,
            usize::try_from(limits.backlog).unwrap_or(usize::MAX),
        )),
        builders: Builders::new(&limits),
        limits,
        caps: CapLog::default(),
        app,
    });
    let connections = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "Could not accept a connection; pausing briefly");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        connections.spawn(serve_connection(shared.clone(), stream, peer, stop.clone()));
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// What every connection of one listener shares.
struct Shared {
    slots: Arc<Slots>,
    builders: Builders,
    limits: ListenerLimits,
    caps: CapLog,
    app: axum::Router,
}

/// One connection: a slot, its protocol, then hyper until it ends, is closed to make room, or
/// the listener stops (then requests in flight finish first).
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    stop: CancellationToken,
) {
    let client = ClientKey::of(peer.ip());
    let limits = shared.limits;
    // Waiting for a slot is bounded like a silent client.
    let slot = tokio::select! {
        _ = stop.cancelled() => return,
        admitted = shared.slots.admit(client, limits.idle_timeout) => match admitted {
            Ok(slot) => slot,
            Err(refusal) => return shared.caps.note(client, Some(refusal)),
        },
    };
    if slot.made_room {
        shared.caps.note(client, None);
    }
    // A client that never speaks is closed like an idle one; one still silent when the daemon
    // stops does not hold the stop up.
    let protocol = tokio::select! {
        _ = stop.cancelled() => return,
        _ = slot.close.cancelled() => return,
        sniffed = sniff::protocol(&stream, limits.idle_timeout, limits.sniff_timeout) => {
            match sniffed {
                Ok(protocol) => protocol,
                Err(error) => return tracing::debug!(%error, %client, "Closed a connection"),
            }
        }
    };
    let service = TowerToHyperService::new(Tracked {
        app: shared.app.clone(),
        peer,
        activity: slot.activity.clone(),
    });
    let connection = shared
        .builders
        .for_protocol(protocol)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
        _ = slot.close.cancelled() => {
            // Idle when chosen; a request that started since still gets its answer.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%error, "Connection ended with an error");
    }
}

/// The app as one connection's service: each request carries the client's address, and counts
/// as in flight (the connection is not idle) until its response body is done.
#[derive(Clone)]
struct Tracked {
    app: axum::Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl<B> tower::Service<axum::http::Request<B>> for Tracked
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> Self::Future {
        request.extensions_mut().insert(ConnectInfo(self.peer));
        let busy = self.activity.busy();
        let answered = self.app.clone().oneshot(request);
        Box::pin(async move {
            let response = answered.await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _in_flight = &busy;
                    frame
                }))
            }))
        })
    }
}

/// What the caps did, logged at most once a minute with counts: idle connections closed to
/// make room, connections refused.
#[derive(Default)]
struct CapLog(Mutex<CapCounts>);

#[derive(Default)]
struct CapCounts {
    last_logged: Option<Instant>,
    closed_idle: u64,
    client_full: u64,
    queue_full: u64,
    timed_out: u64,
}

impl CapLog {
    /// Counts a connection refused (`Some`) or one admitted by closing an idle one (`None`).
    fn note(&self, client: ClientKey, refusal: Option<Refusal>) {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match refusal {
            None => counts.closed_idle += 1,
            Some(Refusal::ClientFull) => counts.client_full += 1,
            Some(Refusal::QueueFull) => counts.queue_full += 1,
            Some(Refusal::TimedOut) => counts.timed_out += 1,
        }
        if counts
            .last_logged
            .is_some_and(|at| at.elapsed() < CAP_LOG_EVERY)
        {
            return;
        }
        tracing::warn!(
            last_client = %client,
            closed_idle = counts.closed_idle,
            refused_over_client_cap = counts.client_full,
            refused_queue_full = counts.queue_full,
            refused_after_waiting = counts.timed_out,
            "Connection caps reached since the last report (idle connections are closed to make \
             room; with every connection busy, new ones are refused); raise \
             gateway.max_connections_per_ip or gateway.max_connections if these clients are \
             legitimate, e.g. a reverse proxy on one address"
        );
        *counts = CapCounts {
            last_logged: Some(Instant::now()),
            ..CapCounts::default()
        };
    }
}

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
