//! Step one of a chat turn: which thread the chat continues, the files that came with the
//! message, and the question to append (unless a crashed run already checkpointed it).

use antler_channel::{ChatKey, InboundMessage};
use serde_json::Value;

use crate::agent_api::RunOptions;
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::files::receive_files;
use crate::channels::journal::JournalEntry;
use crate::channels::mapping::{ChatRecord, chosen_agent};
use crate::channels::runtime::ChannelRuntime;
use crate::config::AppConfig;
use crate::harness::RunRequest;
use crate::messages::{HumanMessage, Message};
use crate::paths::ThreadPaths;

/// Marks the human message of an inbound platform message with its journal key.
const INBOUND_KEY: &str = "inbound_key";

/// The thread a turn runs on and what it appends to it.
pub(super) struct Conversation {
    pub(super) record: ChatRecord,
    pub(super) paths: ThreadPaths,
    input: Vec<Message>,
    /// Files of the message that were not received, with why: the reply names them.
    pub(super) unreceived: Vec<String>,
}

pub(super) async fn resolve(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    text: &str,
    rerun: bool,
) -> Result<Conversation, TurnError> {
    let message = &entry.message;
    let record = deps.chat_record(key, message).await?;
    let config = deps.config.current();
    let paths = ThreadPaths::new(&config.data_dir(), &record.user_id, &record.thread_id)?;
    if let Err(error) = deps.chats.add_alias(key, &message.platform_message_id) {
        tracing::debug!(%error, "Could not remember a message's topic");
    }
    let received = receive_files(runtime, message, &paths, &config.uploads).await;
    // The loop saves the input before calling the model, so a re-run may find its question
    // checkpointed: continue from the thread instead of asking twice. New messages skip the
    // extra state read.
    let input = if rerun && already_asked(deps, &record, &entry.key).await {
        Vec::new()
    } else {
        vec![human_message(
            text,
            message,
            &entry.key,
            &received.files,
            &received.problems,
        )]
    };
    Ok(Conversation {
        record,
        paths,
        input,
        unreceived: received.problems,
    })
}

impl Conversation {
    /// The run for this turn, with the chat's settings.
    pub(super) fn request(&self, config: &AppConfig, channel: &str, bootstrap: bool) -> RunRequest {
        let record = &self.record;
        let options = RunOptions {
            model_name: record.model.clone(),
            is_plan_mode: record.plan_mode,
            // Chats have no per-run options: `subagents.enabled` decides.
            subagent_enabled: config.subagents.enabled,
            is_bootstrap: bootstrap,
            agent_name: chosen_agent(Some(record), &config.channels, channel),
            channel_name: Some(channel.to_string()),
            ..Default::default()
        };
        RunRequest {
            user_id: record.user_id.clone(),
            thread_id: record.thread_id.clone(),
            input: self.input.clone(),
            options,
            want_values: false,
        }
    }
}

async fn already_asked(deps: &TurnDeps, record: &ChatRecord, journal_key: &str) -> bool {
    let state = deps.harness.thread_state(&record.thread_id).await;
    state.ok().flatten().is_some_and(|state| {
        state.messages.iter().any(|m| {
            m.as_human().is_some_and(|h| {
                h.meta.extra.get(INBOUND_KEY).and_then(Value::as_str) == Some(journal_key)
            })
        })
    })
}

fn human_message(
    text: &str,
    message: &InboundMessage,
    journal_key: &str,
    files: &[Value],
    problems: &[String],
) -> Message {
    let mut content = text.to_string();
    for problem in problems {
        content.push_str(&format!("\n[a file could not be received: {problem}]"));
    }
    let mut human = HumanMessage {
        id: crate::messages::new_id("human").into(),
        content: content.into(),
        // Not `name`: a named human message counts as injected context, not the user's turn.
        ..Default::default()
    };
    let extra = &mut human.meta.extra;
    extra.insert(INBOUND_KEY.into(), Value::String(journal_key.to_string()));
    if let Some(sender) = &message.display_name {
        extra.insert("sender".into(), Value::String(sender.clone()));
    }
    if !files.is_empty() {
        extra.insert("files".into(), Value::Array(files.to_vec()));
    }
    Message::Human(human)
}
