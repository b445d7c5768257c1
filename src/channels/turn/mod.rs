//! Answering one journalled message: a command, or a chat turn in named steps.
//!
//! A chat turn: [`conversation::resolve`] (chat → thread, files, voice notes transcribed by
//! [`voice`], the question) → [`plan_status`] (the message the answer streams into; after
//! `resolve` for a voice note, whose echoed transcript comes first) → [`run::start`] → [`run::stream`] →
//! [`finish::compose`] (answer text and artifacts) → [`finish::deliver`] (planned in the outbox,
//! delivered once) → [`spoken::speak_answer`] (the answer spoken too, where asked). A turn
//! that crashed after planning its answer only re-delivers it. A run
//! that parks on an approval posts the request after its answer (`approvals`); clicks, typed
//! `/approve` `/deny` and the entry that resumes a decided request are answered here too, and
//! the entries of a schedule's fired slots and notices ([`schedule`]) before anything else.

mod context;
mod conversation;
mod finish;
mod hook;
mod resume;
mod run;
mod schedule;
mod spoken;
mod voice;

use antler_channel::{ChatKey, InboundMessage};
use tracing::Instrument;

use crate::agent_api::StopReason;
use crate::channels::actions::run_command;
use crate::channels::approvals;
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::hook_entry::hook_entry_of;
use crate::channels::journal::JournalEntry;
use crate::channels::mapping::ChatRecord;
use crate::channels::outbound::{note, react, reply, reply_parts, send_all};
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::schedule_entry::schedule_entry_of;
use crate::channels::stream::WORKING_TEXT;
use crate::commands::{Command, CommandOutcome, Conversation, parse_command};
use crate::custom_agents::tools::CREATED_AGENT_NAME_KEY;
use crate::harness::{RunError, RunHandle, RunRequest};
use crate::lead_agent::LeadAgentError;
use antler_store::state::ThreadState;
use serde_json::Value;

pub const NO_RESPONSE: &str = "(No response from agent)";
pub const ERROR_REPLY: &str = "An error occurred while processing your request. Please try again.";
pub const BUSY_REPLY: &str = "This conversation is already processing another request. Please wait for it to finish and try again.";
/// The answer of a run that parked before saying anything: the request follows it.
pub(crate) const AWAITING_REPLY: &str = "⏸ Waiting for approval.";

/// Handles a message; `false` leaves it pending (the daemon is stopping mid-turn, or another
/// instance took the chat over).
pub(crate) async fn process(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
) -> bool {
    let message = &entry.message;
    let command = parse_command(&message.text, runtime.bot_username.as_deref());
    let result = if let Some(delivery) = hook_entry_of(message) {
        hook::delivered(deps, runtime, key, entry, delivery).await
    } else if let Some(which) = schedule_entry_of(message) {
        schedule::scheduled(deps, runtime, key, entry, which).await
    } else if let Some(approval_id) = approvals::resume_of(message) {
        resume::resume(deps, runtime, key, entry, &approval_id).await
    } else if message.click.is_some() {
        approvals::on_click(deps, runtime, key, entry).await
    } else {
        match command {
            Some(command @ (Command::Approve(_) | Command::Deny { .. })) => {
                approvals::on_command(deps, runtime, key, entry, command).await
            }
            Some(command) => match run_command(deps, key, entry, command).await {
                Ok(CommandOutcome::Reply(text)) => {
                    reply(deps, runtime, key, entry, OutboxStep::Reply, &text).await;
                    Ok(true)
                }
                Ok(CommandOutcome::Replies(parts)) => {
                    reply_parts(deps, runtime, key, entry, OutboxStep::Reply, &parts).await;
                    Ok(true)
                }
                // A bootstrap's turn: the command set the chat's bootstrap up, the turn runs it.
                Ok(CommandOutcome::Turn { text, .. }) => {
                    chat_turn(deps, runtime, key, entry, &text).await
                }
                // A request made outside any chat (the web chat, the API), decided here: its run
                // continues on its own thread, where its surface shows it; the harness owns it.
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
            None => {
                let span = crate::telemetry::spans::inbound(&message.channel, &message.text);
                chat_turn(deps, runtime, key, entry, &message.text)
                    .instrument(span)
                    .await
            }
        }
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
        approvals::send_planned(deps, runtime, key, &planned).await;
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
    // A voice note is heard first: its echoed transcript comes before the status message,
    // and a note that cannot be heard gets a reply instead of one.
    let hears_first = voice::expected(&config, &entry.message);
    let mut status_id = match hears_first {
        true => None,
        false => plan_status(deps, runtime, key, entry).await,
    };
    // A turn re-run after a crash (its status message was already planned) may find its
    // question checkpointed; see `conversation::resolve`.
    let rerun = !planned.is_empty();
    let conversation = conversation::resolve(deps, runtime, key, entry, text, rerun).await?;
    if hears_first {
        if let Some(refusal) = conversation.heard.refusal_reply(text) {
            reply(deps, runtime, key, entry, OutboxStep::Reply, &refusal).await;
            if reacts {
                let failed = runtime.profile.reactions.failed;
                react(runtime, key, is_group, message_id, failed).await;
            }
            return Ok(true);
        }
        let heard = &conversation.heard;
        voice::echo(deps, runtime, key, entry, &config, heard).await;
        status_id = plan_status(deps, runtime, key, entry).await;
    }
    let request = conversation.request(&config, &entry.message.channel);
    // A request still waiting is overtaken by this message (the run supersedes it).
    let waiting = approvals::waiting_in(deps, &conversation.record.thread_id);
    let handle = match start(deps, runtime, key, entry, status_id.clone(), request).await? {
        Started::Run(handle) => handle,
        Started::Answered => return Ok(true),
        Started::Interrupted => return Ok(false),
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
    approvals::settle_overtaken(deps, &waiting);
    let mut answer = finish::compose(&streamed, &conversation.paths);
    // Spoken after the text: only an answer of the agent's, not an error or a request.
    let spoken = (!answer.failed
        && streamed.parked_on().is_none()
        && spoken::wanted(&config, conversation.record.voice, &entry.message))
    .then(|| answer.text.clone());
    finish::name_unreceived(&mut answer, &conversation.unreceived);
    let failed = answer.failed;
    deliver_answer(deps, runtime, key, entry, status_id, &streamed, answer).await;
    if let Some(text) = spoken {
        spoken::speak_answer(deps, runtime, key, entry, &conversation.paths, &text).await;
    }
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

/// Whether a turn's run started.
enum Started {
    Run(RunHandle),
    /// It could not (busy, budget spent, overloaded, not allowed): the answer said why.
    Answered,
    /// The turn was interrupted meanwhile: its message stays pending.
    Interrupted,
}

/// Starts the turn's run; one that cannot start is answered with the reason instead.
async fn start(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    status_id: Option<String>,
    request: RunRequest,
) -> Result<Started, TurnError> {
    let notice = match run::start(deps, request).await {
        Ok(handle) => return Ok(Started::Run(handle)),
        Err(RunError::Busy { .. }) => BUSY_REPLY.to_string(),
        Err(RunError::BudgetSpent { notice }) => notice,
        Err(overloaded @ RunError::Overloaded { .. }) => overloaded.to_string(),
        // The speaker may not run this chat's agent (in a group: someone else's custom agent):
        // the reason says what to do instead.
        Err(RunError::Agent(
            denied @ (LeadAgentError::AgentNotFound { .. } | LeadAgentError::Forbidden(_)),
        )) => format!("Sorry, {denied}."),
        Err(RunError::ShuttingDown) => return Ok(Started::Interrupted),
        Err(error) => return Err(error.into()),
    };
    let answer = finish::Answer::text(&notice);
    finish::deliver(deps, runtime, key, entry, status_id, answer).await;
    Ok(Started::Answered)
}

/// Delivers a run's answer; a run parked on an approval posts the request after it, planned
/// before the answer so that a restart finds both in the plan.
async fn deliver_answer(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    status_id: Option<String>,
    streamed: &run::Streamed,
    mut answer: finish::Answer,
) {
    let request = streamed
        .parked_on()
        .and_then(|request| approvals::plan_request(deps, runtime, key, entry, request));
    // Parked before saying anything in this run: the thread's older text (what a resumed run
    // said before its first park) is not said again.
    if request.is_some() && (answer.text == NO_RESPONSE || streamed.text.trim().is_empty()) {
        answer.text = AWAITING_REPLY.into();
    }
    let span = crate::telemetry::spans::delivery(&entry.message.channel);
    finish::deliver(deps, runtime, key, entry, status_id, answer)
        .instrument(span)
        .await;
    if let Some(record) = request {
        approvals::send_request(deps, runtime, key, record).await;
    }
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
    let reply_to = Some(entry.message.platform_message_id.clone());
    send_status(deps, runtime, key, entry, WORKING_TEXT.into(), reply_to).await
}

/// Sends a turn's status message (`text`, replying to `reply_to`) through the outbox, once per
/// entry; its id, if it was sent.
async fn send_status(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    text: String,
    reply_to: Option<String>,
) -> Option<String> {
    let is_group = !entry.message.is_direct;
    let status = OutboxRecord::new(
        OutboxStep::Status.key(&entry.key),
        key.clone(),
        is_group,
        OutboxAction::Send { text, reply_to },
    );
    send_all(deps, runtime, key, is_group, vec![status])
        .await
        .into_iter()
        .flatten()
        .next()
}
