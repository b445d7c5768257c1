//! Slots of one schedule run one at a time, in slot order: several due at once (after an
//! outage, `catch_up: all`) would otherwise ask their questions in one conversation together
//! and answer them out of place.

use std::sync::Arc;
use std::time::Duration;

use super::tests::{FakeChat, answering, create, done, in_chat, rig, wait_for};
use crate::cluster::TokioWallClock;
use crate::scheduler::{CatchUp, FireKind, FireOutcome, When};
use antler_store::{MemoryStore, StoreRef};

const HOUR: u64 = 3600;
const STEP: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn slots_of_one_schedule_run_one_at_a_time_in_slot_order() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("unused"),
        |config| config.scheduler.max_concurrent = 3,
    );
    let chat = Arc::new(FakeChat::default());
    rig.harness.set_chat_schedule(chat.clone());
    let hourly = create(
        &rig,
        in_chat("c1"),
        When::EverySeconds(HOUR),
        CatchUp::All,
        None,
    );
    // Three slots pass while the loop is down; all three are claimed at the start.
    tokio::time::advance(Duration::from_secs(3 * HOUR + 60)).await;
    rig.harness.start_schedules();
    let handed = || {
        chat.log
            .lock()
            .unwrap()
            .iter()
            .map(|(_, fire)| fire.clone())
            .collect::<Vec<_>>()
    };
    for n in 1..=3 {
        wait_for("the schedule's next slot", STEP, || handed().len() == n).await;
        // Permits are free, yet the next slot waits for this one's end.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(
            handed().len(),
            n,
            "a second slot started before the first ended"
        );
        let fire = handed()[n - 1].clone();
        assert_eq!(fire.kind, FireKind::CatchUp);
        rig.harness.finish_fire(&fire, FireOutcome::Ran, None);
    }
    let slots: Vec<_> = handed().iter().map(|fire| fire.slot).collect();
    let mut sorted = slots.clone();
    sorted.sort();
    assert_eq!(slots, sorted, "slots handed out of order");
    assert_eq!(done(&rig, &hourly.id), 3);
}
