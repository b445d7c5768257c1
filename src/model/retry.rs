//! Retries of failed model calls: jittered exponential backoff that honours `Retry-After`.
//!
//! Only [`ChatModel::stream`] errors are retried, i.e. failures before anything was streamed.
//! An error inside the stream propagates: text may already have reached the user.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};

use crate::config::LlmCallConfig;
use crate::model::{ChatModel, ModelError, ModelRequest, ModelStream};

/// How long a server-requested `Retry-After` may hold a call at most; a longer wait is better
/// spent on the fallback model (or on telling the user).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Attempts and delays of [`RetryingModel`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, including the first (at least 1).
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub cap_delay: Duration,
    /// Upper bound on a server's `Retry-After`.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    pub fn from_config(config: &LlmCallConfig) -> Self {
        Self {
            max_attempts: config.retry_max_attempts.max(1),
            base_delay: Duration::from_millis(config.retry_base_delay_ms),
            cap_delay: Duration::from_millis(
                config.retry_cap_delay_ms.max(config.retry_base_delay_ms),
            ),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }

    /// The delay before the next attempt: the server's `Retry-After` when given (bounded),
    /// else the jittered backoff (bounded by the cap). `None` once the attempts are used up.
    fn next_delay(&self, error: &ModelError, backoff: Option<Duration>) -> Option<Duration> {
        let backoff = backoff?;
        Some(match error.retry_after() {
            Some(asked) => asked.min(self.max_retry_after),
            None => backoff.min(self.cap_delay),
        })
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::from_config(&LlmCallConfig::default())
    }
}

/// Wraps a model and retries its transient failures ([`ModelError::is_retryable`]).
pub struct RetryingModel {
    inner: Arc<dyn ChatModel>,
    policy: RetryPolicy,
}

impl RetryingModel {
    pub fn new(inner: Arc<dyn ChatModel>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

#[async_trait]
impl ChatModel for RetryingModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.policy.base_delay)
            .with_max_delay(self.policy.cap_delay)
            .with_jitter()
            .with_max_times(self.policy.max_attempts.saturating_sub(1) as usize);
        let failed_attempts = AtomicU32::new(0);
        (|| self.inner.stream(request))
            .retry(backoff)
            // Sleeping through tokio keeps the paused test clock in charge of retries.
            .sleep(tokio::time::sleep)
            .when(ModelError::is_retryable)
            .adjust(|error, backoff| self.policy.next_delay(error, backoff))
            .notify(|error, delay| {
                let attempt = failed_attempts.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(
                    model = self.inner.name(),
                    attempt,
                    max_attempts = self.policy.max_attempts,
                    status = status_of(error),
                    delay_ms = delay.as_millis() as u64,
                    %error,
                    "Model call failed, retrying"
                );
            })
            .await
    }
}

/// The HTTP status behind an error, for logs (0 when there was no response).
fn status_of(error: &ModelError) -> u16 {
    match error {
        ModelError::Status { status, .. }
        | ModelError::Unauthorized { status, .. }
        | ModelError::ModelNotFound { status, .. } => *status,
        ModelError::RateLimited { .. } => 429,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::StreamExt;

    use super::*;
    use crate::model::{ModelErrorKind, ScriptedModel, ScriptedTurn};

    fn policy(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts: attempts,
            base_delay: Duration::from_secs(1),
            cap_delay: Duration::from_secs(8),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }

    /// Fails with the queued errors, then answers "ok".
    struct Failing {
        errors: Mutex<Vec<ModelError>>,
        calls: AtomicU32,
    }

    #[async_trait]
    impl ChatModel for Failing {
        fn name(&self) -> &str {
            "failing"
        }

        async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream, ModelError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let next = self.errors.lock().unwrap().pop();
            match next {
                Some(error) => Err(error),
                None => {
                    ScriptedModel::text("failing", "ok")
                        .stream(&ModelRequest::default())
                        .await
                }
            }
        }
    }

    fn failing(errors: Vec<ModelError>) -> Arc<Failing> {
        Arc::new(Failing {
            errors: Mutex::new(errors),
            calls: AtomicU32::new(0),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured_instead_of_the_backoff() {
        let inner = failing(vec![ModelError::RateLimited {
            model: "failing".into(),
            retry_after: Some(Duration::from_secs(30)),
        }]);
        let model = RetryingModel::new(inner.clone(), policy(3));
        let started = tokio::time::Instant::now();
        let mut stream = model.stream(&ModelRequest::default()).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
        assert!(stream.next().await.unwrap().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_is_jittered_and_capped_and_attempts_are_bounded() {
        let status = |status| ModelError::Status {
            model: "failing".into(),
            status,
            body: String::new(),
            retry_after: None,
            hint: String::new(),
        };
        let inner = failing((0..5).map(|_| status(503)).collect());
        let model = RetryingModel::new(inner.clone(), policy(4));
        let started = tokio::time::Instant::now();
        let error = model.stream(&ModelRequest::default()).await.err().unwrap();
        assert!(matches!(error, ModelError::Status { status: 503, .. }));
        assert_eq!(inner.calls.load(Ordering::SeqCst), 4);
        // Delays 1s, 2s, 4s, each jittered up to double but never above the 8 s cap.
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(7) && waited <= Duration::from_secs(14),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_and_huge_retry_after_are_not_waited_for() {
        let inner = failing(vec![ModelError::Unauthorized {
            model: "failing".into(),
            status: 401,
            endpoint: "http://x".into(),
            fix: "models[0].api_key".into(),
            keyless: false,
        }]);
        let model = RetryingModel::new(inner.clone(), policy(3));
        assert!(model.stream(&ModelRequest::default()).await.is_err());
        assert_eq!(inner.calls.load(Ordering::SeqCst), 1);

        let inner = failing(vec![ModelError::RateLimited {
            model: "failing".into(),
            retry_after: Some(Duration::from_secs(3600)),
        }]);
        let model = RetryingModel::new(inner, policy(2));
        let started = tokio::time::Instant::now();
        assert!(model.stream(&ModelRequest::default()).await.is_ok());
        assert_eq!(started.elapsed(), MAX_RETRY_AFTER);
    }

    #[tokio::test(start_paused = true)]
    async fn mid_stream_errors_are_not_retried() {
        let inner = Arc::new(ScriptedModel::new(
            "scripted",
            [
                ScriptedTurn::Fail(ModelErrorKind::MidStream),
                ScriptedTurn::Text(vec!["x".into()]),
            ],
        ));
        let model = RetryingModel::new(inner.clone(), policy(3));
        let events: Vec<_> = model
            .stream(&ModelRequest::default())
            .await
            .unwrap()
            .collect()
            .await;
        assert!(matches!(
            events.last(),
            Some(Err(ModelError::Stream { .. }))
        ));
        assert_eq!(inner.remaining(), 1);
    }
}
