//! Step one of a chat turn: which thread the chat continues, who speaks (in a group chat the
//! sender, shown to the model by name), the files that came with the message (received and
//! converted once, `channels::received`), what was said
//! before it in a group (`context`), and the question to append (unless a crashed run already
//! checkpointed it), with its voice notes transcribed (`voice`).

use antler_channel::{ChatKey, InboundMessage};
use serde_json::Value;

use crate::agent_api::{ChatPlace, RunOptions};
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::mapping::{ChatRecord, chosen_agent};
use crate::channels::received::receive_once;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::sender::sender_name;
use crate::channels::turn::context;
use crate::channels::turn::voice::{self, Heard};
use crate::config::AppConfig;
use crate::harness::{RunRequest, Speaker};
use crate::paths::ThreadPaths;
use antler_store::messages::{HumanMessage, Message, SENDER_NAME};

/// Marks the human message of an inbound platform message with its journal key.
const INBOUND_KEY: &str = "inbound_key";

/// The thread a turn runs on, who speaks, and what it appends to the thread.
pub(super) struct Conversation {
    pub(super) record: ChatRecord,
    pub(super) paths: ThreadPaths,
    /// In a group chat, the sender: the turn is theirs on the chat's thread.
    speaker: Speaker,
    input: Vec<Message>,
    /// Files of the message that were not received, with why: the reply names them.
    pub(super) unreceived: Vec<String>,
    /// The chat and who spoke in it (`RunOptions::chat`): a schedule created in this turn
    /// answers here, journalled as theirs.
    place: ChatPlace,
    /// What the message's voice notes said (nothing when the question was already asked).
    pub(super) heard: Heard,
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
    let user_id = deps.sender(message)?;
    let record = deps.chat_record(key, message, &user_id).await?;
    let config = deps.config.current();
    let paths = ThreadPaths::new(&config.data_dir(), &record.user_id, &record.thread_id)?;
    if let Err(error) = deps.chats.add_alias(key, &message.platform_message_id) {
        tracing::debug!(%error, "Could not remember a message's topic");
    }
    let converter = deps.harness.converter();
    let received = receive_once(runtime, converter, &config, message, &entry.key, &paths).await;
    let speaker_user = user_id.clone();
    let sender = if message.is_direct {
        None
    } else {
        Some((user_id, sender_name(runtime, message).await))
    };
    // The loop saves the input before calling the model, so a re-run may find its question
    // checkpointed: continue from the thread instead of asking twice. New messages skip the
    // extra state read.
    let mut heard = Heard::default();
    let input = if rerun && already_asked(deps, &record.thread_id, &entry.key).await {
        Vec::new()
    } else {
        heard = voice::transcribe(deps, &config, &speaker_user, &paths, &received).await;
        let mut input = Vec::new();
        if !message.is_direct {
            let limits = config.channels.context_limits(&runtime.name);
            let wanted = runtime.parts.history.is_some() || !message.context.is_empty();
            let state = match wanted && limits.max_messages > 0 {
                true => deps
                    .harness
                    .thread_state(&record.thread_id)
                    .await
                    .ok()
                    .flatten(),
                false => None,
            };
            input.extend(context::earlier_messages(runtime, message, state.as_ref(), limits).await);
        }
        input.push(human_message(
            &heard.content(text),
            message,
            sender.as_ref(),
            &entry.key,
            &received.files,
            &received.problems,
        ));
        input
    };
    let place = ChatPlace {
        chat_key: key.to_string(),
        sender_id: message.user_id.clone(),
        sender_name: match &sender {
            Some((_, name)) => Some(name.clone()),
            None => message.display_name.clone(),
        },
        shared: record.shared,
    };
    let speaker = match sender {
        Some((user_id, _)) => Speaker::Member { user_id },
        None => Speaker::Owner,
    };
    Ok(Conversation {
        record,
        paths,
        speaker,
        input,
        unreceived: received.problems,
        place,
        heard,
    })
}

impl Conversation {
    /// The run for this turn, with the chat's settings.
    /// While the chat's bootstrap lasts, every turn runs it for the agent being set up.
    pub(super) fn request(&self, config: &AppConfig, channel: &str) -> RunRequest {
        let record = &self.record;
        let agent_name = match &record.bootstrap {
            Some(bootstrap) => bootstrap.agent.clone(),
            None => chosen_agent(Some(record), &config.channels, channel),
        };
        let options = RunOptions {
            model_name: record.model.clone(),
            is_plan_mode: record.plan_mode,
            // Chats have no per-run options: `subagents.enabled` decides.
            subagent_enabled: config.subagents.enabled,
            is_bootstrap: record.bootstrap.is_some(),
            agent_name,
            agent_owner: record.agent_owner(),
            channel_name: Some(channel.to_string()),
            chat: Some(self.place.clone()),
            ..Default::default()
        };
        RunRequest {
            user_id: record.user_id.clone(),
            speaker: self.speaker.clone(),
            thread_id: record.thread_id.clone(),
            input: self.input.clone(),
            options,
            want_values: false,
        }
    }
}

/// Whether `thread_id` holds the human message of the entry `journal_key` (see
/// [`mark_inbound`]): a re-run after a crash continues from it instead of asking again.
pub(super) async fn already_asked(deps: &TurnDeps, thread_id: &str, journal_key: &str) -> bool {
    let state = deps.harness.thread_state(thread_id).await;
    state.ok().flatten().is_some_and(|state| {
        state.messages.iter().any(|m| {
            m.as_human().is_some_and(|h| {
                h.meta.extra.get(INBOUND_KEY).and_then(Value::as_str) == Some(journal_key)
            })
        })
    })
}

/// Marks a human message as the question of the journal entry `journal_key`.
pub(super) fn mark_inbound(human: &mut HumanMessage, journal_key: &str) {
    human
        .meta
        .extra
        .insert(INBOUND_KEY.into(), Value::String(journal_key.to_string()));
}

fn human_message(
    text: &str,
    message: &InboundMessage,
    shared_sender: Option<&(String, String)>,
    journal_key: &str,
    files: &[Value],
    problems: &[String],
) -> Message {
    let mut content = text.to_string();
    for problem in problems {
        content.push_str(&format!("\n[a file could not be received: {problem}]"));
    }
    let mut human = HumanMessage {
        id: antler_store::messages::new_id("human").into(),
        content: content.into(),
        // Not `name`: a named human message counts as injected context, not the user's turn.
        ..Default::default()
    };
    mark_inbound(&mut human, journal_key);
    let extra = &mut human.meta.extra;
    extra.insert(
        context::PLATFORM_MESSAGE_ID.into(),
        Value::String(message.platform_message_id.clone()),
    );
    if let Some(sender) = &message.display_name {
        extra.insert(SENDER_NAME.into(), Value::String(sender.clone()));
    }
    if !files.is_empty() {
        extra.insert("files".into(), Value::Array(files.to_vec()));
    }
    if let Some((user_id, name)) = shared_sender {
        human.set_shared_sender(user_id, name);
    }
    Message::Human(human)
}
