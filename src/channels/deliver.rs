//! Executing outbox records: budgeted, retried, idempotent, dead-lettered when hopeless.

use std::time::Duration;

use antler_channel::{ChannelError, ChannelParts};

use crate::channels::budget::RateBudget;
use crate::channels::outbox::{Outbox, OutboxAction, OutboxRecord};
use crate::channels::records::RecordError;

/// Attempts for transient failures (network, 5xx) before a record is dead-lettered.
const MAX_ATTEMPTS: u32 = 4;
/// Rate-limit answers honoured before giving up (each waits the platform's `retry_after`).
const MAX_RATE_LIMITS: u32 = 8;
const BACKOFF_BASE: Duration = Duration::from_millis(250);

/// Why a record was not delivered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeliveryError {
    #[error("the channel cannot {0}")]
    Unsupported(&'static str),
    #[error("could not deliver after {attempts} attempts: {error}")]
    Failed { attempts: u32, error: ChannelError },
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// Delivers `record` unless it already was. Returns the platform message id when there is one;
/// `Record(ClaimLost)` when the chat changed hands, the record left for the new holder.
pub(crate) async fn deliver(
    parts: &ChannelParts,
    budget: &RateBudget,
    outbox: &Outbox,
    record: &mut OutboxRecord,
) -> Result<Option<String>, DeliveryError> {
    let mut rate_limits = 0;
    loop {
        if record.delivered {
            return Ok(record.platform_message_id.clone());
        }
        budget.acquire(&record.chat.chat_id, record.is_group).await;
        // Right before the request: an instance that lost the chat meanwhile sends nothing.
        outbox.check()?;
        record.attempts += 1;
        let result = perform(parts, record).await;
        match result {
            Ok(platform_message_id) => {
                outbox.mark_delivered(record, platform_message_id)?;
            }
            Err(DeliveryError::Failed {
                error: ChannelError::RateLimited { retry_after_secs },
                ..
            }) if rate_limits < MAX_RATE_LIMITS => {
                rate_limits += 1;
                record.attempts -= 1;
                crate::metrics::rate_limited(&record.chat.channel, secs(retry_after_secs));
                budget.pause(Some(&record.chat.chat_id), secs(retry_after_secs));
                tracing::info!(chat = %record.chat, retry_after_secs, "Rate limited by the platform; waiting before the next send");
            }
            Err(DeliveryError::Failed {
                error: ChannelError::NotModified,
                ..
            }) => outbox.mark_delivered(record, None)?,
            Err(DeliveryError::Failed { error, .. })
                if !error.is_fatal()
                    && !matches!(error, ChannelError::TooLarge { .. })
                    && record.attempts < MAX_ATTEMPTS =>
            {
                record.last_error = Some(error.to_string());
                outbox.save(record)?;
                let backoff = BACKOFF_BASE * 2u32.pow(record.attempts - 1);
                let jitter =
                    Duration::from_millis(fastrand::u64(0..=backoff.as_millis() as u64 / 4));
                tracing::warn!(%error, chat = %record.chat, attempt = record.attempts, "Send failed; retrying");
                tokio::time::sleep(backoff + jitter).await;
            }
            Err(DeliveryError::Failed { error, .. }) => {
                record.last_error = Some(error.to_string());
                outbox.dead_letter(record)?;
                tracing::warn!(%error, chat = %record.chat, key = %record.key, "Giving up on a message; moved it to the dead letters");
                return Err(DeliveryError::Failed {
                    attempts: record.attempts,
                    error,
                });
            }
            Err(other) => {
                outbox.dead_letter(record)?;
                return Err(other);
            }
        }
    }
}

async fn perform(
    parts: &ChannelParts,
    record: &OutboxRecord,
) -> Result<Option<String>, DeliveryError> {
    let failed = |error| DeliveryError::Failed {
        attempts: record.attempts,
        error,
    };
    match &record.action {
        OutboxAction::Send { text, reply_to } => {
            crate::metrics::outbound_send(&record.chat.channel);
            parts
                .send
                .send_text(&record.chat, text, reply_to.as_deref())
                .await
                .map(|sent| Some(sent.platform_message_id))
                .map_err(failed)
        }
        OutboxAction::Edit { target, text } => {
            let edit = parts
                .edit
                .as_ref()
                .ok_or(DeliveryError::Unsupported("edit"))?;
            crate::metrics::outbound_edit(&record.chat.channel);
            edit.edit_text(&record.chat, target, text)
                .await
                .map(|()| Some(target.clone()))
                .map_err(failed)
        }
        OutboxAction::Upload {
            attachment,
            reply_to,
        } => {
            let upload = parts
                .upload
                .as_ref()
                .ok_or(DeliveryError::Unsupported("upload files"))?;
            upload
                .upload(&record.chat, attachment, reply_to.as_deref())
                .await
                .map(|sent| Some(sent.platform_message_id))
                .map_err(failed)
        }
        OutboxAction::Buttons {
            text,
            buttons,
            reply_to,
        } => {
            crate::metrics::outbound_send(&record.chat.channel);
            let sent = match &parts.buttons {
                Some(with_buttons) => {
                    with_buttons
                        .send_buttons(&record.chat, text, buttons, reply_to.as_deref())
                        .await
                }
                None => {
                    parts
                        .send
                        .send_text(&record.chat, text, reply_to.as_deref())
                        .await
                }
            };
            sent.map(|sent| Some(sent.platform_message_id))
                .map_err(failed)
        }
        OutboxAction::Settle { target, text } => {
            crate::metrics::outbound_edit(&record.chat.channel);
            let settled = match (&parts.buttons, &parts.edit) {
                (Some(buttons), _) => buttons.settle_buttons(&record.chat, target, text).await,
                (None, Some(edit)) => edit.edit_text(&record.chat, target, text).await,
                (None, None) => return Err(DeliveryError::Unsupported("edit")),
            };
            settled.map(|()| Some(target.clone())).map_err(failed)
        }
    }
}

pub(crate) fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.clamp(0.0, 3600.0))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use antler_channel::{BudgetLimits, ChatKey, SendMessage, SentMessage};
    use async_trait::async_trait;

    use super::*;
    use antler_store::{MemoryStore, StoreRef};

    /// Answers scripted results in order, then succeeds; counts calls.
    #[derive(Default)]
    struct ScriptedSend {
        results: Mutex<VecDeque<Result<(), ChannelError>>>,
        calls: Mutex<u32>,
    }

    #[async_trait]
    impl SendMessage for ScriptedSend {
        async fn send_text(
            &self,
            _chat: &ChatKey,
            _text: &str,
            _reply_to: Option<&str>,
        ) -> Result<SentMessage, ChannelError> {
            let call = {
                let mut calls = self.calls.lock().expect("calls");
                *calls += 1;
                *calls
            };
            let next = self.results.lock().expect("results").pop_front();
            match next {
                Some(Err(error)) => Err(error),
                _ => Ok(SentMessage {
                    platform_message_id: format!("m{call}"),
                }),
            }
        }
    }

    fn setup(results: Vec<Result<(), ChannelError>>) -> (ChannelParts, Arc<ScriptedSend>, Outbox) {
        let send = Arc::new(ScriptedSend {
            results: Mutex::new(results.into()),
            calls: Mutex::new(0),
        });
        let parts = ChannelParts::send_only(send.clone());
        let store: StoreRef = Arc::new(MemoryStore::default());
        (parts, send, Outbox::new(store))
    }

    fn record(outbox: &Outbox, key: &str) -> OutboxRecord {
        let action = OutboxAction::Send {
            text: "hi".into(),
            reply_to: None,
        };
        outbox
            .insert(OutboxRecord::new(
                key.into(),
                ChatKey::new("test", "1", None),
                false,
                action,
            ))
            .expect("insert")
    }

    fn budget() -> RateBudget {
        RateBudget::new(BudgetLimits {
            global_per_second: 1000,
            direct_per_minute: 6000,
            group_per_minute: 6000,
            burst: 100,
        })
    }

    #[tokio::test]
    async fn transient_errors_are_retried_and_a_delivered_record_is_never_resent() {
        let (parts, send, outbox) = setup(vec![Err(ChannelError::Network("reset".into()))]);
        let budget = budget();
        let mut first = record(&outbox, "a");
        let id = deliver(&parts, &budget, &outbox, &mut first)
            .await
            .expect("delivered");
        assert_eq!(id.as_deref(), Some("m2"));
        assert_eq!(*send.calls.lock().expect("calls"), 2);
        // A restart finds the record with its platform id and sends nothing.
        let mut again = outbox.get("a").expect("get").expect("record");
        let id = deliver(&parts, &budget, &outbox, &mut again)
            .await
            .expect("delivered");
        assert_eq!(id.as_deref(), Some("m2"));
        assert_eq!(*send.calls.lock().expect("calls"), 2);
    }

    #[tokio::test]
    async fn hopeless_records_go_to_the_dead_letters() {
        let failures = (0..MAX_ATTEMPTS)
            .map(|_| Err(ChannelError::Platform("500".into())))
            .collect();
        let (parts, send, outbox) = setup(failures);
        let mut doomed = record(&outbox, "b");
        let result = deliver(&parts, &budget(), &outbox, &mut doomed).await;
        assert!(
            matches!(result, Err(DeliveryError::Failed { attempts, .. }) if attempts == MAX_ATTEMPTS)
        );
        assert_eq!(*send.calls.lock().expect("calls"), MAX_ATTEMPTS);
        assert_eq!(outbox.dead_letters().expect("dead").len(), 1);
        assert!(outbox.get("b").expect("get").is_none());

        let (parts, send, outbox) = setup(vec![Err(ChannelError::Unauthorized("bad".into()))]);
        let mut fatal = record(&outbox, "c");
        assert!(
            deliver(&parts, &budget(), &outbox, &mut fatal)
                .await
                .is_err()
        );
        assert_eq!(
            *send.calls.lock().expect("calls"),
            1,
            "fatal errors are not retried"
        );
    }

    #[tokio::test]
    async fn retry_after_pauses_the_chat_and_then_delivers() {
        let (parts, send, outbox) = setup(vec![Err(ChannelError::RateLimited {
            retry_after_secs: 0.3,
        })]);
        let budget = budget();
        let mut limited = record(&outbox, "d");
        let started = tokio::time::Instant::now();
        deliver(&parts, &budget, &outbox, &mut limited)
            .await
            .expect("delivered");
        assert!(
            started.elapsed() >= Duration::from_millis(280),
            "waited out retry_after"
        );
        assert_eq!(*send.calls.lock().expect("calls"), 2);
        assert_eq!(limited.attempts, 1, "a rate limit is not a failed attempt");
    }
}
