//! The turn of a webhook delivery's entry (`channels::hook_entry`): the delivery's run on the
//! delivery's thread (the chat's conversation and record untouched, like a schedule's
//! `new_thread`), streamed into a status message headed with the endpoint's name, its answer
//! and files planned in the outbox and delivered once under the chat's rate budget.
//!
//! It runs only a delivery the store holds for this chat and has not finished; a turn cut
//! short after planning only delivers again, and a re-run that finds its question checkpointed
//! continues from it. The delivery's record is finished after the answer is delivered.

use antler_channel::ChatKey;

use crate::agent_api::StopReason;
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::hook_entry::entry as hook_entry;
use crate::channels::journal::JournalEntry;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::stream::WORKING_TEXT;
use crate::channels::turn::conversation::{already_asked, mark_inbound};
use crate::channels::turn::{deliver_answer, finish, run, send_status};
use crate::harness::RunError;
use crate::hooks::request::run_request;
use crate::hooks::store::{Delivery, DeliveryStatus, DeliveryStore};
use crate::paths::ThreadPaths;
use antler_store::messages::Message;

/// How a delivery's answer starts: the endpoint's name after it.
pub(crate) const HEADER: &str = "🪝";

pub(super) async fn delivered(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    (endpoint, delivery_id): (String, String),
) -> Result<bool, TurnError> {
    let store = DeliveryStore::new(deps.harness.threads().store().clone());
    let delivery = store.get(&endpoint, &delivery_id)?;
    let Some(delivery) = delivery.filter(|d| hook_entry(d).is_some_and(|(k, _)| &k == key)) else {
        tracing::warn!(endpoint, delivery = delivery_id, chat = %key, "Ignoring a webhook entry without a delivery for this chat");
        return Ok(true);
    };
    // What the turn sends replies to no platform message: there is none.
    let mut entry = entry.clone();
    entry.message.platform_message_id.clear();
    let planned = deps.outbox.for_entry(&entry.key)?;
    if delivery.status.is_finished() && planned.is_empty() {
        return Ok(true);
    }
    if finish::redeliver_planned(deps, runtime, key, true, &planned).await {
        end(&store, &delivery, DeliveryStatus::Done, None);
        return Ok(true);
    }
    let result = answer(
        deps,
        runtime,
        key,
        &entry,
        &store,
        &delivery,
        !planned.is_empty(),
    )
    .await;
    match result {
        Err(_) if deps.interrupted() => Ok(false),
        Err(error) => {
            let reason = error.to_string();
            let text = failure_notice(&delivery, &reason);
            finish::deliver(
                deps,
                runtime,
                key,
                &entry,
                None,
                finish::Answer::text(&text),
            )
            .await;
            end(&store, &delivery, DeliveryStatus::Failed, Some(reason));
            Ok(true)
        }
        other => other,
    }
}

async fn answer(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    store: &DeliveryStore,
    delivery: &Delivery,
    rerun: bool,
) -> Result<bool, TurnError> {
    let text = format!("{HEADER} {}\n{WORKING_TEXT}", delivery.endpoint);
    let status_id = send_status(deps, runtime, key, entry, text, None).await;
    let mut request = run_request(delivery);
    for message in &mut request.input {
        if let Message::Human(human) = message {
            mark_inbound(human, &entry.key);
        }
    }
    if rerun && already_asked(deps, &delivery.thread_id, &entry.key).await {
        request.input.clear();
    }
    let handle = match run::start(deps, request).await {
        Ok(handle) => handle,
        Err(RunError::ShuttingDown) => return Ok(false),
        Err(error) => {
            let reason = error.to_string();
            let answer = finish::Answer::text(&failure_notice(delivery, &reason));
            finish::deliver(deps, runtime, key, entry, status_id, answer).await;
            end(store, delivery, DeliveryStatus::Failed, Some(reason));
            return Ok(true);
        }
    };
    let _ = store.set_status(
        &delivery.endpoint,
        &delivery.delivery_id,
        DeliveryStatus::Running,
        None,
    );
    let config = deps.config.current();
    let streamed = run::stream(deps, runtime, &config, key, true, status_id.clone(), handle).await;
    if streamed.stop() == Some(StopReason::Cancelled) && deps.interrupted() {
        return Ok(false);
    }
    let paths = ThreadPaths::new(&config.data_dir(), &delivery.user, &delivery.thread_id)?;
    let mut answer = finish::compose(&streamed, &paths);
    let failure = finish::failure_of(&streamed, &answer);
    let (status, detail) = match failure {
        Some(reason) => {
            answer.text = failure_notice(delivery, &reason);
            (DeliveryStatus::Failed, Some(reason))
        }
        None => {
            answer.text = format!("{HEADER} {}\n\n{}", delivery.endpoint, answer.text);
            (DeliveryStatus::Done, None)
        }
    };
    deliver_answer(deps, runtime, key, entry, status_id, &streamed, answer).await;
    end(store, delivery, status, detail);
    Ok(true)
}

fn failure_notice(delivery: &Delivery, reason: &str) -> String {
    let reason = reason.trim().trim_end_matches('.');
    format!(
        "⚠ Webhook {} could not be answered: {reason}.",
        delivery.endpoint
    )
}

fn end(store: &DeliveryStore, delivery: &Delivery, status: DeliveryStatus, detail: Option<String>) {
    crate::hooks::log_end(delivery, status, detail.as_deref());
    if let Err(error) = store.set_status(&delivery.endpoint, &delivery.delivery_id, status, detail)
    {
        tracing::warn!(%error, endpoint = %delivery.endpoint, delivery = %delivery.delivery_id, "Could not record the end of a webhook delivery");
    }
}
