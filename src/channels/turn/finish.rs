//! The last steps of a chat turn: the answer (text, then the files the agent presented) planned
//! in the outbox and delivered once — also when a crash interrupted a previous delivery.

use antler_channel::{Attachment, ChatKey};
use serde_json::Value;

use crate::agent_api::StopReason;
use crate::channels::answer_files::AnswerFiles;
use crate::channels::chunk::split_message;
use crate::channels::deps::TurnDeps;
use crate::channels::journal::JournalEntry;
use crate::channels::markdown::for_chat;
use crate::channels::outbound::send_all;
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::turn::run::Streamed;
use crate::channels::turn::{ERROR_REPLY, NO_RESPONSE};
use crate::paths::ThreadPaths;
use antler_store::messages::Message;
use antler_store::state::ThreadState;

/// What the person gets.
pub(super) struct Answer {
    pub(super) text: String,
    pub(super) attachments: Vec<Attachment>,
    /// The turn did not produce an answer of the agent's (an error or a panic).
    pub(super) failed: bool,
}

impl Answer {
    pub(super) fn text(text: &str) -> Self {
        Self {
            text: text.to_string(),
            attachments: Vec::new(),
            failed: false,
        }
    }
}

/// Delivers what a previous attempt planned; `false` when no final answer was planned.
pub(super) async fn redeliver_planned(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    is_group: bool,
    planned: &[OutboxRecord],
) -> bool {
    if !planned
        .iter()
        .any(|r| r.step() == Some(OutboxStep::Final(0)))
    {
        return false;
    }
    let pending = planned
        .iter()
        // An approval request is sent (and recorded) by `approvals::send_planned`.
        .filter(|r| {
            !r.delivered && !matches!(r.step(), Some(OutboxStep::Status | OutboxStep::Approval(_)))
        })
        .cloned()
        .collect();
    send_all(deps, runtime, key, is_group, pending).await;
    true
}

/// The answer of a finished run: the agent's text (a clarification question wins), or what
/// streamed, or a sentence saying why there is none, as chats show it (`markdown::for_chat`);
/// plus the files it presented or shows.
pub(super) fn compose(streamed: &Streamed, paths: &ThreadPaths) -> Answer {
    let Some(outcome) = &streamed.outcome else {
        return Answer {
            failed: true,
            ..Answer::text(ERROR_REPLY)
        };
    };
    let (answer, presented) = current_turn(&outcome.state);
    let failed = answer.is_none() && (streamed.error.is_some() || outcome.error.is_some());
    let text = match answer {
        Some(answer) => answer,
        None if !streamed.text.trim().is_empty() => streamed.text.clone(),
        None if outcome.stop == StopReason::Cancelled => "Cancelled.".into(),
        None if failed => ERROR_REPLY.into(),
        None => NO_RESPONSE.into(),
    };
    // The presented files first, then those the text shows, each once.
    let mut files = AnswerFiles::presented(paths, &presented);
    let mut text = for_chat(&text, |link| files.fate(link));
    if !files.unresolved.is_empty() {
        text.push_str(&format!(
            "\n\n(Could not attach: {})",
            files.unresolved.join(", ")
        ));
    }
    for notice in &streamed.notices {
        text.push_str(&format!("\n\n({notice})"));
    }
    Answer {
        text,
        attachments: files.attachments,
        failed,
    }
}

/// Why a run the daemon started on someone's behalf (a schedule's slot, a webhook delivery)
/// did not answer: its error, "it was cancelled", or `None` when it answered.
pub(super) fn failure_of(streamed: &Streamed, answer: &Answer) -> Option<String> {
    if answer.failed {
        let error = streamed.error.clone().or_else(|| {
            let outcome = streamed.outcome.as_ref()?;
            outcome.error.as_ref().map(|e| e.message.clone())
        });
        Some(error.unwrap_or_else(|| "the run ended without an answer".into()))
    } else if streamed.stop() == Some(StopReason::Cancelled) {
        Some("it was cancelled".into())
    } else {
        None
    }
}

/// Names the message's files that were not received, and why, after the answer: the person
/// learns it even when the agent does not mention it.
pub(super) fn name_unreceived(answer: &mut Answer, unreceived: &[String]) {
    if !unreceived.is_empty() {
        answer
            .text
            .push_str(&format!("\n\n(Not received: {})", unreceived.join("; ")));
    }
}

/// Plans the answer in the outbox (text chunks, then files) and delivers it. The first chunk
/// replaces the status message; `Final(0)` is written last so its presence means the whole plan
/// is stored.
pub(super) async fn deliver(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    status_id: Option<String>,
    answer: Answer,
) {
    let is_group = !entry.message.is_direct;
    // An entry the daemon wrote itself (a scheduled slot, a resume) may have no message to
    // reply to.
    let reply_to = Some(entry.message.platform_message_id.clone()).filter(|id| !id.is_empty());
    let (attachments, text) = within_upload_limit(answer.attachments, answer.text, runtime);
    let chunks = split_message(&text, runtime.profile.max_text_len);
    let mut records = Vec::new();
    for (idx, chunk) in chunks.into_iter().enumerate() {
        let action = match (&status_id, idx, &runtime.parts.edit) {
            (Some(target), 0, Some(_)) => OutboxAction::Edit {
                target: target.clone(),
                text: chunk,
            },
            _ => OutboxAction::Send {
                text: chunk,
                reply_to: reply_to.clone(),
            },
        };
        let step = OutboxStep::Final(idx).key(&entry.key);
        records.push(OutboxRecord::new(step, key.clone(), is_group, action));
    }
    for (idx, attachment) in attachments.into_iter().enumerate() {
        let action = OutboxAction::Upload {
            attachment,
            reply_to: reply_to.clone(),
        };
        let step = OutboxStep::File(idx).key(&entry.key);
        records.push(OutboxRecord::new(step, key.clone(), is_group, action));
    }
    for record in records.iter().skip(1).chain(records.first()) {
        if let Err(error) = deps.outbox.insert(record.clone()) {
            tracing::warn!(%error, "Could not plan a reply in the outbox");
        }
    }
    send_all(deps, runtime, key, is_group, records).await;
}

/// Files the platform would refuse are named in the text with the reason instead of failing
/// as uploads (which would only leave an "undelivered" notice).
fn within_upload_limit(
    attachments: Vec<Attachment>,
    mut text: String,
    runtime: &ChannelRuntime,
) -> (Vec<Attachment>, String) {
    let limit = runtime.profile.max_upload_bytes;
    let (fitting, too_large): (Vec<_>, Vec<_>) =
        attachments.into_iter().partition(|file| file.size <= limit);
    if !too_large.is_empty() {
        let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        let names: Vec<String> = too_large
            .iter()
            .map(|file| format!("{} ({:.1} MB)", file.filename, mib(file.size)))
            .collect();
        text.push_str(&format!(
            "\n\n(Not attached, larger than the {:.0} MB this chat accepts: {})",
            mib(limit),
            names.join(", ")
        ));
    }
    (fitting, text)
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
            .map(|tool| tool.content.to_string())
    });
    let answer = clarification.or_else(|| {
        turn.iter().rev().find_map(|m| {
            m.as_ai()
                .filter(|ai| !m.is_hidden() && !ai.content.trim().is_empty())
                .map(|ai| ai.content.to_string())
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
