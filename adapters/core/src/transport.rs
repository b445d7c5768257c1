//! Long-lived inbound transports (long polling, sockets, gateways) and the sink they feed.
//!
//! A transport hands every batch to the [`InboundSink`], which returns only once the messages
//! are durably journalled; only then may the transport acknowledge them to the platform (advance
//! the offset, ack the envelope). A crash in between causes a redelivery, which the journal
//! recognises.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::capabilities::ChannelError;
use crate::message::InboundMessage;

/// Receives messages until `ctx.stop` fires (then returns `Ok`) or the connection fails.
///
/// The daemon supervises it: an error or a panic restarts it with bounded backoff (a
/// [`ChannelError::RateLimited`] waits the platform's delay), a fatal error stops the channel.
#[async_trait]
pub trait Transport: Send + Sync {
    async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError>;
}

/// Journals inbound messages for the daemon.
#[async_trait]
pub trait InboundSink: Send + Sync {
    /// Returns once `messages` are durable; acknowledge them to the platform only after `Ok`.
    async fn accept(&self, messages: Vec<InboundMessage>) -> Result<(), SinkError>;
}

#[derive(Debug, thiserror::Error)]
#[error("could not journal incoming messages: {0}")]
pub struct SinkError(pub String);

/// What a running transport gets from the daemon.
#[derive(Clone)]
pub struct TransportContext {
    pub sink: Arc<dyn InboundSink>,
    pub stop: CancellationToken,
    live: Arc<dyn Fn() + Send + Sync>,
}

impl TransportContext {
    pub fn new(
        sink: Arc<dyn InboundSink>,
        stop: CancellationToken,
        live: Arc<dyn Fn() + Send + Sync>,
    ) -> Self {
        Self { sink, stop, live }
    }

    /// Tells the daemon the connection works (after a successful poll, a socket's hello): the
    /// channel shows as running and its retry backoff starts over.
    pub fn report_live(&self) {
        (self.live)();
    }
}
