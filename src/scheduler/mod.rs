//! Scheduled tasks (`scheduler:`): the agent works on its own schedule, once per slot, and
//! answers in the conversation it was asked in.
//!
//! What a schedule is (`model`), when its slots fall (`timing`), where schedules and every
//! slot's record live and the one claim that gates a slot (`store`), the `schedule_task` tool
//! (`tool`), and [`Scheduler`]: what every surface (the tool, `/schedules`, the HTTP API, the
//! CLI) creates, lists and changes schedules through. Firing a due slot is the harness's
//! (`harness::schedules`: it sleeps until [`ScheduleStore::next_due`], woken by
//! [`Scheduler::wake`]); answering in a chat is the channels' ([`ChatSchedule`]).

pub mod model;
pub mod store;
pub mod timing;
pub mod tool;

pub use model::{
    Caller, CatchUp, Deliver, Fire, FireKind, FireOutcome, FireStatus, LastFire, Schedule,
    SchedulePatch, ScheduleSpec, ScheduleStatus, Target, When, fire_key,
};
pub use store::{
    Claim, SCHEDULE_CLAIMED_TREE, SCHEDULE_FIRES_TREE, SCHEDULES_BY_OWNER_TREE,
    SCHEDULES_DUE_TREE, SCHEDULES_TREE, ScheduleStore,
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
        let _ = (config, caller, spec, placement);
        todo!("lane core")
    }

    /// The caller's schedules (an admin's: everyone's), oldest first.
    pub fn list(&self, caller: &Caller) -> Result<Vec<Schedule>, SchedulerError> {
        let _ = caller;
        todo!("lane core")
    }

    /// One schedule the caller may see; another user's is `NotFound`, like a missing one.
    pub fn get(&self, caller: &Caller, id: &str) -> Result<Schedule, SchedulerError> {
        let _ = (caller, id);
        todo!("lane core")
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
        let _ = (config, caller, id, patch);
        todo!("lane core")
    }

    /// Removes a schedule the caller may see; returns it as it was.
    pub fn remove(&self, caller: &Caller, id: &str) -> Result<Schedule, SchedulerError> {
        let _ = (caller, id);
        todo!("lane core")
    }
}
