//! Slots across lives and instances: a restart in the middle of a slot's run finishes that
//! slot once, and two instances on one store claim each slot once.

use std::sync::Arc;
use std::time::Duration;

use super::tests::{
    FakeChat, alice, answering, answers, create, done, fires, in_chat, in_thread, messages, rig,
    wait_for,
};
use crate::cluster::TokioWallClock;
use crate::model::{ScriptedModel, ScriptedTurn};
use crate::scheduler::{Caller, CatchUp, FireKind, FireOutcome, FireStatus, SchedulerError, When};
use antler_store::{MemoryStore, StoreRef};

const HOUR: u64 = 3600;

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// The first life runs on its own runtime, dropped mid-run: every task of that life stops
/// where it is, as in a crash (nothing it would write at its end is written); the store stays.
#[test]
fn a_restart_during_a_slots_run_finishes_that_slot_once_with_one_question() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let first_life = paused_runtime();
    let (id, slot) = first_life.block_on(async {
        let stuck = ScriptedModel::new(
            "scripted",
            [ScriptedTurn::Slow {
                chunks: vec!["never".into()],
                delay: Duration::from_secs(30 * 24 * HOUR),
            }],
        );
        let rig = rig(
            &store,
            "solo",
            "sled",
            Arc::new(TokioWallClock::new()),
            stuck,
            |_| {},
        );
        rig.harness.start_schedules();
        let made = create(
            &rig,
            in_thread("t-crash"),
            When::EverySeconds(HOUR),
            CatchUp::Latest,
            None,
        );
        wait_for("the slot's model call", Duration::from_secs(10), || {
            rig.model.requests().len() == 1
        })
        .await;
        let thread = messages(&rig, "t-crash").await;
        assert_eq!(thread.iter().filter(|m| m.is_genuine_human()).count(), 1);
        (made.id.clone(), made.next_fire.unwrap())
    });
    drop(first_life);
    let claimed = crate::scheduler::ScheduleStore::new(store.clone())
        .claimed()
        .unwrap();
    assert_eq!(claimed.len(), 1, "{claimed:?}");

    let second_life = paused_runtime();
    second_life.block_on(async {
        let rig = rig(
            &store,
            "solo",
            "sled",
            Arc::new(TokioWallClock::new()),
            answering("the answer after all"),
            |_| {},
        );
        rig.harness.start_schedules();
        wait_for("the slot's end", Duration::from_secs(1), || {
            done(&rig, &id) == 1
        })
        .await;
        let all = fires(&rig, &id);
        assert_eq!(all.len(), 1, "not claimed again as a new slot: {all:?}");
        assert_eq!(
            (all[0].slot, all[0].kind, all[0].outcome),
            (slot, FireKind::Due, Some(FireOutcome::Ran))
        );
        let thread = messages(&rig, "t-crash").await;
        assert_eq!(
            thread.iter().filter(|m| m.is_genuine_human()).count(),
            1,
            "{thread:?}"
        );
        assert_eq!(answers(&thread), ["the answer after all"]);
        assert_eq!(
            rig.model.requests().len(),
            1,
            "the model once more, at most"
        );
        rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
    });
}

#[tokio::test(start_paused = true)]
async fn two_instances_on_one_store_claim_each_slot_once() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let a = rig(
        &store,
        "a",
        "memory",
        Arc::new(TokioWallClock::new()),
        answering("from a"),
        |_| {},
    );
    let b = rig(
        &store,
        "b",
        "memory",
        Arc::new(TokioWallClock::new()),
        answering("from b"),
        |_| {},
    );
    a.harness.start_schedules();
    b.harness.start_schedules();
    let every = 300;
    let made: Vec<_> = (0..4)
        .map(|n| {
            create(
                &a,
                in_thread(&format!("t-{n}")),
                When::EverySeconds(every),
                CatchUp::All,
                None,
            )
        })
        .collect();
    let slots = 6;
    wait_for("six slots of each", Duration::from_secs(5), || {
        made.iter().all(|s| done(&a, &s.id) >= slots)
    })
    .await;
    let mut ran = 0;
    for s in &made {
        let first = s.next_fire.unwrap();
        let recorded = fires(&a, &s.id);
        for (n, fire) in recorded.iter().take(slots).enumerate() {
            let n = i32::try_from(n).unwrap();
            assert_eq!(
                fire.slot,
                first + chrono::TimeDelta::seconds(i64::try_from(every).unwrap()) * n,
                "{recorded:?}"
            );
            assert_eq!(fire.outcome, Some(FireOutcome::Ran), "{fire:?}");
        }
        let keys: std::collections::HashSet<_> = recorded.iter().map(|f| f.key()).collect();
        assert_eq!(
            keys.len(),
            recorded.len(),
            "a slot recorded twice: {recorded:?}"
        );
        ran += recorded
            .iter()
            .filter(|f| f.outcome == Some(FireOutcome::Ran))
            .count();
        let said = answers(&messages(&a, &s.thread_id).await);
        let asked = messages(&a, &s.thread_id)
            .await
            .iter()
            .filter(|m| m.is_genuine_human())
            .count();
        assert_eq!(
            said.len(),
            asked,
            "one answer per question in {}",
            s.thread_id
        );
    }
    let asked_models = a.model.requests().len() + b.model.requests().len();
    assert!(
        asked_models >= ran && asked_models <= ran + made.len(),
        "{asked_models} model calls for {ran} slots run"
    );
    a.harness.shutdown(Duration::from_secs(1)).await.unwrap();
    b.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// A chat's slot claimed before a restart is handed to the chat again (its journal entry
/// dedupes), not claimed as a new slot; the chat's report of its end finishes it once.
#[tokio::test(start_paused = true)]
async fn a_chat_slot_claimed_before_a_restart_is_handed_to_its_chat_again() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let before = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("unused"),
        |_| {},
    );
    let chat = Arc::new(FakeChat::default());
    before.harness.set_chat_schedule(chat.clone());
    before.harness.start_schedules();
    let made = create(
        &before,
        in_chat("c-restart"),
        When::EverySeconds(HOUR),
        CatchUp::Latest,
        None,
    );
    wait_for("the chat's slot", Duration::from_secs(1), || {
        chat.log.lock().unwrap().len() == 1
    })
    .await;
    let handed = chat.log.lock().unwrap()[0].1.clone();
    before.harness.stop_schedules().await;

    let after = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("unused"),
        |_| {},
    );
    let chat_after = Arc::new(FakeChat::default());
    after.harness.set_chat_schedule(chat_after.clone());
    after.harness.start_schedules();
    wait_for("the slot handed over again", Duration::from_secs(1), || {
        chat_after.log.lock().unwrap().len() == 1
    })
    .await;
    let again = chat_after.log.lock().unwrap()[0].1.clone();
    assert_eq!(again.key(), handed.key());
    assert_eq!(again.status, FireStatus::Claimed);
    after.harness.finish_fire(&again, FireOutcome::Ran, None);
    after
        .harness
        .finish_fire(&again, FireOutcome::Failed, Some("late".into()));
    let recorded = fires(&after, &made.id);
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        recorded[0].outcome,
        Some(FireOutcome::Ran),
        "the first end counts"
    );
    after
        .harness
        .shutdown(Duration::from_secs(1))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn run_now_fires_a_manual_slot_for_its_owner_or_an_admin_only() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("done by hand"),
        |_| {},
    );
    rig.harness.start_schedules();
    let made = create(
        &rig,
        in_thread("t-manual"),
        When::EverySeconds(HOUR),
        CatchUp::Latest,
        None,
    );
    let bob = Caller {
        user_id: "bob".into(),
        is_admin: false,
    };
    let refused = rig.harness.run_schedule_now(&bob, &made.id).await;
    assert!(
        matches!(refused, Err(SchedulerError::NotFound { .. })),
        "{refused:?}"
    );
    let fire = rig
        .harness
        .run_schedule_now(&alice(), &made.id)
        .await
        .unwrap();
    assert_eq!(fire.kind, FireKind::Manual);
    wait_for("the manual run", Duration::from_secs(1), || {
        done(&rig, &made.id) == 1
    })
    .await;
    assert_eq!(answers(&messages(&rig, "t-manual").await), ["done by hand"]);
    let admin = Caller {
        user_id: "root".into(),
        is_admin: true,
    };
    tokio::time::advance(Duration::from_secs(1)).await;
    rig.harness
        .run_schedule_now(&admin, &made.id)
        .await
        .unwrap();
    wait_for("the admin's run", Duration::from_secs(1), || {
        done(&rig, &made.id) == 2
    })
    .await;
    // A manual run does not move the schedule's own next slot.
    let after = rig
        .harness
        .scheduler()
        .store()
        .get(&made.id)
        .unwrap()
        .unwrap();
    assert_eq!(after.next_fire, made.next_fire);
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Four days down for a schedule every five minutes: 1,152 slots passed, recorded in claims of
/// at most 1,000 missed slots each, and only the latest runs.
#[tokio::test(start_paused = true)]
async fn a_long_outage_is_recorded_slot_by_slot_and_the_latest_runs_once() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("back"),
        |_| {},
    );
    let made = create(
        &rig,
        in_thread("t-outage"),
        When::EverySeconds(300),
        CatchUp::Latest,
        None,
    );
    tokio::time::advance(Duration::from_secs(4 * 24 * HOUR + 60)).await;
    rig.harness.start_schedules();
    let slots = 4 * 24 * 12;
    wait_for("every slot's record", Duration::from_secs(1), || {
        done(&rig, &made.id) == slots
    })
    .await;
    let recorded = fires(&rig, &made.id);
    let missed = recorded
        .iter()
        .filter(|f| f.outcome == Some(FireOutcome::Missed))
        .count();
    assert_eq!(missed, slots - 1);
    let last = &recorded[slots - 1];
    assert_eq!(
        (last.kind, last.outcome),
        (FireKind::CatchUp, Some(FireOutcome::Ran))
    );
    assert_eq!(rig.model.requests().len(), 1);
    let after = rig
        .harness
        .scheduler()
        .store()
        .get(&made.id)
        .unwrap()
        .unwrap();
    assert_eq!(after.missed, u64::try_from(slots - 1).unwrap());
    assert!(after.next_fire.unwrap() > rig.harness.scheduler().now());
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// `scheduler.jitter_seconds`: each slot starts at a random moment within that many seconds
/// after its time, never before it.
#[tokio::test(start_paused = true)]
async fn jitter_starts_each_slot_within_its_bound_after_its_time() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("unused"),
        |config| {
            config.scheduler.jitter_seconds = 600;
            // All three at once: only the jitter delays them.
            config.scheduler.max_concurrent = 3;
        },
    );
    let chat = Arc::new(FakeChat::default());
    rig.harness.set_chat_schedule(chat.clone());
    rig.harness.start_schedules();
    let made: Vec<_> = (0..3)
        .map(|n| {
            create(
                &rig,
                in_chat(&format!("j{n}")),
                When::EverySeconds(HOUR),
                CatchUp::Latest,
                None,
            )
        })
        .collect();
    let slot = made[0].next_fire.unwrap();
    let mut handed_at = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3 * HOUR);
    while handed_at.len() < made.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all handed over"
        );
        let seen = chat.log.lock().unwrap().len();
        let now = rig.harness.scheduler().now();
        handed_at.extend(std::iter::repeat_n(now, seen - handed_at.len()));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for at in &handed_at {
        assert!(*at >= slot, "{at} before the slot {slot}");
        assert!(
            *at <= slot + chrono::TimeDelta::seconds(601),
            "{at} later than the jitter allows after {slot}"
        );
    }
    let fires: Vec<_> = chat
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|(_, f)| f.clone())
        .collect();
    for fire in &fires {
        assert_eq!(fire.slot, slot);
        rig.harness.finish_fire(fire, FireOutcome::Ran, None);
    }
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// `deliver: new_thread`: each slot runs in a fresh thread of the owner, named by the schedule
/// and the slot (so a restart finds it), not in the thread it was created in.
#[tokio::test(start_paused = true)]
async fn new_thread_runs_each_slot_in_a_thread_of_its_own() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("fresh"),
        |_| {},
    );
    rig.harness.start_schedules();
    let config = rig.harness.config().current();
    let made = rig
        .harness
        .scheduler()
        .create(
            &config.scheduler,
            &alice(),
            crate::scheduler::ScheduleSpec {
                prompt: "A new page each hour".into(),
                when: Some(When::EverySeconds(HOUR)),
                deliver: Some(crate::scheduler::Deliver::NewThread),
                ..Default::default()
            },
            in_thread("t-origin"),
        )
        .unwrap();
    wait_for("two slots", Duration::from_secs(10), || {
        done(&rig, &made.id) == 2
    })
    .await;
    let recorded = fires(&rig, &made.id);
    for fire in &recorded {
        assert_eq!(
            fire.thread_id,
            format!("sched-{}-{}", made.id, fire.slot.timestamp_millis())
        );
        assert_eq!(answers(&messages(&rig, &fire.thread_id).await), ["fresh"]);
        let record = rig.harness.get_thread("alice", &fire.thread_id).unwrap();
        assert!(record.is_some(), "the thread is alice's");
    }
    assert_ne!(recorded[0].thread_id, recorded[1].thread_id);
    assert!(messages(&rig, "t-origin").await.is_empty());
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}
