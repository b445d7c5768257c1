//! Scheduled tasks (`scheduler:`): the agent works on its own schedule, once per slot, and
//! answers in the conversation it was asked in.
//!
//! What a schedule is (`model`), when its slots fall (`timing`), where schedules and every
//! slot's record live and the one claim that gates a slot (`store`), the `schedule_task` tool
//! (`tool`), and [`Scheduler`]: what every surface (the tool, `/schedules`, the HTTP API, the
//! CLI) creates, lists and changes schedules through. Firing a due slot is the harness's
//! (`harness::schedules`: it sleeps until [`ScheduleStore::next_due`], woken by
//! [`Scheduler::wake`]); answering in a chat is the channels' ([`ChatSchedule`]).

pub mod describe;
pub mod model;
pub mod store;
pub mod timing;
pub mod tool;

pub use model::{
    Caller, CatchUp, Deliver, Fire, FireKind, FireOutcome, FireStatus, LastFire, Schedule,
    SchedulePatch, ScheduleSpec, ScheduleStatus, Target, When, fire_key,
};
pub use store::{
    Claim, SCHEDULE_CLAIMED_TREE, SCHEDULE_FIRES_TREE, SCHEDULES_BY_OWNER_TREE, SCHEDULES_DUE_TREE,
    SCHEDULES_TREE, ScheduleStore,
};

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use crate::cluster::WallClock;
use crate::config::scheduler::SchedulerConfig;

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("no schedule {id}; `/schedules` lists yours with their ids")]
    NotFound { id: String },
    /// A `when`, timezone or field that cannot be used; the message says what to write.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "you have {limit} schedules already (`scheduler.max_per_user`); remove one with `/unschedule ID` first"
    )]
    TooMany { limit: u32 },
    #[error("scheduled tasks are turned off (`scheduler.enabled: false`)")]
    Disabled,
    #[error("schedules store failed: {0}")]
    Store(String),
}

impl From<antler_store::StoreError> for SchedulerError {
    fn from(error: antler_store::StoreError) -> Self {
        SchedulerError::Store(error.to_string())
    }
}

/// Where a schedule is created: its conversation (thread and owner), the chat if any, and the
/// agent the conversation runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub target: Target,
    pub thread_id: String,
    pub thread_owner: String,
    pub agent_name: Option<String>,
    pub agent_owner: Option<String>,
    pub model_name: Option<String>,
}

/// Runs a fired slot of a schedule created in a chat, in that chat (set by the channel layer
/// at start; `Harness::set_chat_schedule`).
pub trait ChatSchedule: Send + Sync {
    /// Journals the fire's entry in its chat (once per fire: a second call finds it) and wakes
    /// the chat's worker, whose turn runs it and reports its end (`Harness::finish_fire`).
    fn fire(&self, schedule: &Schedule, fire: &Fire) -> Result<(), SchedulerError>;
    /// Posts a short notice in the schedule's chat (a slot skipped for budget, a pause), once
    /// per `key`.
    fn notice(&self, schedule: &Schedule, key: &str, text: &str) -> Result<(), SchedulerError>;
}

/// Creating, listing and changing schedules, for every surface. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    store: ScheduleStore,
    clock: Arc<dyn WallClock>,
    wake: Arc<Notify>,
}

impl Scheduler {
    pub fn new(store: antler_store::StoreRef, clock: Arc<dyn WallClock>) -> Self {
        Self {
            store: ScheduleStore::new(store),
            clock,
            wake: Arc::new(Notify::new()),
        }
    }

    pub fn store(&self) -> &ScheduleStore {
        &self.store
    }

    /// Now, by the scheduler's clock (injected in tests).
    pub fn now(&self) -> DateTime<Utc> {
        let ms = i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX);
        DateTime::from_timestamp_millis(ms).unwrap_or_default()
    }

    pub fn clock(&self) -> &Arc<dyn WallClock> {
        &self.clock
    }

    /// Tells the firing loop that the soonest slot may have changed.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// What the firing loop waits on besides its timer.
    pub fn woken(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Creates a schedule for `caller` at `placement` (limits and `when` checked against
    /// `config`; admins are not held to `max_per_user`) and wakes the firing loop.
    pub fn create(
        &self,
        config: &SchedulerConfig,
        caller: &Caller,
        spec: ScheduleSpec,
        placement: Placement,
    ) -> Result<Schedule, SchedulerError> {
        if !config.enabled {
            return Err(SchedulerError::Disabled);
        }
        let prompt = checked_prompt(&spec.prompt)?;
        let when = spec.when.ok_or_else(|| {
            SchedulerError::Invalid(format!("`when` is missing; give {WHEN_FORMS}"))
        })?;
        let timezone = spec
            .timezone
            .map(|timezone| timezone.trim().to_string())
            .filter(|timezone| !timezone.is_empty())
            .unwrap_or_else(|| config.default_timezone.clone());
        let now = self.now();
        timing::validate(&when, &timezone, now, config.min_interval_seconds)?;
        let name = match spec.name {
            Some(name) if !name.trim().is_empty() => checked_name(&name)?,
            _ => name_from_prompt(&prompt),
        };
        let mut schedule = Schedule {
            id: String::new(),
            owner: caller.user_id.clone(),
            name,
            prompt,
            when,
            timezone,
            catch_up: spec.catch_up.unwrap_or_default(),
            deliver: spec.deliver.unwrap_or_default(),
            target: placement.target,
            thread_id: placement.thread_id,
            thread_owner: placement.thread_owner,
            agent_name: non_empty(spec.agent_name).or(placement.agent_name),
            agent_owner: placement.agent_owner,
            model_name: non_empty(spec.model_name).or(placement.model_name),
            status: ScheduleStatus::Active,
            next_fire: None,
            consecutive_failures: 0,
            last: None,
            missed: 0,
            created_at: now,
            updated_at: now,
        };
        schedule.next_fire = timing::next_after(&schedule, now);
        if schedule.next_fire.is_none() {
            return Err(SchedulerError::Invalid(
                "this `when` has no slot after now; give a future time".into(),
            ));
        }
        let limit = (!caller.is_admin).then_some(config.max_per_user);
        let schedule = self.store.insert(schedule, limit)?;
        self.wake();
        Ok(schedule)
    }

    /// The caller's schedules (an admin's: everyone's), oldest first.
    pub fn list(&self, caller: &Caller) -> Result<Vec<Schedule>, SchedulerError> {
        if caller.is_admin {
            self.store.list_all()
        } else {
            self.store.list_owner(&caller.user_id)
        }
    }

    /// One schedule the caller may see; another user's is `NotFound`, like a missing one.
    pub fn get(&self, caller: &Caller, id: &str) -> Result<Schedule, SchedulerError> {
        let id = id.trim();
        match self.store.get(id)? {
            Some(schedule) if caller.may_see(&schedule) => Ok(schedule),
            _ => Err(SchedulerError::NotFound { id: id.to_string() }),
        }
    }

    /// Applies `patch` (checked like a creation); a new `when`, timezone or `status: active`
    /// recomputes the next fire from now. Wakes the firing loop.
    pub fn change(
        &self,
        config: &SchedulerConfig,
        caller: &Caller,
        id: &str,
        patch: SchedulePatch,
    ) -> Result<Schedule, SchedulerError> {
        let current = self.get(caller, id)?;
        let now = self.now();
        let prompt = patch.prompt.as_deref().map(checked_prompt).transpose()?;
        let name = patch.name.as_deref().map(checked_name).transpose()?;
        if patch.status == Some(ScheduleStatus::Done) {
            return Err(SchedulerError::Invalid(
                "`status` may be `active` (resume) or `paused`; remove a schedule to end it".into(),
            ));
        }
        let retimed = patch.when.is_some() || patch.timezone.is_some();
        if retimed {
            let when = patch.when.as_ref().unwrap_or(&current.when);
            let timezone = patch.timezone.as_deref().unwrap_or(&current.timezone);
            timing::validate(when, timezone, now, config.min_interval_seconds)?;
        }
        let changed = self.store.update(&current.id, |schedule| {
            if let Some(prompt) = &prompt {
                schedule.prompt = prompt.clone();
            }
            if let Some(name) = &name {
                schedule.name = name.clone();
            }
            if let Some(when) = &patch.when {
                schedule.when = when.clone();
            }
            if let Some(timezone) = &patch.timezone {
                schedule.timezone = timezone.trim().to_string();
            }
            if let Some(catch_up) = patch.catch_up {
                schedule.catch_up = catch_up;
            }
            if let Some(deliver) = patch.deliver {
                schedule.deliver = deliver;
            }
            if let Some(agent_name) = &patch.agent_name {
                schedule.agent_name = non_empty(Some(agent_name.clone()));
            }
            if let Some(model_name) = &patch.model_name {
                schedule.model_name = non_empty(Some(model_name.clone()));
            }
            let resumed = patch.status == Some(ScheduleStatus::Active)
                && schedule.status != ScheduleStatus::Active;
            match patch.status {
                Some(ScheduleStatus::Paused) => schedule.status = ScheduleStatus::Paused,
                Some(ScheduleStatus::Active) => {
                    schedule.status = ScheduleStatus::Active;
                    // A resumed schedule starts afresh: its old failures paused it.
                    schedule.consecutive_failures = 0;
                }
                _ => {}
            }
            if retimed || resumed {
                schedule.next_fire = timing::next_after(schedule, now);
                if schedule.next_fire.is_none() && schedule.status == ScheduleStatus::Active {
                    return Err(SchedulerError::Invalid(format!(
                        "schedule {} has no slot after now; give it a new `when`",
                        schedule.id
                    )));
                }
            }
            schedule.updated_at = now;
            Ok(())
        })?;
        let changed = changed.ok_or_else(|| SchedulerError::NotFound { id: id.to_string() })?;
        self.wake();
        Ok(changed)
    }

    /// Removes a schedule the caller may see; returns it as it was.
    pub fn remove(&self, caller: &Caller, id: &str) -> Result<Schedule, SchedulerError> {
        let schedule = self.get(caller, id)?;
        if !self.store.remove(&schedule.id)? {
            return Err(SchedulerError::NotFound { id: schedule.id });
        }
        self.wake();
        Ok(schedule)
    }
}

/// How `when` is written, for the errors that ask for it.
pub const WHEN_FORMS: &str = "exactly one of {\"cron\": \"0 9 * * MON\"} (five fields), \
     {\"at\": \"2026-12-06T08:00:00\"} (once) or {\"every_seconds\": 1800}";

/// A prompt longer than this is refused: it is sent to the model at every run.
const MAX_PROMPT_CHARS: usize = 4_000;
const MAX_NAME_CHARS: usize = 80;
/// Words of the prompt a schedule without a name is called by.
const NAME_WORDS: usize = 6;

fn checked_prompt(prompt: &str) -> Result<String, SchedulerError> {
    let prompt = prompt.trim();
    if prompt.is_empty() {
        return Err(SchedulerError::Invalid(
            "`prompt` is empty; say what to do at each run".into(),
        ));
    }
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(SchedulerError::Invalid(format!(
            "`prompt` is longer than {MAX_PROMPT_CHARS} characters; say it shorter"
        )));
    }
    Ok(prompt.to_string())
}

fn checked_name(name: &str) -> Result<String, SchedulerError> {
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() {
        return Err(SchedulerError::Invalid(
            "`name` is empty; give a short name".into(),
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(SchedulerError::Invalid(format!(
            "`name` is longer than {MAX_NAME_CHARS} characters; give a shorter one"
        )));
    }
    Ok(name)
}

/// The prompt's first words, for a schedule created without a name.
fn name_from_prompt(prompt: &str) -> String {
    let words: Vec<&str> = prompt.split_whitespace().collect();
    let mut name = words
        .iter()
        .take(NAME_WORDS)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if name.chars().count() > MAX_NAME_CHARS {
        name = name.chars().take(MAX_NAME_CHARS - 1).collect();
        name.push('…');
    } else if words.len() > NAME_WORDS {
        name.push('…');
    }
    name
}

fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests;
