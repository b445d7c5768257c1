//! Answering one journalled message: a command, or a chat turn streamed into a status message
//! and finished through the outbox.

use std::sync::Arc;
use std::time::Duration;

use antler_channel::{ChatKey, InboundMessage};
use serde_json::{Map, Value, json};

use crate::agent_api::{RunEvent, RunOptions, StopReason};
use crate::channels::access::antler_user_id;
use crate::channels::actions::{CommandOutcome, run_command};
use crate::channels::chunk::split_message;
use crate::channels::commands::parse_command;
use crate::channels::deliver::deliver;
use crate::channels::files::{receive_files, resolve_artifacts};
use crate::channels::journal::JournalEntry;
use crate::channels::manager::{ChannelRuntime, ManagerInner};
use crate::channels::mapping::ChatRecord;
use crate::channels::outbox::{OutboxAction, OutboxRecord, outbox_key};
use crate::channels::stream::{StatusStream, Typing, WORKING_TEXT};
use crate::harness::{RunError, RunRequest};
use crate::messages::{HumanMessage, Message};
use crate::paths::ThreadPaths;
use crate::state::ThreadState;

pub const NO_RESPONSE: &str = "(No response from agent)";
pub const ERROR_REPLY: &str = "An error occurred while processing your request. Please try again.";
pub const BUSY_REPLY: &str = "This conversation is already processing another request. Please wait for it to finish and try again.";
pub const UNDELIVERED_NOTICE: &str =
    "⚠️ I could not deliver part of my reply here. Please ask again.";
/// How long a turn waits for a run started elsewhere (HTTP API) on the same thread.
const BUSY_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub(crate) enum TurnError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Thread(#[from] crate::store::threads::ThreadError),
    #[error(transparent)]
    Path(#[from] crate::paths::PathError),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Handles a message; `false` leaves it pending (the daemon is stopping mid-turn).
pub(crate) async fn process(
    inner: &Arc<ManagerInner>,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
) -> bool {
    let message = &entry.message;
    let result = match parse_command(&message.text, runtime.bot_username.as_deref()) {
        Some(command) => match run_command(inner, runtime, key, entry, command).await {
            Ok(CommandOutcome::Reply(text)) => {
                reply(inner, runtime, key, entry, "reply", &text).await;
                Ok(true)
            }
            Ok(CommandOutcome::Turn { text, bootstrap }) => {
                chat_turn(inner, runtime, key, entry, &text, bootstrap).await
            }
            Err(error) => Err(error),
        },
        None => chat_turn(inner, runtime, key, entry, &message.text, false).await,
    };
    match result {
        Ok(finished) => finished,
        Err(error) => {
            tracing::warn!(%error, chat = %key, "Could not answer a channel message");
            reply(inner, runtime, key, entry, "error", ERROR_REPLY).await;
            true
        }
    }
}

/// `/cancel`, handled at once instead of behind the turn it stops.
pub(crate) async fn cancel_now(
    inner: &Arc<ManagerInner>,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    journal_key: &str,
    message: &InboundMessage,
) {
    let thread = inner.chats.get(key).ok().flatten().map(|r| r.thread_id);
    let cancelled = thread.and_then(|thread_id| {
        let run_id = inner.harness.active_run(&thread_id)?;
        inner.harness.cancel_run(&thread_id, &run_id).then_some(())
    });
    let text = if cancelled.is_some() {
        "Cancelled."
    } else {
        "Nothing is running in this chat."
    };
    if let Ok(Some(entry)) = inner.journal.get(journal_key) {
        reply(inner, runtime, key, &entry, "reply", text).await;
    } else {
        note(
            runtime,
            key,
            !message.is_direct,
            text,
            Some(&message.platform_message_id),
        )
        .await;
    }
    if let Err(error) = inner
        .journal
        .mark_done(journal_key)
        .and_then(|()| inner.outbox.clear_entry(journal_key))
    {
        tracing::warn!(%error, "Could not mark /cancel answered");
    }
}

/// A best-effort, non-durable notice (queued, throttled, busy).
pub(crate) async fn note(
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    text: &str,
    reply_to: Option<&str>,
) {
    runtime.budget.acquire(&key.chat_id, is_group).await;
    if let Err(error) = runtime.parts.send.send_text(key, text, reply_to).await {
        tracing::debug!(%error, chat = %key, "Could not send a notice");
    }
}

/// A durable reply of one or more chunks (steps `{step}-{n}`).
pub(crate) async fn reply(
    inner: &ManagerInner,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    step: &str,
    text: &str,
) {
    let max = runtime.parts.send.limits().max_text_len;
    let is_group = !entry.message.is_direct;
    let mut records = Vec::new();
    for (idx, chunk) in split_message(text, max).into_iter().enumerate() {
        let action = OutboxAction::Send {
            text: chunk,
            reply_to: (idx == 0).then(|| entry.message.platform_message_id.clone()),
        };
        let record = OutboxRecord::new(
            outbox_key(&entry.key, &format!("{step}-{idx}")),
            key.clone(),
            is_group,
            action,
        );
        records.push(record);
    }
    send_all(inner, runtime, key, is_group, records).await;
}

/// Inserts then delivers records in order; failures are dead-lettered and noticed once.
async fn send_all(
    inner: &ManagerInner,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    records: Vec<OutboxRecord>,
) -> Vec<Option<String>> {
    let mut stored = Vec::with_capacity(records.len());
    for record in records {
        match inner.outbox.insert(record) {
            Ok(record) => stored.push(record),
            Err(error) => tracing::warn!(%error, "Could not write an outbox record"),
        }
    }
    let mut ids = Vec::with_capacity(stored.len());
    let mut failed = false;
    for mut record in stored {
        match deliver(&runtime.parts, &runtime.budget, &inner.outbox, &mut record).await {
            Ok(id) => {
                if let Some(id) = &id
                    && let Err(error) = inner.chats.add_alias(key, id)
                {
                    tracing::debug!(%error, "Could not remember a reply's topic");
                }
                ids.push(id);
            }
            Err(error) => {
                tracing::warn!(%error, chat = %key, "A reply could not be delivered");
                // An edit that cannot land (message deleted, too old) becomes a new message.
                if let OutboxAction::Edit { text, .. } = &record.action {
                    let resend = OutboxRecord::new(
                        format!("{}-resend", record.key),
                        key.clone(),
                        is_group,
                        OutboxAction::Send {
                            text: text.clone(),
                            reply_to: None,
                        },
                    );
                    if let Ok(mut resend) = inner.outbox.insert(resend)
                        && let Ok(id) =
                            deliver(&runtime.parts, &runtime.budget, &inner.outbox, &mut resend)
                                .await
                    {
                        ids.push(id);
                        continue;
                    }
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

async fn chat_turn(
    inner: &Arc<ManagerInner>,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    text: &str,
    bootstrap: bool,
) -> Result<bool, TurnError> {
    let message = &entry.message;
    let is_group = !message.is_direct;
    // A final answer planned before a crash is delivered, not computed again.
    let planned = inner.outbox.for_entry(&entry.key)?;
    if planned
        .iter()
        .any(|r| r.key == outbox_key(&entry.key, "final-0"))
    {
        let pending: Vec<OutboxRecord> = planned
            .into_iter()
            .filter(|r| !r.delivered && !r.key.ends_with("\u{1e}status"))
            .collect();
        send_all(inner, runtime, key, is_group, pending).await;
        return Ok(true);
    }
    let record = chat_record(inner, key, message).await?;
    let config = inner.config.current();
    let paths = ThreadPaths::new(&config.data_dir(), &record.user_id, &record.thread_id)?;
    if let Err(error) = inner.chats.add_alias(key, &message.platform_message_id) {
        tracing::debug!(%error, "Could not remember a message's topic");
    }

    let status = OutboxRecord::new(
        outbox_key(&entry.key, "status"),
        key.clone(),
        is_group,
        OutboxAction::Send {
            text: WORKING_TEXT.into(),
            reply_to: Some(message.platform_message_id.clone()),
        },
    );
    let status_id = send_all(inner, runtime, key, is_group, vec![status])
        .await
        .into_iter()
        .flatten()
        .next();

    let received = receive_files(runtime, message, &paths).await;
    // A turn re-run after a crash (its status message was already planned) may find its
    // question checkpointed: the loop saves the input before calling the model. Continue from
    // the thread instead of asking twice. New messages skip the extra state read.
    let already_asked = !planned.is_empty()
        && inner
            .harness
            .thread_state(&record.thread_id)
            .await
            .ok()
            .flatten()
            .is_some_and(|state| {
                state.messages.iter().any(|m| {
                    m.as_human().is_some_and(|h| {
                        h.meta.extra.get(INBOUND_KEY).and_then(Value::as_str)
                            == Some(entry.key.as_str())
                    })
                })
            });
    let input = if already_asked {
        Vec::new()
    } else {
        let mut human = human_message(text, message, &received.files, &received.problems);
        if let Message::Human(h) = &mut human {
            h.meta
                .extra
                .insert(INBOUND_KEY.into(), Value::String(entry.key.clone()));
        }
        vec![human]
    };
    let options = RunOptions {
        model_name: record.model.clone(),
        is_plan_mode: record.plan_mode,
        is_bootstrap: bootstrap,
        agent_name: record
            .agent
            .clone()
            .or_else(|| runtime.session_agent.clone())
            .or_else(|| config.channels.session.agent.clone()),
        channel_name: Some(message.channel.clone()),
        ..Default::default()
    };
    let request = RunRequest {
        user_id: record.user_id.clone(),
        thread_id: record.thread_id.clone(),
        input,
        options,
        want_values: false,
    };
    let mut handle = match start_when_free(inner, request).await {
        Ok(handle) => handle,
        Err(RunError::Busy { .. }) => {
            finish(
                inner,
                runtime,
                key,
                entry,
                status_id,
                BUSY_REPLY.into(),
                Vec::new(),
            )
            .await;
            return Ok(true);
        }
        Err(RunError::ShuttingDown) => return Ok(false),
        Err(error) => return Err(error.into()),
    };

    let min_interval = config.channels.stream.min_interval.map_or_else(
        || Duration::from_secs(if is_group { 3 } else { 1 }),
        Duration::from_secs_f64,
    );
    let mut stream = StatusStream::new(
        runtime,
        key,
        is_group,
        status_id.clone(),
        min_interval,
        config.channels.stream.show_progress,
    );
    let mut typing = Typing::new(runtime, key, is_group);
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    let mut error_text = None;
    loop {
        tokio::select! {
            event = handle.events.recv() => match event {
                None => break,
                Some(RunEvent::TextDelta { message_id, delta }) => stream.push_text(&message_id, &delta),
                Some(RunEvent::ToolStarted { call }) => stream.set_progress(Some(format!("· {}", call.name))),
                Some(RunEvent::ToolFinished { .. }) => stream.set_progress(None),
                Some(RunEvent::Error { message, .. }) => error_text = Some(message),
                Some(_) => {}
            },
            _ = ticker.tick() => {
                typing.tick().await;
                stream.tick().await;
            }
        }
    }
    let outcome = match handle.outcome.await {
        Ok(outcome) => outcome,
        Err(join) => {
            tracing::warn!(error = %join, "A channel run panicked");
            finish(
                inner,
                runtime,
                key,
                entry,
                status_id,
                ERROR_REPLY.into(),
                Vec::new(),
            )
            .await;
            return Ok(true);
        }
    };
    if outcome.stop == StopReason::Cancelled && inner.stop.is_cancelled() {
        return Ok(false);
    }
    let (answer, presented) = current_turn(&outcome.state);
    let mut text = match answer {
        Some(answer) => answer,
        None if !stream.text().trim().is_empty() => stream.text().to_string(),
        None if outcome.stop == StopReason::Cancelled => "Cancelled.".into(),
        None if error_text.is_some() || outcome.error.is_some() => ERROR_REPLY.into(),
        None => NO_RESPONSE.into(),
    };
    let (attachments, unresolved) = resolve_artifacts(&paths, &presented);
    if !unresolved.is_empty() {
        text.push_str(&format!(
            "\n\n(Could not attach: {})",
            unresolved.join(", ")
        ));
    }
    finish(inner, runtime, key, entry, status_id, text, attachments).await;
    Ok(true)
}

async fn chat_record(
    inner: &Arc<ManagerInner>,
    key: &ChatKey,
    message: &InboundMessage,
) -> Result<ChatRecord, TurnError> {
    let user_id = antler_user_id(&message.channel, &message.user_id);
    let harness = inner.harness.clone();
    let chat = key.to_string();
    inner
        .chats
        .get_or_create(key, &user_id, move |user| {
            let mut metadata = Map::new();
            metadata.insert(
                "channel_source".into(),
                json!({"type": "im_channel", "chat": chat}),
            );
            harness
                .create_thread(user, None, metadata)
                .map(|record| record.thread_id)
                .map_err(TurnError::from)
        })
        .await
}

async fn start_when_free(
    inner: &ManagerInner,
    request: RunRequest,
) -> Result<crate::harness::RunHandle, RunError> {
    let deadline = tokio::time::Instant::now() + BUSY_WAIT;
    loop {
        match inner.harness.start_run(request.clone()).await {
            Err(RunError::Busy { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

/// Marks the human message of an inbound platform message with its journal key.
const INBOUND_KEY: &str = "inbound_key";

fn human_message(
    text: &str,
    message: &InboundMessage,
    files: &[Value],
    problems: &[String],
) -> Message {
    let mut content = text.to_string();
    for problem in problems {
        content.push_str(&format!("\n[a file could not be received: {problem}]"));
    }
    let mut human = HumanMessage {
        id: crate::messages::new_id("human"),
        content,
        // Not `name`: a named human message counts as injected context, not the user's turn.
        ..Default::default()
    };
    if let Some(sender) = &message.display_name {
        human
            .meta
            .extra
            .insert("sender".into(), Value::String(sender.clone()));
    }
    if !files.is_empty() {
        human
            .meta
            .extra
            .insert("files".into(), Value::Array(files.to_vec()));
    }
    Message::Human(human)
}

/// The answer of the current turn (a clarification question wins) and its presented files.
fn current_turn(state: &ThreadState) -> (Option<String>, Vec<String>) {
    let start = state
        .messages
        .iter()
        .rposition(Message::is_genuine_human)
        .map_or(0, |idx| idx + 1);
    let turn = &state.messages[start..];
    let clarification = turn.iter().rev().find_map(|m| {
        m.as_tool()
            .filter(|tool| tool.name == "ask_clarification" && !tool.content.trim().is_empty())
            .map(|tool| tool.content.clone())
    });
    let answer = clarification.or_else(|| {
        turn.iter().rev().find_map(|m| {
            m.as_ai()
                .filter(|ai| !m.is_hidden() && !ai.content.trim().is_empty())
                .map(|ai| ai.content.clone())
        })
    });
    let mut presented = Vec::new();
    for ai in turn.iter().filter_map(Message::as_ai) {
        for call in ai.tool_calls.iter().filter(|c| c.name == "present_files") {
            if let Some(paths) = call.args.get("filepaths").and_then(Value::as_array) {
                presented.extend(paths.iter().filter_map(Value::as_str).map(String::from));
            }
        }
    }
    presented.dedup();
    (answer, presented)
}

/// Plans the final answer in the outbox (text chunks, then files) and delivers it. The first
/// chunk replaces the status message; `final-0` is written last so its presence means the
/// whole plan is stored.
async fn finish(
    inner: &ManagerInner,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    status_id: Option<String>,
    text: String,
    attachments: Vec<antler_channel::Attachment>,
) {
    let is_group = !entry.message.is_direct;
    let reply_to = entry.message.platform_message_id.clone();
    let chunks = split_message(&text, runtime.parts.send.limits().max_text_len);
    let mut records = Vec::new();
    for (idx, chunk) in chunks.into_iter().enumerate() {
        let action = match (&status_id, idx, &runtime.parts.edit) {
            (Some(target), 0, Some(_)) => OutboxAction::Edit {
                target: target.clone(),
                text: chunk,
            },
            _ => OutboxAction::Send {
                text: chunk,
                reply_to: Some(reply_to.clone()),
            },
        };
        records.push(OutboxRecord::new(
            outbox_key(&entry.key, &format!("final-{idx}")),
            key.clone(),
            is_group,
            action,
        ));
    }
    for (idx, attachment) in attachments.into_iter().enumerate() {
        let action = OutboxAction::Upload {
            attachment,
            reply_to: Some(reply_to.clone()),
        };
        records.push(OutboxRecord::new(
            outbox_key(&entry.key, &format!("file-{idx}")),
            key.clone(),
            is_group,
            action,
        ));
    }
    for record in records.iter().skip(1).chain(records.first()) {
        if let Err(error) = inner.outbox.insert(record.clone()) {
            tracing::warn!(%error, "Could not plan a reply in the outbox");
        }
    }
    send_all(inner, runtime, key, is_group, records).await;
}
