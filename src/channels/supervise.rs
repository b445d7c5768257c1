//! Supervision of a channel's transport: restarts after errors and panics with bounded backoff,
//! a stop for fatal errors, and the health every state shows in `/readyz`.
//!
//! Transient failures (network, 5xx) back off exponentially with jitter up to [`MAX_BACKOFF`];
//! a platform's rate limit waits the delay it asked for; a fatal error (bad token, 409 Conflict
//! from a second poller or a set webhook) stops the channel and marks it unhealthy: retrying
//! could not help and would only hammer the API.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use antler_channel::{ChannelError, InboundSink, Transport, TransportContext};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::channels::deliver::secs;
use crate::channels::health::{ChannelHealth, HealthBoard};
use crate::channels::reload::SessionPhase;

/// Where supervision reports the session's progress (the reload coordinator listens): connected
/// at the transport's first live report, retrying after a transient failure.
pub(crate) type PhaseReport = Arc<dyn Fn(SessionPhase) + Send + Sync>;

/// How long to wait before the next attempt.
enum Delay {
    /// The platform said how long (a rate limit).
    Exactly(Duration),
    /// Exponential backoff after this failure.
    Backoff(String),
}

pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
const BASE_BACKOFF: Duration = Duration::from_millis(500);
/// How long a transport gets to notice the stop signal before it is abandoned.
const STOP_GRACE: Duration = Duration::from_secs(5);

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
    tracing::error!(channel, %error, "Channel stopped; fix the problem (antler retries when its settings change)");
    health.set(
        channel,
        ChannelHealth::Unhealthy {
            reason: error.to_string(),
        },
    );
}

/// Runs `transport` until `stop`, restarting it after errors and panics. Returns the fatal
/// error that ended it, or `Ok` when stopped.
pub(crate) async fn supervise(
    channel: &str,
    transport: Arc<dyn Transport>,
    sink: Arc<dyn InboundSink>,
    health: &HealthBoard,
    phase: &PhaseReport,
    stop: &CancellationToken,
) -> Result<(), ChannelError> {
    let mut failures = 0u32;
    loop {
        let live = Arc::new(AtomicBool::new(false));
        let report = {
            let (live, health, channel) = (live.clone(), health.clone(), channel.to_string());
            let phase = phase.clone();
            Arc::new(move || {
                if !live.swap(true, Ordering::SeqCst) {
                    health.set(&channel, ChannelHealth::Running);
                    phase(SessionPhase::Connected);
                }
            })
        };
        let ctx = TransportContext::new(sink.clone(), stop.child_token(), report);
        let run = AssertUnwindSafe(transport.run(ctx)).catch_unwind();
        let abandoned = async {
            stop.cancelled().await;
            tokio::time::sleep(STOP_GRACE).await;
        };
        let result = tokio::select! {
            result = run => result,
            () = abandoned => {
                tracing::warn!(channel, "The channel's transport ignored the stop signal; abandoning it");
                return Ok(());
            }
        };
        if live.load(Ordering::SeqCst) {
            failures = 0;
        }
        let delay = match result {
            Ok(Ok(())) if stop.is_cancelled() => return Ok(()),
            Ok(Err(error)) if error.is_fatal() => return Err(error),
            Ok(Err(ChannelError::RateLimited { retry_after_secs })) => {
                Delay::Exactly(secs(retry_after_secs))
            }
            Ok(Ok(())) => Delay::Backoff("the connection ended".to_string()),
            Ok(Err(error)) => Delay::Backoff(error.to_string()),
            Err(panic) => {
                let reason = format!("the transport panicked: {}", panic_text(panic.as_ref()));
                tracing::error!(channel, reason, "Restarting the channel's transport");
                Delay::Backoff(reason)
            }
        };
        let delay = match delay {
            Delay::Exactly(delay) => delay,
            Delay::Backoff(reason) => {
                phase(SessionPhase::Retrying(reason.clone()));
                degraded(health, channel, &mut failures, reason)
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

fn degraded(health: &HealthBoard, channel: &str, failures: &mut u32, reason: String) -> Duration {
    *failures += 1;
    crate::metrics::reconnect(channel);
    let delay = backoff(*failures);
    tracing::warn!(
        channel,
        reason,
        ?delay,
        failures = *failures,
        "Channel transport failed; retrying"
    );
    health.set(channel, ChannelHealth::Degraded { reason });
    delay
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".into())
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use antler_channel::{InboundMessage, SinkError};
    use async_trait::async_trait;

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

    struct NullSink;

    #[async_trait]
    impl InboundSink for NullSink {
        async fn accept(&self, _messages: Vec<InboundMessage>) -> Result<(), SinkError> {
            Ok(())
        }
    }

    /// A phase report that keeps what it heard.
    fn recorder() -> (PhaseReport, Arc<Mutex<Vec<SessionPhase>>>) {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let keep = heard.clone();
        let report: PhaseReport = Arc::new(move |phase| keep.lock().expect("heard").push(phase));
        (report, heard)
    }

    /// Panics on the first run, fails on the second, then reports a fatal error.
    struct Flaky {
        runs: Mutex<u32>,
    }

    #[async_trait]
    impl Transport for Flaky {
        async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError> {
            let run = {
                let mut runs = self.runs.lock().expect("runs");
                *runs += 1;
                *runs
            };
            ctx.report_live();
            match run {
                1 => panic!("boom"),
                2 => Err(ChannelError::Network("reset".into())),
                _ => Err(ChannelError::Unauthorized("revoked".into())),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn panics_and_errors_restart_the_transport_until_a_fatal_error() {
        let health = HealthBoard::default();
        let flaky = Arc::new(Flaky {
            runs: Mutex::new(0),
        });
        let (report, heard) = recorder();
        let result = supervise(
            "test",
            flaky.clone(),
            Arc::new(NullSink),
            &health,
            &report,
            &CancellationToken::new(),
        )
        .await;
        assert!(matches!(result, Err(ChannelError::Unauthorized(_))));
        assert_eq!(*flaky.runs.lock().expect("runs"), 3);
        let heard = heard.lock().expect("heard").clone();
        assert_eq!(heard.len(), 5, "{heard:?}");
        assert_eq!(heard[0], SessionPhase::Connected);
        assert!(
            matches!(&heard[1], SessionPhase::Retrying(r) if r.contains("boom")),
            "{heard:?}"
        );
        assert!(
            matches!(&heard[3], SessionPhase::Retrying(r) if r.contains("reset")),
            "{heard:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_ends_supervision_without_an_error() {
        struct Waits;
        #[async_trait]
        impl Transport for Waits {
            async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError> {
                ctx.report_live();
                ctx.stop.cancelled().await;
                Ok(())
            }
        }
        let health = HealthBoard::default();
        let stop = CancellationToken::new();
        let (report, heard) = recorder();
        let task = {
            let (health, stop) = (health.clone(), stop.clone());
            tokio::spawn(async move {
                supervise(
                    "test",
                    Arc::new(Waits),
                    Arc::new(NullSink),
                    &health,
                    &report,
                    &stop,
                )
                .await
            })
        };
        tokio::time::timeout(Duration::from_secs(60), async {
            while health.get("test") != Some(ChannelHealth::Running) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("the transport reported live");
        assert_eq!(*heard.lock().expect("heard"), [SessionPhase::Connected]);
        stop.cancel();
        assert!(task.await.expect("join").is_ok());
    }
}
