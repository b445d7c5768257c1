use std::sync::Arc;

use antler_store::MemoryStore;
use chrono::{DateTime, Duration, TimeZone, Utc};

use super::*;
use crate::scheduler::model::{CatchUp, Deliver, FireKind, Target};

fn at(hour: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 7, hour, 0, 0).unwrap()
}

pub(crate) fn schedule(owner: &str, when: When, next_fire: Option<DateTime<Utc>>) -> Schedule {
    Schedule {
        id: String::new(),
        owner: owner.into(),
        name: "summary".into(),
        prompt: "summarise the merged PRs".into(),
        when,
        timezone: "UTC".into(),
        catch_up: CatchUp::Latest,
        deliver: Deliver::Here,
        target: Target::Thread,
        thread_id: "thread-1".into(),
        thread_owner: owner.into(),
        agent_name: None,
        agent_owner: None,
        model_name: None,
        status: ScheduleStatus::Active,
        next_fire,
        consecutive_failures: 0,
        last: None,
        missed: 0,
        created_at: at(0),
        updated_at: at(0),
    }
}

fn fire(schedule: &Schedule, slot: DateTime<Utc>, kind: FireKind) -> Fire {
    Fire {
        schedule_id: schedule.id.clone(),
        slot,
        kind,
        status: FireStatus::Claimed,
        thread_id: schedule.thread_id.clone(),
        thread_owner: schedule.thread_owner.clone(),
        claimed_at: slot,
        claimed_by: "instance-a".into(),
        outcome: None,
        detail: None,
        finished_at: None,
    }
}

fn store() -> ScheduleStore {
    ScheduleStore::new(Arc::new(MemoryStore::new()))
}

fn hourly() -> When {
    When::Cron("0 * * * *".into())
}

#[test]
fn insert_gives_an_id_and_indexes_by_owner_and_due_time() {
    let store = store();
    let ann = store
        .insert(schedule("ann", hourly(), Some(at(9))), Some(20))
        .unwrap();
    let bob = store
        .insert(schedule("bob", hourly(), Some(at(8))), Some(20))
        .unwrap();
    assert_eq!(ann.id.len(), 8);
    assert!(
        ann.id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(store.get(&ann.id).unwrap(), Some(ann.clone()));
    assert_eq!(store.list_owner("ann").unwrap(), vec![ann.clone()]);
    assert_eq!(store.list_all().unwrap().len(), 2);
    assert_eq!(store.list_thread("thread-1").unwrap().len(), 2);
    assert_eq!(store.next_due().unwrap(), Some(at(8)));
    assert_eq!(store.due(at(8)).unwrap(), vec![bob.clone()]);
    assert_eq!(store.due(at(9)).unwrap(), vec![bob, ann]);
    assert!(store.due(at(7)).unwrap().is_empty());
}

#[test]
fn max_per_user_refuses_past_the_limit_and_admins_are_not_counted() {
    let store = store();
    for _ in 0..2 {
        store
            .insert(schedule("ann", hourly(), Some(at(9))), Some(2))
            .unwrap();
    }
    let refused = store.insert(schedule("ann", hourly(), Some(at(9))), Some(2));
    assert!(matches!(refused, Err(SchedulerError::TooMany { limit: 2 })));
    // Another user has their own count; no limit (an admin) is no limit.
    store
        .insert(schedule("bob", hourly(), Some(at(9))), Some(2))
        .unwrap();
    store
        .insert(schedule("ann", hourly(), Some(at(9))), None)
        .unwrap();
    assert_eq!(store.list_owner("ann").unwrap().len(), 3);
}

#[test]
fn update_and_remove_keep_the_indexes_right() {
    let store = store();
    let made = store
        .insert(schedule("ann", hourly(), Some(at(9))), Some(20))
        .unwrap();
    let paused = store
        .update(&made.id, |s| {
            s.status = ScheduleStatus::Paused;
            Ok(())
        })
        .unwrap()
        .unwrap();
    assert_eq!(paused.status, ScheduleStatus::Paused);
    assert_eq!(
        store.next_due().unwrap(),
        None,
        "a paused schedule is not due"
    );
    store
        .update(&made.id, |s| {
            s.status = ScheduleStatus::Active;
            s.next_fire = Some(at(11));
            Ok(())
        })
        .unwrap();
    assert_eq!(store.next_due().unwrap(), Some(at(11)));
    assert!(store.due(at(10)).unwrap().is_empty());
    assert!(store.update("nothere", |_| Ok(())).unwrap().is_none());

    assert!(store.remove(&made.id).unwrap());
    assert!(!store.remove(&made.id).unwrap());
    assert_eq!(store.get(&made.id).unwrap(), None);
    assert!(store.list_owner("ann").unwrap().is_empty());
    assert_eq!(store.next_due().unwrap(), None);
    let raw = store.store().scan_prefix(SCHEDULES_DUE_TREE, b"").unwrap();
    assert!(raw.is_empty());
}

#[test]
fn two_claimers_of_one_slot_one_wins() {
    let store = store();
    let made = store
        .insert(schedule("ann", hourly(), Some(at(9))), Some(20))
        .unwrap();
    let read_a = store.get(&made.id).unwrap().unwrap();
    let read_b = read_a.clone();
    let claim = |read: &Schedule, by: &str| {
        let mut fire = fire(read, at(9), FireKind::Due);
        fire.claimed_by = by.into();
        store.claim(
            read,
            Claim {
                fire: Some(fire),
                skipped: Vec::new(),
                next_fire: Some(at(10)),
            },
        )
    };
    let won = claim(&read_a, "a").unwrap();
    assert_eq!(won.as_ref().and_then(|s| s.next_fire), Some(at(10)));
    assert_eq!(
        claim(&read_b, "b").unwrap(),
        None,
        "the second claimer loses"
    );
    let fire = store.fire(&made.id, at(9)).unwrap().unwrap();
    assert_eq!(fire.claimed_by, "a");
    assert_eq!(store.claimed().unwrap(), vec![fire]);
    assert_eq!(store.next_due().unwrap(), Some(at(10)));
}

#[test]
fn a_claim_records_skipped_slots_and_a_one_shot_ends_done() {
    let store = store();
    let made = store
        .insert(schedule("ann", hourly(), Some(at(6))), Some(20))
        .unwrap();
    let skipped = vec![
        fire(&made, at(6), FireKind::Due),
        fire(&made, at(7), FireKind::Due),
    ];
    let written = store
        .claim(
            &made,
            Claim {
                fire: Some(fire(&made, at(8), FireKind::CatchUp)),
                skipped,
                next_fire: Some(at(9)),
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(written.missed, 2);
    let fires = store.fires(&made.id, 0).unwrap();
    assert_eq!(
        fires
            .iter()
            .map(|f| (f.slot, f.status, f.outcome))
            .collect::<Vec<_>>(),
        [
            (at(8), FireStatus::Claimed, None),
            (at(7), FireStatus::Done, Some(FireOutcome::Missed)),
            (at(6), FireStatus::Done, Some(FireOutcome::Missed)),
        ]
    );
    assert_eq!(store.fires(&made.id, 1).unwrap().len(), 1);

    let once = store
        .insert(
            schedule("ann", When::At("2026-12-07T09:00:00".into()), Some(at(9))),
            Some(20),
        )
        .unwrap();
    let done = store
        .claim(
            &once,
            Claim {
                fire: Some(fire(&once, at(9), FireKind::Due)),
                skipped: Vec::new(),
                next_fire: None,
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(done.status, ScheduleStatus::Done);
    assert_eq!(
        store.next_due().unwrap(),
        Some(at(9)),
        "only the cron is due"
    );
}

#[test]
fn a_finish_happens_once_and_three_failures_pause() {
    let store = store();
    let made = store
        .insert(schedule("ann", hourly(), Some(at(9))), Some(20))
        .unwrap();
    let mut read = made.clone();
    for hour in 9..12 {
        store
            .claim(
                &read,
                Claim {
                    fire: Some(fire(&read, at(hour), FireKind::Due)),
                    skipped: Vec::new(),
                    next_fire: Some(at(hour + 1)),
                },
            )
            .unwrap()
            .unwrap();
        let end = at(hour) + Duration::minutes(1);
        let (fire, schedule) = store
            .finish(
                &made.id,
                at(hour),
                FireOutcome::Failed,
                Some("model down".into()),
                end,
                3,
            )
            .unwrap()
            .unwrap();
        assert_eq!(fire.status, FireStatus::Done);
        assert_eq!(fire.finished_at, Some(end));
        let again = store
            .finish(&made.id, at(hour), FireOutcome::Ran, None, end, 3)
            .unwrap();
        assert_eq!(again, None, "a second finisher changes nothing");
        read = schedule.unwrap();
        assert_eq!(read.consecutive_failures, hour - 8);
    }
    assert_eq!(read.status, ScheduleStatus::Paused);
    assert_eq!(
        read.last.as_ref().map(|l| (l.slot, l.outcome)),
        Some((at(11), FireOutcome::Failed))
    );
    assert!(store.claimed().unwrap().is_empty());
    assert_eq!(
        store.next_due().unwrap(),
        None,
        "a paused schedule leaves the due index"
    );
    assert_eq!(
        store
            .fire(&made.id, at(10))
            .unwrap()
            .and_then(|f| f.outcome),
        Some(FireOutcome::Failed),
        "the first finisher's outcome stands"
    );
}

#[test]
fn a_manual_claim_is_once_per_time_and_a_run_resets_failures() {
    let store = store();
    let made = store
        .insert(schedule("ann", hourly(), Some(at(9))), Some(20))
        .unwrap();
    store
        .update(&made.id, |s| {
            s.consecutive_failures = 2;
            Ok(())
        })
        .unwrap();
    let manual = fire(&made, at(8), FireKind::Manual);
    assert!(store.claim_manual(manual.clone()).unwrap());
    assert!(!store.claim_manual(manual).unwrap());
    let (_, schedule) = store
        .finish(&made.id, at(8), FireOutcome::Ran, None, at(8), 3)
        .unwrap()
        .unwrap();
    let schedule = schedule.unwrap();
    assert_eq!(schedule.consecutive_failures, 0);
    assert_eq!(
        schedule.next_fire,
        Some(at(9)),
        "a manual run does not move the next slot"
    );
    // Finishing after the schedule was removed still ends the fire.
    let other = fire(&made, at(10), FireKind::Manual);
    store.claim_manual(other).unwrap();
    store.remove(&made.id).unwrap();
    let (fire, schedule) = store
        .finish(&made.id, at(10), FireOutcome::Ran, None, at(10), 3)
        .unwrap()
        .unwrap();
    assert_eq!(fire.status, FireStatus::Done);
    assert_eq!(schedule, None);
}

/// A store that lets a rival write land between a caller's reads and its conditional batch,
/// once: what another daemon on a shared store can do.
struct Racing {
    inner: Arc<MemoryStore>,
    rival: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl antler_store::Store for Racing {
    fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, antler_store::StoreError> {
        self.inner.get(tree, key)
    }
    fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), antler_store::StoreError> {
        self.inner.put(tree, key, value)
    }
    fn delete(&self, tree: &str, key: &[u8]) -> Result<(), antler_store::StoreError> {
        self.inner.delete(tree, key)
    }
    fn scan_prefix(
        &self,
        tree: &str,
        prefix: &[u8],
    ) -> Result<antler_store::KeyValues, antler_store::StoreError> {
        self.inner.scan_prefix(tree, prefix)
    }
    fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), antler_store::StoreError> {
        self.inner.apply_batch(ops)
    }
    fn apply_batch_if(
        &self,
        expect: &Expect,
        ops: Vec<BatchOp>,
    ) -> Result<bool, antler_store::StoreError> {
        let rival = self.rival.lock().unwrap().take();
        if let Some(rival) = rival {
            rival();
        }
        self.inner.apply_batch_if(expect, ops)
    }
    fn flush(&self) -> Result<(), antler_store::StoreError> {
        Ok(())
    }
}

#[test]
fn two_creations_racing_past_the_limit_cannot_both_win() {
    let inner = Arc::new(MemoryStore::new());
    let plain = ScheduleStore::new(inner.clone());
    plain
        .insert(schedule("ann", hourly(), Some(at(9))), Some(2))
        .unwrap();
    let rival_store = plain.clone();
    let racing = ScheduleStore::new(Arc::new(Racing {
        inner,
        rival: std::sync::Mutex::new(Some(Box::new(move || {
            rival_store
                .insert(schedule("ann", hourly(), Some(at(9))), Some(2))
                .unwrap();
        }))),
    }));
    // It counted one of two, then the rival's creation landed first: it counts again.
    let refused = racing.insert(schedule("ann", hourly(), Some(at(9))), Some(2));
    assert!(
        matches!(refused, Err(SchedulerError::TooMany { limit: 2 })),
        "{refused:?}"
    );
    assert_eq!(plain.list_owner("ann").unwrap().len(), 2);
}
