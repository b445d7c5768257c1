//! Sending from a turn: durable replies through the outbox (planned, then delivered once), and
//! best-effort notices and reactions that nothing depends on.

use antler_channel::ChatKey;

use crate::channels::chunk::split_message;
use crate::channels::deliver::deliver;
use crate::channels::deps::TurnDeps;
use crate::channels::journal::JournalEntry;
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;

pub const UNDELIVERED_NOTICE: &str =
    "⚠️ I could not deliver part of my reply here. Please ask again.";

/// A best-effort, non-durable notice (queued, throttled, busy).
pub(crate) async fn note(
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    text: &str,
    reply_to: Option<&str>,
) {
    runtime.budget.acquire(&key.chat_id, is_group).await;
    crate::metrics::outbound_send(&key.channel);
    if let Err(error) = runtime.parts.send.send_text(key, text, reply_to).await {
        tracing::debug!(%error, chat = %key, "Could not send a notice");
    }
}

/// Marks the person's message (👀, 👍, 😢) when reactions are on. It waits for the chat's budget
/// like a final message does (a skipped "done" would leave the message looking unanswered), but
/// a failure is only logged.
pub(crate) async fn react(
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    message_id: &str,
    reaction: &str,
) {
    let Some(react) = &runtime.parts.react else {
        return;
    };
    runtime.budget.acquire(&key.chat_id, is_group).await;
    if let Err(error) = react.react(key, message_id, reaction).await {
        tracing::debug!(%error, chat = %key, "Could not react to a message");
    }
}

/// A durable reply of one or more chunks, each its own outbox step.
pub(crate) async fn reply(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    step: fn(usize) -> OutboxStep,
    text: &str,
) {
    reply_parts(deps, runtime, key, entry, step, &[text.to_string()]).await;
}

/// A durable reply of parts its command split itself (each still split if over the limit),
/// numbered as one sequence of outbox steps.
pub(crate) async fn reply_parts(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    step: fn(usize) -> OutboxStep,
    parts: &[String],
) {
    let is_group = !entry.message.is_direct;
    let records = parts
        .iter()
        .flat_map(|part| split_message(part, runtime.profile.max_text_len))
        .enumerate()
        .map(|(idx, chunk)| {
            let action = OutboxAction::Send {
                text: chunk,
                reply_to: (idx == 0)
                    .then(|| entry.message.platform_message_id.clone())
                    .filter(|id| !id.is_empty()),
            };
            OutboxRecord::new(step(idx).key(&entry.key), key.clone(), is_group, action)
        })
        .collect();
    send_all(deps, runtime, key, is_group, records).await;
}

/// Inserts then delivers records in order; failures are dead-lettered and noticed once.
/// Returns each record's platform message id.
pub(crate) async fn send_all(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    records: Vec<OutboxRecord>,
) -> Vec<Option<String>> {
    let mut stored = Vec::with_capacity(records.len());
    for record in records {
        match deps.outbox.insert(record) {
            Ok(record) => stored.push(record),
            Err(error) => tracing::warn!(%error, "Could not write an outbox record"),
        }
    }
    let mut ids = Vec::with_capacity(stored.len());
    let mut failed = false;
    for mut record in stored {
        match deliver(&runtime.parts, &runtime.budget, &deps.outbox, &mut record).await {
            Ok(id) => {
                if let Some(id) = &id
                    && let Err(error) = deps.chats.add_alias(key, id)
                {
                    tracing::debug!(%error, "Could not remember a reply's topic");
                }
                ids.push(id);
            }
            Err(error) => {
                tracing::warn!(%error, chat = %key, "A reply could not be delivered");
                if let Some(id) = resend_failed_edit(deps, runtime, key, is_group, &record).await {
                    ids.push(id);
                    continue;
                }
                failed = true;
                ids.push(None);
            }
        }
    }
    if failed {
        note(runtime, key, is_group, UNDELIVERED_NOTICE, None).await;
    }
    ids
}

/// An edit that cannot land (message deleted, too old) becomes a new message.
async fn resend_failed_edit(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    record: &OutboxRecord,
) -> Option<Option<String>> {
    let OutboxAction::Edit { text, .. } = &record.action else {
        return None;
    };
    let step = OutboxStep::Resend(Box::new(record.step()?));
    let action = OutboxAction::Send {
        text: text.clone(),
        reply_to: None,
    };
    let resend = OutboxRecord::new(
        step.key(record.journal_key()),
        key.clone(),
        is_group,
        action,
    );
    let mut resend = deps.outbox.insert(resend).ok()?;
    deliver(&runtime.parts, &runtime.budget, &deps.outbox, &mut resend)
        .await
        .ok()
}
