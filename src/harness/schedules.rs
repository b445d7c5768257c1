//! Scheduled runs from the harness's side: what a fired slot runs as, how it ends (once), a
//! manual run, and the state of the firing loop (`schedules_loop`) and of the dispatcher that
//! starts the claimed slots in slot order within `scheduler.max_concurrent`
//! (`schedules_dispatch`).
//!
//! The slot claim in the store is the only gate: whatever instance or restart reaches a slot,
//! its claim is one compare-and-set, and a claimed slot is finished once
//! (`ScheduleStore::finish`, Claimed → Done), so a slot runs once and never passes unrecorded.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::{Map, json};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Harness, HarnessError, RunRequest, Speaker};
use crate::agent_api::{ChatPlace, RunOptions};
use crate::cluster::{CLOCK_START_ENV, SystemWallClock, WallClock, clock_from_env};
use crate::scheduler::{
    Caller, ChatSchedule, Deliver, Fire, FireKind, FireOutcome, FireStatus, Schedule,
    ScheduleStatus, SchedulerError, Target,
};
use antler_store::StepCheckpoint;
use antler_store::messages::{HumanMessage, Message, MessageMeta};
use antler_store::state::{StateChanges, StateUpdate};
use antler_store::threads::ThreadError;

/// The key of a scheduled run's human message's `meta.extra` naming its fire.
pub(crate) const SCHEDULE_FIRE_META: &str = "schedule_fire";

/// The firing loop's and the dispatcher's state (one per harness).
#[derive(Default)]
pub(super) struct Runner {
    /// The loop, the dispatcher, jitter waits and chat fires' permits; stopped first at
    /// shutdown (a run already started belongs to the harness's run tracker).
    pub(super) tracker: TaskTracker,
    pub(super) stop: CancellationToken,
    pub(super) started: AtomicBool,
    /// Claimed slots waiting for a concurrency permit, in slot order.
    pub(super) queue: Mutex<BTreeMap<(DateTime<Utc>, String), Queued>>,
    pub(super) queued: Arc<Notify>,
    /// Chat fires run by the channel layer: the release of each one's permit, by fire key,
    /// sent by `finish_fire`.
    pub(super) held: Mutex<HashMap<String, oneshot::Sender<()>>>,
    /// Schedules with a slot started and not yet ended: one slot of a schedule at a time, so
    /// slots of one conversation (several due at once after a restart) answer in slot order,
    /// each question before the next is asked.
    pub(super) active: Mutex<HashSet<String>>,
}

/// A claimed slot and its schedule as claimed.
pub(super) struct Queued {
    pub(super) schedule: Schedule,
    pub(super) fire: Fire,
}

impl Runner {
    pub(super) fn release(&self, fire_key: &str) {
        let sender = lock(&self.held).remove(fire_key);
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The daemon's wall clock: the system's, or, for tests, one started at `ANTLER_CLOCK_START`.
pub(super) fn wall_clock() -> Result<Arc<dyn WallClock>, HarnessError> {
    let value = std::env::var(CLOCK_START_ENV).ok();
    match clock_from_env(value.as_deref()).map_err(HarnessError::Clock)? {
        Some(clock) => {
            tracing::warn!(
                start = value.as_deref().unwrap_or_default(),
                "{CLOCK_START_ENV} is set: this daemon's clock starts at that time (for tests only; schedules, leases and approvals run on it)"
            );
            Ok(Arc::new(clock))
        }
        None => Ok(Arc::new(SystemWallClock)),
    }
}

/// The thread a fire runs in: the schedule's (`here`), or one of its own per slot
/// (`new_thread`), derived from the schedule and the slot so a restart finds it again.
pub(super) fn fire_thread(schedule: &Schedule, slot: DateTime<Utc>) -> String {
    match schedule.deliver {
        Deliver::Here => schedule.thread_id.clone(),
        Deliver::NewThread => format!("sched-{}-{}", schedule.id, slot.timestamp_millis()),
    }
}

/// The id of a fire's human message, fixed by the fire (a restart finds the message by its
/// `meta.extra.schedule_fire` mark: a thread's first message lends its id to the date reminder).
pub(super) fn fire_message_id(fire: &Fire) -> String {
    format!(
        "human-sched-{}-{}",
        fire.schedule_id,
        fire.slot.timestamp_millis()
    )
}

/// A fresh claimed fire of `schedule` for `slot`.
pub(super) fn new_fire(
    schedule: &Schedule,
    slot: DateTime<Utc>,
    kind: FireKind,
    now: DateTime<Utc>,
    instance: &str,
) -> Fire {
    Fire {
        schedule_id: schedule.id.clone(),
        slot,
        kind,
        status: FireStatus::Claimed,
        thread_id: fire_thread(schedule, slot),
        thread_owner: schedule.thread_owner.clone(),
        claimed_at: now,
        claimed_by: instance.to_string(),
        outcome: None,
        detail: None,
        finished_at: None,
    }
}

impl Harness {
    /// Where fired slots of schedules created in a chat go (the channel layer's hook, set at
    /// start like `set_chat_resume`).
    pub fn set_chat_schedule(&self, hook: Arc<dyn ChatSchedule>) {
        *lock(&self.inner.chat_schedule) = Some(hook);
    }

    pub(super) fn chat_schedule(&self) -> Option<Arc<dyn ChatSchedule>> {
        lock(&self.inner.chat_schedule).clone()
    }

    /// The run of a fire: in the fire's thread as its owner, spoken by the schedule's owner (a
    /// member of a shared conversation), the prompt as one human message marked with the fire,
    /// the schedule's agent and model, nobody waiting for a clarification.
    pub fn schedule_run_request(&self, schedule: &Schedule, fire: &Fire) -> RunRequest {
        let speaker = if schedule.owner == fire.thread_owner {
            Speaker::Owner
        } else {
            Speaker::Member {
                user_id: schedule.owner.clone(),
            }
        };
        let mut extra = Map::new();
        extra.insert(SCHEDULE_FIRE_META.into(), json!(fire.key()));
        let message = Message::Human(HumanMessage {
            id: fire_message_id(fire).into(),
            content: schedule.prompt.clone().into(),
            meta: MessageMeta {
                hide_from_ui: false,
                extra,
            },
            ..Default::default()
        });
        let chat = match &schedule.target {
            Target::Chat {
                chat_key,
                sender_id,
                sender_name,
                shared,
            } => Some(ChatPlace {
                chat_key: chat_key.clone(),
                sender_id: sender_id.clone(),
                sender_name: sender_name.clone(),
                shared: *shared,
            }),
            Target::Thread => None,
        };
        RunRequest {
            user_id: fire.thread_owner.clone(),
            speaker,
            thread_id: fire.thread_id.clone(),
            input: vec![message],
            options: RunOptions {
                agent_name: schedule.agent_name.clone(),
                agent_owner: schedule.agent_owner.clone(),
                model_name: schedule.model_name.clone(),
                non_interactive: true,
                schedule_fire: Some(fire.key()),
                chat,
                ..RunOptions::default()
            },
            want_values: false,
        }
    }

    /// A fired slot ended: records it once (a second report of the same fire changes
    /// nothing), counts it, frees its concurrency permit, and when the schedule paused itself
    /// says so in its conversation.
    pub fn finish_fire(&self, fire: &Fire, outcome: FireOutcome, detail: Option<String>) {
        let key = fire.key();
        let config = self.inner.config.current();
        let pause_after = config.scheduler.max_consecutive_failures;
        let now = self.inner.scheduler.now();
        let finished = self.inner.scheduler.store().finish(
            &fire.schedule_id,
            fire.slot,
            outcome,
            detail.clone(),
            now,
            pause_after,
        );
        match finished {
            Ok(Some((fire, schedule))) => {
                crate::metrics::schedule_fire(fire_label(&fire, outcome));
                tracing::info!(fire = %key, outcome = outcome.as_str(), detail = detail.as_deref().unwrap_or(""), "A scheduled slot ended");
                if let Some(schedule) = schedule
                    && outcome == FireOutcome::Failed
                    && schedule.status == ScheduleStatus::Paused
                    && schedule.consecutive_failures >= pause_after
                {
                    let text = pause_notice(&schedule, detail.as_deref());
                    self.schedule_notice(&schedule, &fire, &format!("{key}:paused"), &text);
                }
            }
            Ok(None) => tracing::debug!(fire = %key, "A scheduled slot was already finished"),
            Err(error) => {
                tracing::warn!(%error, fire = %key, "Could not record the end of a scheduled slot; a restart finishes it")
            }
        }
        self.inner.runner.release(&key);
    }

    /// Fires a schedule now (`FireKind::Manual`) as `caller` (their own; an admin's, any),
    /// paused or not; returns the claimed fire. It waits for a permit like any slot; with no
    /// firing loop running (the CLI on the data dir) it stays claimed and runs when the
    /// daemon starts.
    pub async fn run_schedule_now(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Fire, SchedulerError> {
        if !self.inner.config.current().scheduler.enabled {
            return Err(SchedulerError::Disabled);
        }
        let schedule = self.inner.scheduler.get(caller, id)?;
        let now = self.inner.scheduler.now();
        let fire = new_fire(
            &schedule,
            now,
            FireKind::Manual,
            now,
            self.inner.cluster.instance_id(),
        );
        if !self.inner.scheduler.store().claim_manual(fire.clone())? {
            return Err(SchedulerError::Invalid(format!(
                "schedule {id} was started this very moment already; wait for that run"
            )));
        }
        tracing::info!(fire = %fire.key(), by = %caller.user_id, "A schedule was run by hand");
        self.enqueue_fire(schedule, fire.clone());
        Ok(fire)
    }

    /// The soonest next fire of an active schedule (for `/readyz`).
    pub fn next_schedule_fire(&self) -> Option<DateTime<Utc>> {
        match self.inner.scheduler.store().next_due() {
            Ok(next) => next,
            Err(error) => {
                tracing::warn!(%error, "Could not read the next scheduled slot");
                None
            }
        }
    }

    /// A short notice in a schedule's conversation: through the chat hook in its chat, else
    /// as an AI message in the fire's thread (when no run is on it).
    pub(super) fn schedule_notice(&self, schedule: &Schedule, fire: &Fire, key: &str, text: &str) {
        if schedule.target.chat_key().is_some()
            && let Some(hook) = self.chat_schedule()
        {
            if let Err(error) = hook.notice(schedule, key, text) {
                tracing::warn!(%error, schedule = %schedule.id, "Could not post a schedule's notice in its chat");
            }
            return;
        }
        if let Err(error) = self.thread_notice(&fire.thread_id, &fire.thread_owner, key, text) {
            tracing::warn!(%error, schedule = %schedule.id, thread_id = %fire.thread_id, "Could not post a schedule's notice in its thread");
        }
    }

    /// Appends `text` as an AI message to the thread (created for `owner` if new), unless a
    /// run holds the thread now (its checkpoints would conflict): then only the log says it.
    fn thread_notice(
        &self,
        thread_id: &str,
        owner: &str,
        key: &str,
        text: &str,
    ) -> Result<(), ThreadError> {
        let runs = self.runs();
        if runs.contains_key(thread_id) {
            tracing::info!(
                thread_id,
                notice = text,
                "A run holds the thread; the schedule's notice is only logged"
            );
            return Ok(());
        }
        let Ok(held) = self.hold_thread(thread_id) else {
            tracing::info!(
                thread_id,
                notice = text,
                "A run holds the thread on another instance; the schedule's notice is only logged"
            );
            return Ok(());
        };
        if self.inner.threads.get(thread_id)?.is_none() {
            self.inner
                .threads
                .create(owner, Some(thread_id.to_string()), Map::new())?;
        }
        let mut state = match self.inner.threads.state(thread_id)? {
            Some((_, state)) => (*state).clone(),
            None => Default::default(),
        };
        let mut message = Message::ai(text.to_string());
        if let Message::Ai(ai) = &mut message {
            ai.meta.extra.insert("schedule_notice".into(), json!(key));
        }
        let update = StateUpdate {
            messages: vec![message],
            ..Default::default()
        };
        let mut changes = StateChanges::new();
        changes.record(&update);
        state
            .apply(update)
            .map_err(|e| ThreadError::Store(antler_store::StoreError::Io(e.to_string())))?;
        self.inner.threads.save_step(StepCheckpoint {
            thread_id,
            run_id: key,
            step: 0,
            state: &state,
            changes: &changes,
        })?;
        drop(held);
        drop(runs);
        Ok(())
    }
}

/// The `antler_schedule_fires_total` label of a fire's end: `caught_up` for a caught-up slot
/// that ran.
fn fire_label(fire: &Fire, outcome: FireOutcome) -> &'static str {
    if outcome == FireOutcome::Ran && fire.kind == FireKind::CatchUp {
        "caught_up"
    } else {
        outcome.as_str()
    }
}

/// "⏸ Schedule NAME paused after 3 failed runs in a row; …", with how to resume it.
pub(super) fn pause_notice(schedule: &Schedule, detail: Option<&str>) -> String {
    let last = detail
        .map(|d| {
            format!(
                " (the last: {})",
                crate::agent_api::shared::truncate_chars(d, 200)
            )
        })
        .unwrap_or_default();
    format!(
        "⏸ Schedule {name} paused after {n} failed runs in a row{last}. /schedules shows it; resume it by asking me to resume schedule {id}, or with `antler schedules resume {id}`.",
        name = schedule.name,
        n = schedule.consecutive_failures,
        id = schedule.id,
    )
}

#[cfg(test)]
#[path = "schedules_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "schedules_cluster_tests.rs"]
mod cluster_tests;

#[cfg(test)]
#[path = "schedules_order_tests.rs"]
mod order_tests;
