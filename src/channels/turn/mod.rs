//! Answering one journalled message: a command, or a chat turn in named steps.
//!
//! A chat turn: [`conversation::resolve`] (chat → thread, files, the question) →
//! [`plan_status`] (the message the answer streams into) → [`run::start`] → [`run::stream`] →
//! [`finish::compose`] (answer text and artifacts) → [`finish::deliver`] (planned in the outbox,
//! delivered once). A turn that crashed after planning its answer only re-delivers it.

mod context;
mod conversation;
mod finish;
mod run;

use antler_channel::{ChatKey, InboundMessage};

use crate::agent_api::StopReason;
use crate::channels::actions::run_command;
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::mapping::ChatRecord;
use crate::channels::outbound::{note, react, reply, send_all};
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::stream::WORKING_TEXT;
use crate::commands::{CommandOutcome, Conversation, parse_command};
use crate::custom_agents::tools::CREATED_AGENT_NAME_KEY;
use crate::harness::RunError;
use crate::lead_agent::LeadAgentError;
use antler_store::state::ThreadState;
use serde_json::Value;

pub const NO_RESPONSE: &str = "(No response from agent)";
pub const ERROR_REPLY: &str = "An error occurred while processing your request. Please try again.";
pub const BUSY_REPLY: &str = "This conversation is already processing another request. Please wait for it to finish and try again.";

/// Handles a message; `false` leaves it pending (the daemon is stopping mid-turn, or another
/// instance took the chat over).
pub(crate) async fn process(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
) -> bool {
    let message = &entry.message;
    let result = match parse_command(&message.text, runtime.bot_username.as_deref()) {
        Some(command) => match run_command(deps, key, entry, command).await {
            Ok(CommandOutcome::Reply(text)) => {
                reply(deps, runtime, key, entry, OutboxStep::Reply, &text).await;
                Ok(true)
            }
            // A bootstrap's turn: the command set the chat's bootstrap up, the turn runs it.
            Ok(CommandOutcome::Turn { text, .. }) => {
                chat_turn(deps, runtime, key, entry, &text).await
            }
            // A request made outside any chat (the web chat, the API), decided here: its run
            // continues on its own thread, where its surface shows it; the harness owns the run.
            Ok(CommandOutcome::Resume {
                reply: text,
                request,
            }) => {
                let text = match deps.harness.resume_in_background(&request).await {
                    Ok(_) => format!("{text} The run continues in its conversation."),
                    Err(error) => format!("{text} The run could not continue yet: {error}"),
                };
                reply(deps, runtime, key, entry, OutboxStep::Reply, &text).await;
                Ok(true)
            }
            Err(error) => Err(error),
        },
        None => chat_turn(deps, runtime, key, entry, &message.text).await,
    };
    match result {
        Ok(finished) => finished,
        // The chat was taken over (or the daemon is stopping): the new holder answers it.
        Err(_) if deps.interrupted() => false,
        Err(error) => {
            tracing::warn!(%error, chat = %key, "Could not answer a channel message");
            reply(deps, runtime, key, entry, OutboxStep::Error, ERROR_REPLY).await;
            true
        }
    }
}

/// `/cancel`, handled at once instead of behind the turn it stops.
pub(crate) async fn cancel_now(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    journal_key: &str,
    message: &InboundMessage,
) {
    let thread = deps.chats.get(key).ok().flatten().map(|r| r.thread_id);
    let cancelled = thread.and_then(|thread_id| {
        let run_id = deps.harness.active_run(&thread_id)?;
        deps.harness.cancel_run(&thread_id, &run_id).then_some(())
    });
    let text = if cancelled.is_some() {
        "Cancelled."
    } else {
        "Nothing is running in this chat."
    };
    if let Ok(Some(entry)) = deps.journal.get(journal_key) {
        reply(deps, runtime, key, &entry, OutboxStep::Reply, text).await;
    } else {
        let reply_to = Some(message.platform_message_id.as_str());
        note(runtime, key, !message.is_direct, text, reply_to).await;
    }
    deps.finish_entry(journal_key);
}

async fn chat_turn(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    text: &str,
) -> Result<bool, TurnError> {
    let is_group = !entry.message.is_direct;
    let planned = deps.outbox.for_entry(&entry.key)?;
    if finish::redeliver_planned(deps, runtime, key, is_group, &planned).await {
        return Ok(true);
    }
    let config = deps.config.current();
    let reacts = runtime.reacts(&config);
    let message_id = entry.message.platform_message_id.as_str();
    if reacts {
        react(
            runtime,
            key,
            is_group,
            message_id,
            runtime.profile.reactions.received,
        )
        .await;
    }
    let status_id = plan_status(deps, runtime, key, entry).await;
    // A turn re-run after a crash (its status message was already planned) may find its
    // question checkpointed; see `conversation::resolve`.
    let rerun = !planned.is_empty();
    let conversation = conversation::resolve(deps, runtime, key, entry, text, rerun).await?;
    let request = conversation.request(&config, &entry.message.channel);
    let handle = match run::start(deps, request).await {
        Ok(handle) => handle,
        Err(RunError::Busy { .. }) => {
            let busy = finish::Answer::text(BUSY_REPLY);
            finish::deliver(deps, runtime, key, entry, status_id, busy).await;
            return Ok(true);
        }
        Err(RunError::BudgetSpent { notice }) => {
            let spent = finish::Answer::text(&notice);
            finish::deliver(deps, runtime, key, entry, status_id, spent).await;
            return Ok(true);
        }
        Err(overloaded @ RunError::Overloaded { .. }) => {
            let notice = finish::Answer::text(&overloaded.to_string());
            finish::deliver(deps, runtime, key, entry, status_id, notice).await;
            return Ok(true);
        }
        // The speaker may not run this chat's agent (in a group: someone else's custom agent):
        // the reason says what to do instead.
        Err(RunError::Agent(
            denied @ (LeadAgentError::AgentNotFound { .. } | LeadAgentError::Forbidden(_)),
        )) => {
            let notice = finish::Answer::text(&format!("Sorry, {denied}."));
            finish::deliver(deps, runtime, key, entry, status_id, notice).await;
            return Ok(true);
        }
        Err(RunError::ShuttingDown) => return Ok(false),
        Err(error) => return Err(error.into()),
    };
    let streamed = run::stream(
        deps,
        runtime,
        &config,
        key,
        is_group,
        status_id.clone(),
        handle,
    )
    .await;
    if streamed.stop() == Some(StopReason::Cancelled) && deps.interrupted() {
        return Ok(false);
    }
    if let Some(outcome) = &streamed.outcome {
        settle_bootstrap(deps, key, &conversation.record, &outcome.state);
    }
    let mut answer = finish::compose(&streamed, &conversation.paths);
    finish::name_unreceived(&mut answer, &conversation.unreceived);
    let failed = answer.failed;
    finish::deliver(deps, runtime, key, entry, status_id, answer).await;
    if reacts {
        let reactions = runtime.profile.reactions;
        let done = if failed {
            reactions.failed
        } else {
            reactions.done
        };
        react(runtime, key, is_group, message_id, done).await;
    }
    Ok(true)
}

/// A bootstrap that created its agent ends: the chat goes on with the new agent.
fn settle_bootstrap(deps: &TurnDeps, key: &ChatKey, record: &ChatRecord, state: &ThreadState) {
    if record.bootstrap.is_none() {
        return;
    }
    let Some(created) = state
        .extra
        .get(CREATED_AGENT_NAME_KEY)
        .and_then(Value::as_str)
    else {
        return;
    };
    let thread_id = record.thread_id.clone();
    let result = deps.chats.update(key, |record| {
        // Only the conversation that ran the bootstrap (a /new since then has its own).
        if record.thread_id == thread_id {
            let mut conversation = Conversation {
                agent: record.agent.clone(),
                bootstrap: record.bootstrap.take(),
                ..Default::default()
            };
            conversation.settle_bootstrap(Some(created));
            record.agent = conversation.agent;
            record.bootstrap = conversation.bootstrap;
        }
    });
    if let Err(error) = result {
        tracing::warn!(%error, chat = %key, "Could not switch the chat to the agent its bootstrap created");
    }
}

/// Sends the "Working on it…" message the answer streams into; its id, if it was sent.
async fn plan_status(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
) -> Option<String> {
    let is_group = !entry.message.is_direct;
    let status = OutboxRecord::new(
        OutboxStep::Status.key(&entry.key),
        key.clone(),
        is_group,
        OutboxAction::Send {
            text: WORKING_TEXT.into(),
            reply_to: Some(entry.message.platform_message_id.clone()),
        },
    );
    send_all(deps, runtime, key, is_group, vec![status])
        .await
        .into_iter()
        .flatten()
        .next()
}
