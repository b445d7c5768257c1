//! The turn of a schedule entry (`channels::schedule_entry`): a fired slot of a schedule created
//! in this chat, run as its owner and answered here once, under a one-line header naming the
//! schedule; or a notice about a schedule, only posted.
//!
//! A fire runs only while the store holds it claimed for this chat and this owner: an entry
//! with a schedule id and nothing claimed behind it is ignored. The owner's access is checked
//! again against the live allowlist (refused: the slot fails with the reason, nothing runs).
//! The run streams into a status message and its answer is planned in the outbox, so a turn
//! cut short after planning only delivers it again; a re-run that finds its prompt
//! checkpointed continues from it rather than asking twice. Every way out of a fire ends it
//! once with `Harness::finish_fire` (after the answer is delivered), except being cut short,
//! which leaves the entry to the next holder of the chat.

use antler_channel::ChatKey;

use crate::agent_api::StopReason;
use crate::channels::access::{Verdict, verdict};
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::outbound::reply;
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::schedule_entry::{ScheduleEntry, notice_schedule_id, parse_fire_key};
use crate::channels::stream::WORKING_TEXT;
use crate::channels::turn::conversation::{already_asked, mark_inbound};
use crate::channels::turn::{deliver_answer, finish, run, send_status};
use crate::harness::RunError;
use crate::paths::ThreadPaths;
use crate::scheduler::timing::local_label;
use crate::scheduler::{Fire, FireOutcome, FireStatus, Schedule, Target};
use antler_store::messages::Message;

/// How the answer of a fired slot starts: the schedule's name after it.
pub(crate) const HEADER: &str = "⏰";
/// How a failed slot's notice starts (also how a re-delivery recognizes one).
pub(crate) const FAILED_PREFIX: &str = "⚠ Scheduled task";

pub(super) async fn scheduled(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    which: ScheduleEntry,
) -> Result<bool, TurnError> {
    // What the turn sends replies to no platform message: there is none.
    let mut entry = entry.clone();
    let entry_id = std::mem::take(&mut entry.message.platform_message_id);
    match which {
        ScheduleEntry::Notice(notice_key) => notice(deps, runtime, key, &entry, &notice_key).await,
        ScheduleEntry::Fire(fire_key) => {
            let Some((schedule, fire)) = claimed(deps, key, &entry, &fire_key)? else {
                tracing::warn!(entry = %entry_id, chat = %key, "Ignoring a schedule entry without a claimed slot of a schedule of this chat");
                return Ok(true);
            };
            match fire_turn(deps, runtime, key, &entry, &schedule, &fire).await {
                Err(_) if deps.interrupted() => Ok(false),
                Err(error) => {
                    tracing::warn!(%error, fire = %fire.key(), chat = %key, "A scheduled slot's turn failed");
                    let text = failure_notice(deps, &schedule, &error.to_string());
                    let answer = finish::Answer::text(&text);
                    finish::deliver(deps, runtime, key, &entry, None, answer).await;
                    let detail = Some(error.to_string());
                    deps.harness.finish_fire(&fire, FireOutcome::Failed, detail);
                    Ok(true)
                }
                other => other,
            }
        }
    }
}

/// The schedule and its fire that `fire_key` names, when the fire is claimed and the schedule
/// answers in this chat as this entry's sender.
fn claimed(
    deps: &TurnDeps,
    key: &ChatKey,
    entry: &JournalEntry,
    fire_key: &str,
) -> Result<Option<(Schedule, Fire)>, TurnError> {
    let Some((schedule_id, slot)) = parse_fire_key(fire_key) else {
        return Ok(None);
    };
    let store = deps.harness.scheduler().store();
    let Some(fire) = store.fire(schedule_id, slot)? else {
        return Ok(None);
    };
    if fire.status != FireStatus::Claimed || fire.key() != fire_key {
        return Ok(None);
    }
    let Some(schedule) = store.get(schedule_id)? else {
        return Ok(None);
    };
    let here = matches!(&schedule.target, Target::Chat { chat_key, sender_id, .. }
        if *chat_key == key.to_string() && *sender_id == entry.message.user_id);
    Ok(here.then_some((schedule, fire)))
}

async fn fire_turn(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    schedule: &Schedule,
    fire: &Fire,
) -> Result<bool, TurnError> {
    let is_group = !entry.message.is_direct;
    let planned = deps.outbox.for_entry(&entry.key)?;
    if finish::redeliver_planned(deps, runtime, key, is_group, &planned).await {
        let (outcome, detail) = planned_outcome(&planned);
        deps.harness.finish_fire(fire, outcome, detail);
        return Ok(true);
    }
    if let Err(reason) = owner_allowed(deps, key, entry)? {
        tracing::info!(fire = %fire.key(), chat = %key, reason, "Not running a scheduled slot: its owner may no longer use this chat");
        let detail = format!("the owner may no longer use this chat ({reason})");
        deps.harness
            .finish_fire(fire, FireOutcome::Failed, Some(detail));
        return Ok(true);
    }
    let status_id = plan_status(deps, runtime, key, entry, schedule).await;
    let mut request = deps.harness.schedule_run_request(schedule, fire);
    for message in &mut request.input {
        if let Message::Human(human) = message {
            mark_inbound(human, &entry.key);
            // In a group the prompt is the owner's words, named like every member's.
            if !entry.message.is_direct {
                let name = entry.message.display_name.as_deref();
                human.set_shared_sender(&schedule.owner, name.unwrap_or(&schedule.owner));
            }
        }
    }
    // A re-run after a crash (its status was planned) may find the prompt checkpointed.
    if !planned.is_empty() && already_asked(deps, &fire.thread_id, &entry.key).await {
        request.input.clear();
    }
    if request.options.channel_name.is_none() {
        request.options.channel_name = Some(key.channel.clone());
    }
    let handle = match run::start(deps, request).await {
        Ok(handle) => handle,
        Err(RunError::ShuttingDown) => return Ok(false),
        Err(RunError::BudgetSpent { notice }) => {
            let text = format!("{HEADER} {}\n\n{notice}", schedule.name);
            let answer = finish::Answer::text(&text);
            finish::deliver(deps, runtime, key, entry, status_id, answer).await;
            deps.harness
                .finish_fire(fire, FireOutcome::SkippedBudget, Some(notice));
            return Ok(true);
        }
        Err(error) => {
            let reason = error.to_string();
            let answer = finish::Answer::text(&failure_notice(deps, schedule, &reason));
            finish::deliver(deps, runtime, key, entry, status_id, answer).await;
            deps.harness
                .finish_fire(fire, FireOutcome::Failed, Some(reason));
            return Ok(true);
        }
    };
    let config = deps.config.current();
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
    let paths = ThreadPaths::new(&config.data_dir(), &fire.thread_owner, &fire.thread_id)?;
    let mut answer = finish::compose(&streamed, &paths);
    let failure = finish::failure_of(&streamed, &answer);
    let (outcome, detail) = match failure {
        Some(reason) => {
            answer.text = failure_notice(deps, schedule, &reason);
            (FireOutcome::Failed, Some(reason))
        }
        None => {
            answer.text = format!("{HEADER} {}\n\n{}", schedule.name, answer.text);
            (FireOutcome::Ran, None)
        }
    };
    deliver_answer(deps, runtime, key, entry, status_id, &streamed, answer).await;
    deps.harness.finish_fire(fire, outcome, detail);
    Ok(true)
}

/// Posts a notice's text, when it is about a schedule of this chat whose owner may still use
/// it.
async fn notice(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    notice_key: &str,
) -> Result<bool, TurnError> {
    let schedule_id = notice_schedule_id(notice_key);
    let store = deps.harness.scheduler().store();
    let here = store
        .get(schedule_id)?
        .is_some_and(|schedule| schedule.target.chat_key() == Some(key.to_string().as_str()));
    if !here {
        tracing::warn!(notice = notice_key, chat = %key, "Ignoring a schedule notice for no schedule of this chat");
        return Ok(true);
    }
    if let Err(reason) = owner_allowed(deps, key, entry)? {
        tracing::info!(notice = notice_key, chat = %key, reason, "Not posting a schedule notice: its owner may no longer use this chat");
        return Ok(true);
    }
    reply(
        deps,
        runtime,
        key,
        entry,
        OutboxStep::Reply,
        &entry.message.text,
    )
    .await;
    Ok(true)
}

/// Whether the schedule's owner may still use this chat, by the live config (allowlists,
/// admins, group chats allowed, in the workspace the chat's record names); `Err` says why not.
fn owner_allowed(
    deps: &TurnDeps,
    key: &ChatKey,
    entry: &JournalEntry,
) -> Result<Result<(), String>, TurnError> {
    let config = deps.config.current();
    let Some(section) = config.channels.section(&key.channel) else {
        return Ok(Err(format!("channel {} is not configured", key.channel)));
    };
    let mut message = entry.message.clone();
    if !message.is_direct {
        message.workspace_id = deps.chats.get(key)?.and_then(|r| r.workspace_id);
    }
    Ok(
        match verdict(&section.access(), &section.group_rules(), &message) {
            Verdict::Allow => Ok(()),
            Verdict::Deny(reason) => Err(reason.to_string()),
            Verdict::NotAddressed | Verdict::Bot => Err("not addressed to the bot".into()),
        },
    )
}

/// The status message the run streams into, naming the schedule (no message to reply to).
async fn plan_status(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    schedule: &Schedule,
) -> Option<String> {
    let text = format!("{HEADER} {}\n{WORKING_TEXT}", schedule.name);
    send_status(deps, runtime, key, entry, text, None).await
}

/// "⚠ Scheduled task NAME failed: … It will run again at …" (nothing about the next run when
/// this failure pauses the schedule: the pause notice follows).
fn failure_notice(deps: &TurnDeps, schedule: &Schedule, reason: &str) -> String {
    let reason = reason.trim().trim_end_matches('.');
    let mut text = format!("{FAILED_PREFIX} {} failed: {reason}.", schedule.name);
    let pause_after = deps.config.current().scheduler.max_consecutive_failures;
    let current = deps
        .harness
        .scheduler()
        .store()
        .get(&schedule.id)
        .ok()
        .flatten()
        .unwrap_or_else(|| schedule.clone());
    let pauses = pause_after > 0 && current.consecutive_failures + 1 >= pause_after;
    if let Some(next) = current.next_fire.filter(|_| !pauses) {
        text.push_str(&format!(
            " It will run again at {}.",
            local_label(&current.timezone, next)
        ));
    }
    text
}

/// How a slot whose answer was planned before a crash ended: its first chunk says.
fn planned_outcome(planned: &[OutboxRecord]) -> (FireOutcome, Option<String>) {
    let first = planned
        .iter()
        .find(|record| record.step() == Some(OutboxStep::Final(0)));
    let text = match first.map(|record| &record.action) {
        Some(OutboxAction::Send { text, .. } | OutboxAction::Edit { text, .. }) => text.as_str(),
        _ => "",
    };
    match text.strip_prefix(FAILED_PREFIX) {
        Some(rest) => (FireOutcome::Failed, Some(rest.trim().to_string())),
        None => (FireOutcome::Ran, None),
    }
}
