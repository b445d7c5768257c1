//! Supervised intake: the polling loop with bounded backoff, and health reporting.
//!
//! Transient failures (network, 5xx) back off exponentially with jitter up to [`MAX_BACKOFF`];
//! a fatal one (bad token, 409 Conflict from a second poller or a set webhook) stops the
//! channel and marks it unhealthy: retrying could not help and would only hammer the API.

use std::sync::Arc;
use std::time::Duration;

use antler_channel::{ChannelError, PollUpdates};
use tokio_util::sync::CancellationToken;

use crate::channels::deliver::secs;
use crate::channels::health::{ChannelHealth, HealthBoard};
use crate::channels::manager::ChannelManager;

pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
const BASE_BACKOFF: Duration = Duration::from_millis(500);

/// Delay before retry number `failures` (1-based): doubling from 0.5 s, capped, ±25 % jitter.
pub fn backoff(failures: u32) -> Duration {
    let exp = BASE_BACKOFF.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(16)));
    let capped = exp.min(MAX_BACKOFF);
    let quarter = capped.as_millis() as u64 / 4;
    let jitter = fastrand::u64(0..=quarter * 2);
    Duration::from_millis(capped.as_millis() as u64 - quarter + jitter)
}

/// Marks a channel stopped for good, with the log line an operator needs.
pub fn mark_fatal(health: &HealthBoard, channel: &str, error: &ChannelError) {
    tracing::error!(channel, %error, "Channel stopped; fix the problem and restart antler");
    health.set(
        channel,
        ChannelHealth::Unhealthy {
            reason: error.to_string(),
        },
    );
}

/// Polls until `stop`, journalling each batch before acknowledging it.
pub async fn run_poller(
    manager: ChannelManager,
    channel: String,
    poll: Arc<dyn PollUpdates>,
    health: HealthBoard,
    stop: CancellationToken,
) {
    let mut failures = 0u32;
    health.set(&channel, ChannelHealth::Running);
    loop {
        let result = tokio::select! {
            _ = stop.cancelled() => break,
            result = poll.poll() => result,
        };
        let delay = match result {
            Ok(messages) => match accept(&manager, &channel, messages).await {
                Ok(_) => {
                    poll.commit();
                    if failures > 0 {
                        tracing::info!(channel, "Channel recovered");
                        health.set(&channel, ChannelHealth::Running);
                    }
                    failures = 0;
                    continue;
                }
                Err(error) => {
                    // Not acknowledged: the platform delivers the batch again.
                    failures += 1;
                    tracing::error!(channel, %error, "Could not journal incoming messages; they will be fetched again");
                    backoff(failures)
                }
            },
            Err(error) if error.is_fatal() => {
                mark_fatal(&health, &channel, &error);
                return;
            }
            Err(ChannelError::RateLimited { retry_after_secs }) => secs(retry_after_secs),
            Err(error) => {
                failures += 1;
                let delay = backoff(failures);
                tracing::warn!(channel, %error, ?delay, failures, "Polling failed; retrying");
                health.set(
                    &channel,
                    ChannelHealth::Degraded {
                        reason: error.to_string(),
                    },
                );
                delay
            }
        };
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
    health.set(&channel, ChannelHealth::Stopped);
}

/// Journals off the async threads: the flush is an fsync.
async fn accept(
    manager: &ChannelManager,
    channel: &str,
    messages: Vec<antler_channel::InboundMessage>,
) -> Result<(), crate::store::StoreError> {
    if messages.is_empty() {
        return Ok(());
    }
    let manager = manager.clone();
    let channel = channel.to_string();
    tokio::task::spawn_blocking(move || manager.accept_batch(&channel, messages).map(|_| ()))
        .await
        .map_err(|e| crate::store::StoreError::Io(format!("journalling did not finish: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let first = backoff(1);
        assert!(first >= Duration::from_millis(375) && first <= Duration::from_millis(625));
        let fourth = backoff(4);
        assert!(fourth >= Duration::from_millis(3000) && fourth <= Duration::from_millis(5000));
        for failures in [10, 30, u32::MAX] {
            assert!(backoff(failures) <= MAX_BACKOFF + MAX_BACKOFF / 4);
        }
    }
}
