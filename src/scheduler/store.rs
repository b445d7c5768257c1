//! The schedules and their fired slots in the store. The slot claim is the one gate between
//! instances and across restarts: one batch, conditional on the schedule's record as read,
//! moves its `next_fire` on and writes the claimed slot's `Fire` (and the records of slots it
//! skips), so a slot is claimed once and never passes without a record.

use antler_store::{BatchOp, Expect, StoreRef};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::scheduler::SchedulerError;
use crate::scheduler::model::{
    Fire, FireOutcome, FireStatus, LastFire, Schedule, ScheduleStatus, When,
};

/// `{id}` → the schedule as JSON.
pub const SCHEDULES_TREE: &str = "schedules";
/// `{owner}\0{id}` → empty: a user's schedules; `{owner}` → their generation (see `insert`).
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
        Ok(self.read(id)?.map(|(schedule, _)| schedule))
    }

    /// Inserts `schedule` under a fresh id (the given one is replaced), refusing an owner who
    /// has `max_per_user` already (`None`: no limit, for admins).
    pub fn insert(
        &self,
        mut schedule: Schedule,
        max_per_user: Option<u32>,
    ) -> Result<Schedule, SchedulerError> {
        let generation_key = schedule.owner.as_bytes().to_vec();
        for _ in 0..INSERT_ATTEMPTS {
            // The owner's generation changes with each of their inserts and removals, so a count
            // taken under it holds until the batch lands: two creations racing past the limit
            // (on two daemons) cannot both win.
            let generation = self.store.get(SCHEDULES_BY_OWNER_TREE, &generation_key)?;
            if let Some(limit) = max_per_user {
                let owned = self
                    .store
                    .scan_prefix(SCHEDULES_BY_OWNER_TREE, &id_prefix(&schedule.owner))?
                    .len();
                if owned >= limit as usize {
                    return Err(SchedulerError::TooMany { limit });
                }
            }
            schedule.id = new_id();
            if self
                .store
                .get(SCHEDULES_TREE, schedule.id.as_bytes())?
                .is_some()
            {
                continue;
            }
            let expect = Expect {
                tree: SCHEDULES_BY_OWNER_TREE,
                key: generation_key.clone(),
                value: generation,
            };
            let mut ops = vec![
                put_json(SCHEDULES_TREE, schedule.id.as_bytes().to_vec(), &schedule)?,
                BatchOp::Put {
                    tree: SCHEDULES_BY_OWNER_TREE,
                    key: owner_key(&schedule.owner, &schedule.id),
                    value: Vec::new(),
                },
                new_generation(&schedule.owner),
            ];
            ops.extend(due_put(&schedule));
            if self.store.apply_batch_if(&expect, ops)? {
                return Ok(schedule);
            }
        }
        Err(SchedulerError::Store(
            "could not store the schedule: other creations kept racing it; try again".into(),
        ))
    }

    /// The owner's schedules, oldest first.
    pub fn list_owner(&self, owner: &str) -> Result<Vec<Schedule>, SchedulerError> {
        let mut schedules = Vec::new();
        for (key, _) in self
            .store
            .scan_prefix(SCHEDULES_BY_OWNER_TREE, &id_prefix(owner))?
        {
            let id = String::from_utf8_lossy(&key[owner.len() + 1..]).into_owned();
            // An index entry whose record is gone (removed meanwhile) is skipped.
            if let Some(schedule) = self.get(&id)? {
                schedules.push(schedule);
            }
        }
        sort_oldest_first(&mut schedules);
        Ok(schedules)
    }

    /// Every schedule, oldest first (admins, the CLI, `/readyz`).
    pub fn list_all(&self) -> Result<Vec<Schedule>, SchedulerError> {
        let mut schedules = Vec::new();
        for (key, value) in self.store.scan_prefix(SCHEDULES_TREE, b"")? {
            schedules.push(decode::<Schedule>(&key, &value)?);
        }
        sort_oldest_first(&mut schedules);
        Ok(schedules)
    }

    /// The schedules whose conversation is `thread_id` (the web chat's list).
    pub fn list_thread(&self, thread_id: &str) -> Result<Vec<Schedule>, SchedulerError> {
        let mut schedules = self.list_all()?;
        schedules.retain(|schedule| schedule.thread_id == thread_id);
        Ok(schedules)
    }

    /// Changes a schedule by compare-and-set (retried on a conflict), keeping its indexes
    /// right; `Ok(None)` if there is none. `change` may run more than once.
    pub fn update(
        &self,
        id: &str,
        mut change: impl FnMut(&mut Schedule) -> Result<(), SchedulerError>,
    ) -> Result<Option<Schedule>, SchedulerError> {
        loop {
            let Some((read, raw)) = self.read(id)? else {
                return Ok(None);
            };
            let mut changed = read.clone();
            change(&mut changed)?;
            // The id and owner key the indexes; a change cannot move them.
            changed.id = read.id.clone();
            changed.owner = read.owner.clone();
            let mut ops = vec![put_json(SCHEDULES_TREE, id.as_bytes().to_vec(), &changed)?];
            ops.extend(due_moves(&read, &changed));
            if self.store.apply_batch_if(&expect_record(id, raw), ops)? {
                return Ok(Some(changed));
            }
        }
    }

    /// Removes a schedule and its indexes (its fires stay, for the record); `false` if none.
    pub fn remove(&self, id: &str) -> Result<bool, SchedulerError> {
        loop {
            let Some((read, raw)) = self.read(id)? else {
                return Ok(false);
            };
            let mut ops = vec![
                BatchOp::Delete {
                    tree: SCHEDULES_TREE,
                    key: id.as_bytes().to_vec(),
                },
                BatchOp::Delete {
                    tree: SCHEDULES_BY_OWNER_TREE,
                    key: owner_key(&read.owner, id),
                },
                new_generation(&read.owner),
            ];
            if let Some(key) = due_key(&read) {
                ops.push(BatchOp::Delete {
                    tree: SCHEDULES_DUE_TREE,
                    key,
                });
            }
            if self.store.apply_batch_if(&expect_record(id, raw), ops)? {
                return Ok(true);
            }
        }
    }

    /// The soonest `next_fire` of an active schedule.
    pub fn next_due(&self) -> Result<Option<DateTime<Utc>>, SchedulerError> {
        let first = self.store.scan_page(SCHEDULES_DUE_TREE, None, 1)?;
        Ok(first.first().and_then(|(key, _)| due_key_time(key)))
    }

    /// Active schedules whose `next_fire` is at or before `now`, soonest first.
    pub fn due(&self, now: DateTime<Utc>) -> Result<Vec<Schedule>, SchedulerError> {
        let mut schedules = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        'pages: loop {
            let page = self
                .store
                .scan_page(SCHEDULES_DUE_TREE, after.as_deref(), DUE_PAGE)?;
            let full = page.len() == DUE_PAGE;
            for (key, _) in page {
                let Some(at) = due_key_time(&key) else {
                    continue;
                };
                if at > now {
                    break 'pages;
                }
                let id = String::from_utf8_lossy(&key[8..]).into_owned();
                if let Some(schedule) = self.get(&id)?
                    && schedule.status == ScheduleStatus::Active
                    && schedule.next_fire.is_some_and(|next| next <= now)
                {
                    schedules.push(schedule);
                }
                after = Some(key);
            }
            if !full {
                break;
            }
        }
        Ok(schedules)
    }

    /// Claims as one batch conditional on `read` (the schedule exactly as the caller read it):
    /// writes `claim.fire` (Claimed, indexed in `schedule_claimed`), `claim.skipped` (Done) and
    /// the schedule with `next_fire = claim.next_fire` (`Done` when `None` and it is a
    /// one-shot; `missed` counted up). `Ok(None)`: someone else changed or claimed it first;
    /// read again. The returned schedule is the one written.
    pub fn claim(&self, read: &Schedule, claim: Claim) -> Result<Option<Schedule>, SchedulerError> {
        let Some((stored, raw)) = self.read(&read.id)? else {
            return Ok(None);
        };
        // The condition is the stored bytes, so compare what they say with what the caller
        // read first: a record changed in between is somebody else's claim or change.
        if stored != *read {
            return Ok(None);
        }
        let mut written = stored.clone();
        written.next_fire = claim.next_fire;
        written.missed += claim.skipped.len() as u64;
        if claim.next_fire.is_none() && matches!(written.when, When::At(_)) {
            written.status = ScheduleStatus::Done;
        }
        let mut ops = vec![put_json(
            SCHEDULES_TREE,
            read.id.as_bytes().to_vec(),
            &written,
        )?];
        ops.extend(due_moves(&stored, &written));
        if let Some(fire) = &claim.fire {
            let mut fire = fire.clone();
            fire.status = FireStatus::Claimed;
            ops.push(put_json(
                SCHEDULE_FIRES_TREE,
                fire_record_key(&fire.schedule_id, fire.slot),
                &fire,
            )?);
            ops.push(BatchOp::Put {
                tree: SCHEDULE_CLAIMED_TREE,
                key: fire_record_key(&fire.schedule_id, fire.slot),
                value: Vec::new(),
            });
        }
        for skipped in &claim.skipped {
            let mut skipped = skipped.clone();
            skipped.status = FireStatus::Done;
            skipped.outcome.get_or_insert(FireOutcome::Missed);
            ops.push(put_json(
                SCHEDULE_FIRES_TREE,
                fire_record_key(&skipped.schedule_id, skipped.slot),
                &skipped,
            )?);
        }
        if self
            .store
            .apply_batch_if(&expect_record(&read.id, raw), ops)?
        {
            Ok(Some(written))
        } else {
            Ok(None)
        }
    }

    /// A claim that does not move `next_fire`: a manual run, recorded with `FireKind::Manual`.
    pub fn claim_manual(&self, fire: Fire) -> Result<bool, SchedulerError> {
        let key = fire_record_key(&fire.schedule_id, fire.slot);
        let mut fire = fire;
        fire.status = FireStatus::Claimed;
        let expect = Expect {
            tree: SCHEDULE_FIRES_TREE,
            key: key.clone(),
            value: None,
        };
        let ops = vec![
            put_json(SCHEDULE_FIRES_TREE, key.clone(), &fire)?,
            BatchOp::Put {
                tree: SCHEDULE_CLAIMED_TREE,
                key,
                value: Vec::new(),
            },
        ];
        Ok(self.store.apply_batch_if(&expect, ops)?)
    }

    /// The fires still `Claimed` (a restart finishes them), oldest slot first.
    pub fn claimed(&self) -> Result<Vec<Fire>, SchedulerError> {
        let mut fires = Vec::new();
        for (key, _) in self.store.scan_prefix(SCHEDULE_CLAIMED_TREE, b"")? {
            if let Some(value) = self.store.get(SCHEDULE_FIRES_TREE, &key)? {
                let fire = decode::<Fire>(&key, &value)?;
                if fire.status == FireStatus::Claimed {
                    fires.push(fire);
                }
            }
        }
        fires.sort_by(|a, b| a.slot.cmp(&b.slot).then(a.schedule_id.cmp(&b.schedule_id)));
        Ok(fires)
    }

    pub fn fire(
        &self,
        schedule_id: &str,
        slot: DateTime<Utc>,
    ) -> Result<Option<Fire>, SchedulerError> {
        let key = fire_record_key(schedule_id, slot);
        self.store
            .get(SCHEDULE_FIRES_TREE, &key)?
            .map(|value| decode::<Fire>(&key, &value))
            .transpose()
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
        let key = fire_record_key(schedule_id, slot);
        let fire = loop {
            let Some(raw) = self.store.get(SCHEDULE_FIRES_TREE, &key)? else {
                return Ok(None);
            };
            let mut fire = decode::<Fire>(&key, &raw)?;
            if fire.status == FireStatus::Done {
                return Ok(None);
            }
            fire.status = FireStatus::Done;
            fire.outcome = Some(outcome);
            fire.detail = detail.clone();
            fire.finished_at = Some(now);
            let expect = Expect {
                tree: SCHEDULE_FIRES_TREE,
                key: key.clone(),
                value: Some(raw),
            };
            let ops = vec![
                put_json(SCHEDULE_FIRES_TREE, key.clone(), &fire)?,
                BatchOp::Delete {
                    tree: SCHEDULE_CLAIMED_TREE,
                    key: key.clone(),
                },
            ];
            if self.store.apply_batch_if(&expect, ops)? {
                break fire;
            }
        };
        let schedule = self.update(schedule_id, |schedule| {
            record_end(schedule, &fire, now, pause_after);
            Ok(())
        })?;
        Ok(Some((fire, schedule)))
    }

    /// A schedule's fires, newest first, at most `limit` (0: all).
    pub fn fires(&self, schedule_id: &str, limit: usize) -> Result<Vec<Fire>, SchedulerError> {
        let mut fires = Vec::new();
        for (key, value) in self
            .store
            .scan_prefix(SCHEDULE_FIRES_TREE, &id_prefix(schedule_id))?
        {
            fires.push(decode::<Fire>(&key, &value)?);
        }
        fires.reverse();
        if limit > 0 {
            fires.truncate(limit);
        }
        Ok(fires)
    }

    /// The schedule and its stored bytes (the condition of a compare-and-set on it).
    fn read(&self, id: &str) -> Result<Option<(Schedule, Vec<u8>)>, SchedulerError> {
        let Some(raw) = self.store.get(SCHEDULES_TREE, id.as_bytes())? else {
            return Ok(None);
        };
        let schedule = decode::<Schedule>(id.as_bytes(), &raw)?;
        Ok(Some((schedule, raw)))
    }
}

/// A fire's end as its schedule shows it: the last outcome (of the newest slot that ended),
/// the failures in a row, and the pause that stops a schedule failing forever.
fn record_end(schedule: &mut Schedule, fire: &Fire, now: DateTime<Utc>, pause_after: u32) {
    let Some(outcome) = fire.outcome else {
        return;
    };
    if schedule
        .last
        .as_ref()
        .is_none_or(|last| last.slot <= fire.slot)
    {
        schedule.last = Some(LastFire {
            slot: fire.slot,
            outcome,
            at: now,
            detail: fire.detail.clone(),
        });
    }
    match outcome {
        FireOutcome::Ran => schedule.consecutive_failures = 0,
        FireOutcome::Failed => {
            schedule.consecutive_failures += 1;
            if schedule.consecutive_failures >= pause_after
                && schedule.status == ScheduleStatus::Active
            {
                schedule.status = ScheduleStatus::Paused;
            }
        }
        FireOutcome::SkippedBudget | FireOutcome::Missed => {}
    }
    schedule.updated_at = now;
}

/// Tries before giving up: a taken id (eight hex digits collide rarely) or the owner's
/// schedules changed meanwhile.
const INSERT_ATTEMPTS: usize = 16;

/// The owner's generation (key `{owner}`, beside their `{owner}\0{id}` entries): a fresh
/// random value at each insert and removal, what an insert's count is conditional on.
fn new_generation(owner: &str) -> BatchOp {
    BatchOp::Put {
        tree: SCHEDULES_BY_OWNER_TREE,
        key: owner.as_bytes().to_vec(),
        value: uuid::Uuid::new_v4().as_bytes().to_vec(),
    }
}
/// Entries of `schedules_due` read at a time by `due`.
const DUE_PAGE: usize = 256;

/// Eight lowercase hex digits: short enough to type after `/unschedule`.
fn new_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}

fn millis(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_millis()).unwrap_or(0)
}

fn id_prefix(owner: &str) -> Vec<u8> {
    let mut key = owner.as_bytes().to_vec();
    key.push(0);
    key
}

fn owner_key(owner: &str, id: &str) -> Vec<u8> {
    let mut key = id_prefix(owner);
    key.extend_from_slice(id.as_bytes());
    key
}

fn fire_record_key(schedule_id: &str, slot: DateTime<Utc>) -> Vec<u8> {
    let mut key = id_prefix(schedule_id);
    key.extend_from_slice(&millis(slot).to_be_bytes());
    key
}

/// The schedule's entry in `schedules_due`: only an active schedule with a next slot has one.
fn due_key(schedule: &Schedule) -> Option<Vec<u8>> {
    if schedule.status != ScheduleStatus::Active {
        return None;
    }
    let next = schedule.next_fire?;
    let mut key = millis(next).to_be_bytes().to_vec();
    key.extend_from_slice(schedule.id.as_bytes());
    Some(key)
}

fn due_key_time(key: &[u8]) -> Option<DateTime<Utc>> {
    let ms: [u8; 8] = key.get(..8)?.try_into().ok()?;
    DateTime::from_timestamp_millis(i64::try_from(u64::from_be_bytes(ms)).ok()?)
}

fn due_put(schedule: &Schedule) -> Option<BatchOp> {
    due_key(schedule).map(|key| BatchOp::Put {
        tree: SCHEDULES_DUE_TREE,
        key,
        value: Vec::new(),
    })
}

/// Moves the `schedules_due` entry from `before` to `after` (either may have none).
fn due_moves(before: &Schedule, after: &Schedule) -> Vec<BatchOp> {
    let old = due_key(before);
    let new = due_key(after);
    if old == new {
        return Vec::new();
    }
    let mut ops = Vec::new();
    if let Some(key) = old {
        ops.push(BatchOp::Delete {
            tree: SCHEDULES_DUE_TREE,
            key,
        });
    }
    ops.extend(due_put(after));
    ops
}

fn expect_record(id: &str, raw: Vec<u8>) -> Expect {
    Expect {
        tree: SCHEDULES_TREE,
        key: id.as_bytes().to_vec(),
        value: Some(raw),
    }
}

fn sort_oldest_first(schedules: &mut [Schedule]) {
    schedules.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
}

fn put_json<T: Serialize>(
    tree: &'static str,
    key: Vec<u8>,
    value: &T,
) -> Result<BatchOp, SchedulerError> {
    let value = serde_json::to_vec(value)
        .map_err(|error| SchedulerError::Store(format!("could not encode a record: {error}")))?;
    Ok(BatchOp::Put { tree, key, value })
}

fn decode<T: DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T, SchedulerError> {
    serde_json::from_slice(value).map_err(|error| {
        SchedulerError::from(antler_store::StoreError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            detail: error.to_string(),
        })
    })
}

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
