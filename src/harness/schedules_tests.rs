//! The firing loop on paused time: a due slot runs once at its time, missed slots by policy,
//! DST days, budgets, failures that pause, the concurrency bound in slot order.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::DateTime;

use super::super::{Harness, Speaker};
use crate::cluster::{Cluster, TokioWallClock, WallClock};
use crate::config::{AppConfig, ConfigHandle, ModelConfig};
use crate::model::{ModelErrorKind, ModelRegistry, ScriptedModel, ScriptedTurn};
use crate::scheduler::{
    Caller, CatchUp, ChatSchedule, Fire, FireKind, FireOutcome, FireStatus, Placement, Schedule,
    ScheduleSpec, ScheduleStatus, SchedulerError, Target, When,
};
use antler_store::messages::Message;
use antler_store::{MemoryStore, StoreRef};

pub(super) struct Rig {
    pub(super) harness: Harness,
    pub(super) model: Arc<ScriptedModel>,
    _dir: tempfile::TempDir,
}

/// A harness as instance `id` (`backend` "sled": alone on its store; "memory": shared).
pub(super) fn rig(
    store: &StoreRef,
    id: &str,
    backend: &'static str,
    clock: Arc<dyn WallClock>,
    model: ScriptedModel,
    tweak: impl FnOnce(&mut AppConfig),
) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    tweak(&mut config);
    let model = Arc::new(model);
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    let cluster = Cluster::new(store.clone(), id, Duration::from_secs(15), backend, clock);
    let harness = Harness::with_cluster(
        ConfigHandle::fixed(config),
        store.clone(),
        Some(models),
        cluster,
    )
    .unwrap();
    Rig {
        harness,
        model,
        _dir: dir,
    }
}

/// Answers `text` to the first 50 calls (a script records its requests; a cycling one not).
pub(super) fn answering(text: &str) -> ScriptedModel {
    ScriptedModel::new(
        "scripted",
        std::iter::repeat_n(ScriptedTurn::Text(vec![text.into()]), 50),
    )
}

/// What the schedule said in its thread (not the run's own failure marker).
pub(super) fn notices(messages: &[Message]) -> Vec<String> {
    answers(messages)
        .into_iter()
        .filter(|text| text.starts_with(['⚠', '⏸', '⏭']))
        .collect()
}

pub(super) fn alice() -> Caller {
    Caller {
        user_id: "alice".into(),
        is_admin: false,
    }
}

pub(super) fn in_thread(thread: &str) -> Placement {
    Placement {
        target: Target::Thread,
        thread_id: thread.into(),
        thread_owner: "alice".into(),
        agent_name: None,
        agent_owner: None,
        model_name: None,
    }
}

pub(super) fn create(
    rig: &Rig,
    placement: Placement,
    when: When,
    catch_up: CatchUp,
    timezone: Option<&str>,
) -> Schedule {
    let config = rig.harness.config().current();
    let spec = ScheduleSpec {
        name: Some(format!("job in {}", placement.thread_id)),
        prompt: format!("Report on {}", placement.thread_id),
        when: Some(when),
        timezone: timezone.map(str::to_string),
        catch_up: Some(catch_up),
        ..ScheduleSpec::default()
    };
    rig.harness
        .scheduler()
        .create(&config.scheduler, &alice(), spec, placement)
        .unwrap()
}

pub(super) fn fires(rig: &Rig, id: &str) -> Vec<Fire> {
    let mut fires = rig.harness.scheduler().store().fires(id, 0).unwrap();
    fires.sort_by_key(|fire| fire.slot);
    fires
}

pub(super) fn done(rig: &Rig, id: &str) -> usize {
    fires(rig, id)
        .iter()
        .filter(|fire| fire.status == FireStatus::Done)
        .count()
}

pub(super) fn schedule(rig: &Rig, id: &str) -> Schedule {
    rig.harness.scheduler().store().get(id).unwrap().unwrap()
}

pub(super) async fn messages(rig: &Rig, thread: &str) -> Vec<Message> {
    rig.harness
        .thread_state(thread)
        .await
        .unwrap()
        .map(|state| state.messages.iter().cloned().collect())
        .unwrap_or_default()
}

pub(super) fn answers(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Ai(ai) => Some(ai.content.to_string()),
            _ => None,
        })
        .collect()
}

/// Waits on paused time (each look a virtual `step` later) for `check`, a week at most.
pub(super) async fn wait_for(what: &str, step: Duration, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(7 * 24 * 3600);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(step).await;
    }
}

const HOUR: u64 = 3600;
const STEP: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn a_due_slot_runs_once_at_its_time_as_its_owner() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("Here is the week"),
        |_| {},
    );
    rig.harness.start_schedules();
    let made = create(
        &rig,
        in_thread("t-due"),
        When::EverySeconds(HOUR),
        CatchUp::Latest,
        None,
    );
    let slot = made.next_fire.unwrap();
    assert_eq!(rig.harness.next_schedule_fire(), Some(slot));
    wait_for("the slot's run", STEP, || done(&rig, &made.id) == 1).await;

    let fire = &fires(&rig, &made.id)[0];
    assert_eq!(
        (fire.slot, fire.kind, fire.outcome),
        (slot, FireKind::Due, Some(FireOutcome::Ran))
    );
    assert!(
        fire.claimed_at - slot <= chrono::TimeDelta::seconds(1),
        "claimed {} for {slot}",
        fire.claimed_at
    );
    let thread = messages(&rig, "t-due").await;
    let questions: Vec<_> = thread.iter().filter(|m| m.is_genuine_human()).collect();
    assert_eq!(questions.len(), 1, "{thread:?}");
    let Message::Human(question) = questions[0] else {
        unreachable!()
    };
    assert_eq!(question.content.to_string(), "Report on t-due");
    assert_eq!(question.meta.extra["schedule_fire"], fire.key());
    assert_eq!(answers(&thread), ["Here is the week"]);
    assert_eq!(rig.model.requests().len(), 1);
    let after = schedule(&rig, &made.id);
    assert_eq!(after.next_fire, Some(slot + chrono::TimeDelta::hours(1)));
    assert_eq!(after.last.map(|l| l.outcome), Some(FireOutcome::Ran));
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn daemon_down_across_three_slots_latest_runs_one_none_none_all_three() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("caught up"),
        |_| {},
    );
    let hourly = When::EverySeconds(HOUR);
    let latest = create(
        &rig,
        in_thread("t-latest"),
        hourly.clone(),
        CatchUp::Latest,
        None,
    );
    let none = create(
        &rig,
        in_thread("t-none"),
        hourly.clone(),
        CatchUp::None,
        None,
    );
    let all = create(&rig, in_thread("t-all"), hourly, CatchUp::All, None);
    let first = latest.next_fire.unwrap();
    // Down across three slots: nothing runs the loop meanwhile.
    tokio::time::advance(Duration::from_secs(3 * HOUR + HOUR / 2)).await;
    rig.harness.start_schedules();
    wait_for("every slot's record", STEP, || {
        [&latest, &none, &all]
            .iter()
            .all(|s| done(&rig, &s.id) == 3)
    })
    .await;

    let outcomes = |s: &Schedule| -> Vec<(FireKind, Option<FireOutcome>)> {
        fires(&rig, &s.id)
            .iter()
            .map(|f| (f.kind, f.outcome))
            .collect()
    };
    let missed = (FireKind::Due, Some(FireOutcome::Missed));
    let caught_up = (FireKind::CatchUp, Some(FireOutcome::Ran));
    assert_eq!(outcomes(&latest), [missed, missed, caught_up]);
    assert_eq!(outcomes(&none), [missed, missed, missed]);
    assert_eq!(outcomes(&all), [caught_up, caught_up, caught_up]);
    let slots: Vec<_> = fires(&rig, &all.id).iter().map(|f| f.slot).collect();
    let hour = chrono::TimeDelta::hours(1);
    assert_eq!(slots, [first, first + hour, first + hour * 2]);
    assert_eq!(answers(&messages(&rig, "t-latest").await).len(), 1);
    assert!(answers(&messages(&rig, "t-none").await).is_empty());
    assert_eq!(answers(&messages(&rig, "t-all").await).len(), 3);
    assert_eq!(rig.model.requests().len(), 4);
    for (s, missed) in [(&latest, 2), (&none, 3), (&all, 0)] {
        let after = schedule(&rig, &s.id);
        assert_eq!(after.missed, missed, "{:?}", s.catch_up);
        assert_eq!(after.next_fire, Some(first + hour * 3));
    }
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

fn ms(at: &str) -> u64 {
    u64::try_from(DateTime::parse_from_rfc3339(at).unwrap().timestamp_millis()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_0230_daily_schedule_in_berlin_fires_once_on_both_change_days() {
    for (start, change_day) in [
        ("2026-03-28T12:00:00Z", "2026-03-29"),
        ("2026-10-24T12:00:00Z", "2026-10-25"),
    ] {
        let store: StoreRef = Arc::new(MemoryStore::new());
        let rig = rig(
            &store,
            "solo",
            "sled",
            Arc::new(TokioWallClock::at(ms(start))),
            answering("good night"),
            |_| {},
        );
        rig.harness.start_schedules();
        let made = create(
            &rig,
            in_thread("t-dst"),
            When::Cron("30 2 * * *".into()),
            CatchUp::Latest,
            Some("Europe/Berlin"),
        );
        wait_for("two nights' runs", Duration::from_secs(60), || {
            done(&rig, &made.id) == 2
        })
        .await;
        let tz: chrono_tz::Tz = "Europe/Berlin".parse().unwrap();
        let days: Vec<String> = fires(&rig, &made.id)
            .iter()
            .map(|f| {
                assert_eq!(f.outcome, Some(FireOutcome::Ran), "{f:?}");
                assert_eq!(f.kind, FireKind::Due, "{f:?}");
                f.slot.with_timezone(&tz).format("%Y-%m-%d").to_string()
            })
            .collect();
        let next_day = chrono::NaiveDate::parse_from_str(change_day, "%Y-%m-%d")
            .unwrap()
            .succ_opt()
            .unwrap()
            .to_string();
        assert_eq!(days, [change_day.to_string(), next_day], "from {start}");
        assert_eq!(rig.model.requests().len(), 2, "from {start}");
        rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_slot_whose_owner_has_no_budget_left_is_skipped_with_a_notice_not_queued() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("never"),
        |config| {
            config.budgets.users.insert("alice".into(), 0.into());
        },
    );
    rig.harness.start_schedules();
    let made = create(
        &rig,
        in_thread("t-budget"),
        When::EverySeconds(HOUR),
        CatchUp::Latest,
        None,
    );
    let slot = made.next_fire.unwrap();
    wait_for("the skipped slot", STEP, || done(&rig, &made.id) == 1).await;
    let fire = &fires(&rig, &made.id)[0];
    assert_eq!(fire.outcome, Some(FireOutcome::SkippedBudget));
    assert!(
        fire.detail
            .as_deref()
            .unwrap_or_default()
            .contains("budget"),
        "{fire:?}"
    );
    let said = answers(&messages(&rig, "t-budget").await);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("⏭ Schedule job in t-budget skipped"),
        "{said:?}"
    );
    assert!(rig.model.requests().is_empty());
    // Not queued: nothing stays claimed, the next slot is the next one.
    assert!(
        rig.harness
            .scheduler()
            .store()
            .claimed()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        schedule(&rig, &made.id).next_fire,
        Some(slot + chrono::TimeDelta::hours(1))
    );
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn three_failed_runs_in_a_row_pause_the_schedule_with_a_notice() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let failing = ScriptedModel::new(
        "scripted",
        std::iter::repeat_n(ScriptedTurn::Fail(ModelErrorKind::Status(400)), 3),
    );
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        failing,
        |_| {},
    );
    rig.harness.start_schedules();
    let made = create(
        &rig,
        in_thread("t-fail"),
        When::EverySeconds(HOUR),
        CatchUp::Latest,
        None,
    );
    wait_for("the pause", Duration::from_secs(10), || {
        schedule(&rig, &made.id).status == ScheduleStatus::Paused
    })
    .await;
    let after = schedule(&rig, &made.id);
    assert_eq!(after.consecutive_failures, 3);
    let outcomes: Vec<_> = fires(&rig, &made.id).iter().map(|f| f.outcome).collect();
    assert_eq!(outcomes, [Some(FireOutcome::Failed); 3]);
    let said = notices(&messages(&rig, "t-fail").await);
    assert_eq!(
        said.len(),
        4,
        "three failure notices and the pause: {said:?}"
    );
    assert!(
        said[..3]
            .iter()
            .all(|s| s.starts_with("⚠ Schedule job in t-fail could not run")),
        "{said:?}"
    );
    assert_eq!(rig.model.requests().len(), 3);
    assert!(
        said[3].starts_with("⏸ Schedule job in t-fail paused after 3 failed runs in a row"),
        "{said:?}"
    );
    assert!(
        said[3].contains(&format!("resume schedule {}", made.id)),
        "{said:?}"
    );
    // Paused: no active schedule is left to wake for.
    assert_eq!(rig.harness.next_schedule_fire(), None);
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// The chat layer as the runner sees it: what it was handed and when, in one log with the
/// test's reports of each end.
#[derive(Default)]
pub(super) struct FakeChat {
    pub(super) log: Mutex<Vec<(bool, Fire)>>,
    pub(super) notices: Mutex<Vec<String>>,
}

impl ChatSchedule for FakeChat {
    fn fire(&self, _schedule: &Schedule, fire: &Fire) -> Result<(), SchedulerError> {
        self.log.lock().unwrap().push((true, fire.clone()));
        Ok(())
    }

    fn notice(&self, _schedule: &Schedule, _key: &str, text: &str) -> Result<(), SchedulerError> {
        self.notices.lock().unwrap().push(text.to_string());
        Ok(())
    }
}

pub(super) fn in_chat(chat: &str) -> Placement {
    Placement {
        target: Target::Chat {
            chat_key: format!("telegram:{chat}"),
            sender_id: "42".into(),
            sender_name: Some("Alice".into()),
            shared: false,
        },
        thread_id: format!("t-{chat}"),
        thread_owner: "alice".into(),
        agent_name: None,
        agent_owner: None,
        model_name: None,
    }
}

#[tokio::test(start_paused = true)]
async fn at_most_max_concurrent_slots_run_at_once_and_the_others_wait_in_slot_order() {
    let store: StoreRef = Arc::new(MemoryStore::new());
    let rig = rig(
        &store,
        "solo",
        "sled",
        Arc::new(TokioWallClock::new()),
        answering("unused"),
        |_| {},
    );
    let chat = Arc::new(FakeChat::default());
    rig.harness.set_chat_schedule(chat.clone());
    let mut made = Vec::new();
    for n in 0..5 {
        made.push(create(
            &rig,
            in_chat(&format!("c{n}")),
            When::EverySeconds(HOUR),
            CatchUp::Latest,
            None,
        ));
        tokio::time::advance(Duration::from_secs(60)).await;
    }
    // All five due at once (their slots a minute apart passed while the loop was down).
    tokio::time::advance(Duration::from_secs(HOUR)).await;
    rig.harness.start_schedules();
    for ended in 0..5 {
        let expect = (ended + 2).min(5);
        wait_for("the next chat slot", STEP, || {
            chat.log.lock().unwrap().iter().filter(|(f, _)| *f).count() == expect
        })
        .await;
        let handed = chat.log.lock().unwrap().iter().filter(|(f, _)| *f).count();
        let fire = chat
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|(f, _)| *f)
            .nth(ended)
            .map(|(_, fire)| fire.clone())
            .unwrap();
        assert!(handed <= expect);
        chat.log.lock().unwrap().push((false, fire.clone()));
        rig.harness.finish_fire(&fire, FireOutcome::Ran, None);
    }
    // Replayed: never more than two handed over and not ended; handed over in slot order.
    let log = chat.log.lock().unwrap().clone();
    let mut running = 0_i32;
    let mut order = Vec::new();
    for (handed, fire) in &log {
        if *handed {
            running += 1;
            order.push(fire.schedule_id.clone());
            assert!(running <= 2, "{log:?}");
        } else {
            running -= 1;
        }
    }
    let ids: Vec<_> = made.iter().map(|s| s.id.clone()).collect();
    assert_eq!(order, ids);
    for (s, fire) in made.iter().zip(log.iter().filter(|(h, _)| *h)) {
        assert_eq!(fire.1.kind, FireKind::CatchUp);
        assert_eq!(fire.1.thread_id, s.thread_id);
        assert_eq!(done(&rig, &s.id), 1);
    }
    // A chat fire's run request: the owner speaks in the chat's conversation.
    let request = rig.harness.schedule_run_request(&made[0], &log[0].1);
    assert_eq!(request.speaker, Speaker::Owner);
    assert!(request.options.non_interactive);
    assert_eq!(request.options.schedule_fire, Some(log[0].1.key()));
    assert_eq!(
        request.options.chat.map(|c| c.chat_key),
        Some("telegram:c0".to_string())
    );
    rig.harness.shutdown(Duration::from_secs(1)).await.unwrap();
}
