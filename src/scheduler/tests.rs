use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use antler_store::MemoryStore;
use chrono::{DateTime, TimeZone, Utc};

use super::*;

struct FixedClock(AtomicU64);

impl WallClock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Saturday 2026-12-05 21:00 UTC.
fn saturday() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 5, 21, 0, 0).unwrap()
}

fn scheduler() -> Scheduler {
    let clock = FixedClock(AtomicU64::new(saturday().timestamp_millis() as u64));
    Scheduler::new(Arc::new(MemoryStore::new()), Arc::new(clock))
}

fn caller(user: &str) -> Caller {
    Caller {
        user_id: user.into(),
        is_admin: false,
    }
}

fn admin() -> Caller {
    Caller {
        user_id: "root".into(),
        is_admin: true,
    }
}

fn here(owner: &str) -> Placement {
    Placement {
        target: Target::Thread,
        thread_id: format!("thread-{owner}"),
        thread_owner: owner.into(),
        agent_name: Some("helper".into()),
        agent_owner: Some(owner.into()),
        model_name: None,
    }
}

fn monday_spec() -> ScheduleSpec {
    ScheduleSpec {
        prompt: "Post a summary of last week's merged pull requests here".into(),
        when: Some(When::Cron("0 9 * * MON".into())),
        timezone: Some("Europe/Berlin".into()),
        ..Default::default()
    }
}

#[test]
fn create_fills_defaults_and_computes_the_next_fire_in_the_zone() {
    let scheduler = scheduler();
    let woken = scheduler.woken();
    let config = SchedulerConfig::default();
    let made = scheduler
        .create(&config, &caller("ann"), monday_spec(), here("ann"))
        .unwrap();
    assert_eq!(made.owner, "ann");
    assert_eq!(made.name, "Post a summary of last week's…");
    assert_eq!(
        made.next_fire,
        Some(Utc.with_ymd_and_hms(2026, 12, 7, 8, 0, 0).unwrap())
    );
    assert_eq!(made.agent_name.as_deref(), Some("helper"));
    assert_eq!(
        (made.catch_up, made.deliver),
        (CatchUp::Latest, Deliver::Here)
    );
    assert_eq!(made.created_at, saturday());
    // The firing loop was told.
    assert!(futures::FutureExt::now_or_never(woken.notified()).is_some());

    let utc = scheduler
        .create(
            &config,
            &caller("ann"),
            ScheduleSpec {
                name: Some("  bank  ".into()),
                timezone: None,
                ..monday_spec()
            },
            here("ann"),
        )
        .unwrap();
    assert_eq!(utc.timezone, "UTC", "scheduler.default_timezone");
    assert_eq!(utc.name, "bank");
    assert_eq!(
        utc.next_fire,
        Some(Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap())
    );
}

#[test]
fn create_refuses_bad_input_limits_and_a_disabled_scheduler() {
    let scheduler = scheduler();
    let config = SchedulerConfig {
        max_per_user: 1,
        ..Default::default()
    };
    let ann = caller("ann");
    let missing = scheduler.create(
        &config,
        &ann,
        ScheduleSpec {
            when: None,
            ..monday_spec()
        },
        here("ann"),
    );
    assert!(matches!(missing, Err(SchedulerError::Invalid(m)) if m.contains("`when` is missing")));
    let empty = scheduler.create(
        &config,
        &ann,
        ScheduleSpec {
            prompt: "  ".into(),
            ..monday_spec()
        },
        here("ann"),
    );
    assert!(matches!(empty, Err(SchedulerError::Invalid(m)) if m.contains("`prompt` is empty")));
    let often = scheduler.create(
        &config,
        &ann,
        ScheduleSpec {
            when: Some(When::EverySeconds(60)),
            ..monday_spec()
        },
        here("ann"),
    );
    assert!(matches!(often, Err(SchedulerError::Invalid(m)) if m.contains("min_interval_seconds")));

    scheduler
        .create(&config, &ann, monday_spec(), here("ann"))
        .unwrap();
    let second = scheduler.create(&config, &ann, monday_spec(), here("ann"));
    let error = second.unwrap_err();
    assert!(matches!(error, SchedulerError::TooMany { limit: 1 }));
    assert!(error.to_string().contains("/unschedule ID"), "{error}");
    // Admins are not held to max_per_user.
    scheduler
        .create(&config, &admin(), monday_spec(), here("root"))
        .unwrap();
    scheduler
        .create(&config, &admin(), monday_spec(), here("root"))
        .unwrap();

    let off = SchedulerConfig {
        enabled: false,
        ..Default::default()
    };
    let disabled = scheduler.create(&off, &caller("bob"), monday_spec(), here("bob"));
    assert!(matches!(disabled, Err(SchedulerError::Disabled)));
}

#[test]
fn users_see_and_change_only_their_own_admins_all() {
    let scheduler = scheduler();
    let config = SchedulerConfig::default();
    let ann = caller("ann");
    let bob = caller("bob");
    let mine = scheduler
        .create(&config, &ann, monday_spec(), here("ann"))
        .unwrap();
    let theirs = scheduler
        .create(&config, &bob, monday_spec(), here("bob"))
        .unwrap();

    assert_eq!(scheduler.list(&ann).unwrap(), vec![mine.clone()]);
    assert_eq!(scheduler.list(&admin()).unwrap().len(), 2);
    assert_eq!(scheduler.get(&ann, &mine.id).unwrap(), mine);
    let hidden = scheduler.get(&ann, &theirs.id);
    assert!(matches!(hidden, Err(SchedulerError::NotFound { .. })));
    let patch = SchedulePatch {
        status: Some(ScheduleStatus::Paused),
        ..Default::default()
    };
    assert!(matches!(
        scheduler.change(&config, &ann, &theirs.id, patch.clone()),
        Err(SchedulerError::NotFound { .. })
    ));
    assert!(matches!(
        scheduler.remove(&ann, &theirs.id),
        Err(SchedulerError::NotFound { .. })
    ));
    assert_eq!(scheduler.get(&admin(), &theirs.id).unwrap(), theirs);
    scheduler.remove(&admin(), &theirs.id).unwrap();
    assert!(matches!(
        scheduler.get(&bob, &theirs.id),
        Err(SchedulerError::NotFound { .. })
    ));
}

#[test]
fn change_pauses_resumes_and_retimes() {
    let scheduler = scheduler();
    let config = SchedulerConfig::default();
    let ann = caller("ann");
    let made = scheduler
        .create(&config, &ann, monday_spec(), here("ann"))
        .unwrap();
    let pause = SchedulePatch {
        status: Some(ScheduleStatus::Paused),
        ..Default::default()
    };
    let paused = scheduler.change(&config, &ann, &made.id, pause).unwrap();
    assert_eq!(paused.status, ScheduleStatus::Paused);
    assert_eq!(scheduler.store().next_due().unwrap(), None);

    scheduler
        .store()
        .update(&made.id, |s| {
            s.consecutive_failures = 3;
            Ok(())
        })
        .unwrap();
    let resume = SchedulePatch {
        status: Some(ScheduleStatus::Active),
        ..Default::default()
    };
    let resumed = scheduler.change(&config, &ann, &made.id, resume).unwrap();
    assert_eq!(resumed.status, ScheduleStatus::Active);
    assert_eq!(resumed.consecutive_failures, 0);
    assert_eq!(scheduler.store().next_due().unwrap(), made.next_fire);

    let retime = SchedulePatch {
        when: Some(When::Cron("30 2 * * *".into())),
        name: Some("night".into()),
        ..Default::default()
    };
    let retimed = scheduler.change(&config, &ann, &made.id, retime).unwrap();
    assert_eq!(retimed.name, "night");
    // 02:30 in Berlin after Saturday 22:00 CET: Sunday 01:30 UTC.
    let sunday = Utc.with_ymd_and_hms(2026, 12, 6, 1, 30, 0).unwrap();
    assert_eq!(retimed.next_fire, Some(sunday));
    assert_eq!(scheduler.store().next_due().unwrap(), Some(sunday));

    let bad = SchedulePatch {
        timezone: Some("Nowhere/Land".into()),
        ..Default::default()
    };
    assert!(matches!(
        scheduler.change(&config, &ann, &made.id, bad),
        Err(SchedulerError::Invalid(m)) if m.contains("IANA")
    ));
    assert_eq!(
        scheduler.get(&ann, &made.id).unwrap(),
        retimed,
        "a refused change changes nothing"
    );
    let removed = scheduler.remove(&ann, &made.id).unwrap();
    assert_eq!(removed.id, made.id);
    assert!(scheduler.list(&ann).unwrap().is_empty());
}
