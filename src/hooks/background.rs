//! `thread_only` deliveries: a background run on the delivery's thread, like a scheduled run
//! without a chat. A thread busy with another run (the previous delivery of a `per_key`
//! conversation, its user in the web chat, another daemon continuing this delivery) is waited
//! for, not failed, and looked at again before the next attempt: a restart continues a delivery
//! whose question is in the thread and finishes one already answered.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent_api::StopReason;
use crate::harness::{Harness, RunError, RunHandle};
use crate::hooks::request::{Progress, progress, run_request};
use crate::hooks::store::{Delivery, DeliveryStatus, DeliveryStore};

/// How often a busy thread is tried again.
const BUSY_RETRY: Duration = Duration::from_millis(250);

pub(super) async fn run(
    harness: Arc<Harness>,
    store: DeliveryStore,
    stop: CancellationToken,
    delivery: Delivery,
) {
    let request = run_request(&delivery);
    let handle = loop {
        // Read before every attempt: a thread that was busy may have been busy with this very
        // delivery (another daemon sharing the store continuing it after a restart), which is
        // then answered, or asked and left for this one to go on from.
        let state = harness
            .thread_state(&delivery.thread_id)
            .await
            .ok()
            .flatten();
        let mut attempt = request.clone();
        match progress(state.as_ref(), &delivery) {
            Progress::Answered => {
                finish(&store, &delivery, DeliveryStatus::Done, None);
                return;
            }
            Progress::Asked => attempt.input.clear(),
            Progress::NotStarted => {}
        }
        match harness.start_run(attempt).await {
            Ok(handle) => break handle,
            Err(RunError::Busy { .. }) => {
                tokio::select! {
                    // Stays recorded: the next start runs it.
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(BUSY_RETRY) => {}
                }
            }
            Err(RunError::ShuttingDown) => return,
            Err(error) => {
                finish(
                    &store,
                    &delivery,
                    DeliveryStatus::Failed,
                    Some(error.to_string()),
                );
                return;
            }
        }
    };
    let _ = store.set_status(
        &delivery.endpoint,
        &delivery.delivery_id,
        DeliveryStatus::Running,
        None,
    );
    let RunHandle {
        mut events,
        outcome,
        ..
    } = handle;
    while events.recv_boxed().await.is_some() {}
    match outcome.await {
        Ok(outcome) => {
            let failure = match outcome.stop {
                // Cut short by the shutdown: the next start continues it.
                StopReason::Cancelled if stop.is_cancelled() => return,
                StopReason::Cancelled => Some("the run was cancelled".to_string()),
                StopReason::Error | StopReason::RecursionLimit => Some(
                    outcome
                        .error
                        .as_ref()
                        .map_or_else(|| outcome.stop.as_str().to_string(), |e| e.message.clone()),
                ),
                _ => None,
            };
            match failure {
                Some(reason) => finish(&store, &delivery, DeliveryStatus::Failed, Some(reason)),
                None => finish(&store, &delivery, DeliveryStatus::Done, None),
            }
        }
        Err(error) => finish(
            &store,
            &delivery,
            DeliveryStatus::Failed,
            Some(format!("the run stopped unexpectedly: {error}")),
        ),
    }
}

fn finish(
    store: &DeliveryStore,
    delivery: &Delivery,
    status: DeliveryStatus,
    detail: Option<String>,
) {
    crate::hooks::log_end(delivery, status, detail.as_deref());
    if let Err(error) = store.set_status(&delivery.endpoint, &delivery.delivery_id, status, detail)
    {
        tracing::warn!(%error, endpoint = %delivery.endpoint, delivery = %delivery.delivery_id, "Could not record the end of a webhook delivery; a restart looks at it again");
    }
}

#[cfg(test)]
#[path = "background_tests.rs"]
mod tests;
