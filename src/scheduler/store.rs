//! The schedules and their fired slots in the store. The slot claim is the one gate between
//! instances and across restarts: one batch, conditional on the schedule's record as read,
//! moves its `next_fire` on and writes the claimed slot's `Fire` (and the records of slots it
//! skips), so a slot is claimed once and never passes without a record.

use antler_store::StoreRef;
use chrono::{DateTime, Utc};

use crate::scheduler::SchedulerError;
use crate::scheduler::model::{Fire, FireOutcome, Schedule};

/// `{id}` → the schedule as JSON.
pub const SCHEDULES_TREE: &str = "schedules";
/// `{owner}\0{id}` → empty: a user's schedules.
pub const SCHEDULES_BY_OWNER_TREE: &str = "schedules_by_owner";
/// `{next fire ms, big-endian}{id}` → empty: active schedules by their next slot, soonest
/// first (what the scheduler sleeps until; paused and done ones are not in it).
pub const SCHEDULES_DUE_TREE: &str = "schedules_due";
/// `{schedule id}\0{slot ms, big-endian}` → a [`Fire`] as JSON: every slot's record.
pub const SCHEDULE_FIRES_TREE: &str = "schedule_fires";
/// `{schedule id}\0{slot ms, big-endian}` → empty: the fires still `Claimed` (what a restart
/// finishes).
pub const SCHEDULE_CLAIMED_TREE: &str = "schedule_claimed";

/// What one claim writes besides the schedule's new `next_fire`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The slot to run now (`None`: only records, e.g. `catch_up: none`).
    pub fire: Option<Fire>,
    /// Slots recorded as ended without a run (missed), each written as a `Done` fire.
    pub skipped: Vec<Fire>,
    /// The schedule's next slot after this claim (`None`: nothing left; a one-shot is `Done`).
    pub next_fire: Option<DateTime<Utc>>,
}

/// Every schedule and fired slot. Cheap to clone; clones share the store.
#[derive(Clone)]
pub struct ScheduleStore {
    store: StoreRef,
}

impl ScheduleStore {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    pub fn store(&self) -> &StoreRef {
        &self.store
    }

    pub fn get(&self, id: &str) -> Result<Option<Schedule>, SchedulerError> {
        let _ = id;
        todo!("lane core")
    }

    /// Inserts `schedule` under a fresh id (the given one is replaced), refusing an owner who
    /// has `max_per_user` already (`None`: no limit, for admins).
    pub fn insert(
        &self,
        schedule: Schedule,
        max_per_user: Option<u32>,
    ) -> Result<Schedule, SchedulerError> {
        let _ = (schedule, max_per_user);
        todo!("lane core")
    }

    /// The owner's schedules, oldest first.
    pub fn list_owner(&self, owner: &str) -> Result<Vec<Schedule>, SchedulerError> {
        let _ = owner;
        todo!("lane core")
    }

    /// Every schedule, oldest first (admins, the CLI, `/readyz`).
    pub fn list_all(&self) -> Result<Vec<Schedule>, SchedulerError> {
        todo!("lane core")
    }

    /// The schedules whose conversation is `thread_id` (the web chat's list).
    pub fn list_thread(&self, thread_id: &str) -> Result<Vec<Schedule>, SchedulerError> {
        let _ = thread_id;
        todo!("lane core")
    }

    /// Changes a schedule by compare-and-set (retried on a conflict), keeping its indexes
    /// right; `Ok(None)` if there is none. `change` may run more than once.
    pub fn update(
        &self,
        id: &str,
        change: impl FnMut(&mut Schedule) -> Result<(), SchedulerError>,
    ) -> Result<Option<Schedule>, SchedulerError> {
        let _ = (id, change);
        todo!("lane core")
    }

    /// Removes a schedule and its indexes (its fires stay, for the record); `false` if none.
    pub fn remove(&self, id: &str) -> Result<bool, SchedulerError> {
        let _ = id;
        todo!("lane core")
    }

    /// The soonest `next_fire` of an active schedule.
    pub fn next_due(&self) -> Result<Option<DateTime<Utc>>, SchedulerError> {
        todo!("lane core")
    }

    /// Active schedules whose `next_fire` is at or before `now`, soonest first.
    pub fn due(&self, now: DateTime<Utc>) -> Result<Vec<Schedule>, SchedulerError> {
        let _ = now;
        todo!("lane core")
    }

    /// Claims as one batch conditional on `read` (the schedule exactly as the caller read it):
    /// writes `claim.fire` (Claimed, indexed in `schedule_claimed`), `claim.skipped` (Done) and
    /// the schedule with `next_fire = claim.next_fire` (`Done` when `None` and it is a
    /// one-shot; `missed` counted up). `Ok(None)`: someone else changed or claimed it first;
    /// read again. The returned schedule is the one written.
    pub fn claim(&self, read: &Schedule, claim: Claim) -> Result<Option<Schedule>, SchedulerError> {
        let _ = (read, claim);
        todo!("lane core")
    }

    /// A claim that does not move `next_fire`: a manual run, recorded with `FireKind::Manual`.
    pub fn claim_manual(&self, fire: Fire) -> Result<bool, SchedulerError> {
        let _ = fire;
        todo!("lane core")
    }

    /// The fires still `Claimed` (a restart finishes them), oldest slot first.
    pub fn claimed(&self) -> Result<Vec<Fire>, SchedulerError> {
        todo!("lane core")
    }

    pub fn fire(
        &self,
        schedule_id: &str,
        slot: DateTime<Utc>,
    ) -> Result<Option<Fire>, SchedulerError> {
        let _ = (schedule_id, slot);
        todo!("lane core")
    }

    /// Ends a claimed fire once (compare-and-set Claimed → Done) and records it on its
    /// schedule (`last`, `consecutive_failures`: reset by `Ran`, counted up by `Failed`; past
    /// `pause_after` failures in a row the schedule is `Paused`). `Ok(None)`: it was ended
    /// already (a second finisher), nothing changed. Returns the fire and the schedule as
    /// written (`None` if the schedule was removed meanwhile).
    pub fn finish(
        &self,
        schedule_id: &str,
        slot: DateTime<Utc>,
        outcome: FireOutcome,
        detail: Option<String>,
        now: DateTime<Utc>,
        pause_after: u32,
    ) -> Result<Option<(Fire, Option<Schedule>)>, SchedulerError> {
        let _ = (schedule_id, slot, outcome, detail, now, pause_after);
        todo!("lane core")
    }

    /// A schedule's fires, newest first, at most `limit` (0: all).
    pub fn fires(&self, schedule_id: &str, limit: usize) -> Result<Vec<Fire>, SchedulerError> {
        let _ = (schedule_id, limit);
        todo!("lane core")
    }
}
