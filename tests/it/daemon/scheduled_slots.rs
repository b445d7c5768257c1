//! Scheduled slots on the real daemon: its clock started just before a slot
//! (`ANTLER_CLOCK_START`), the slot runs once at its time as its owner, and `/readyz` and
//! `/metrics` show it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use antler::cluster::OffsetWallClock;
use antler::config::scheduler::SchedulerConfig;
use antler::scheduler::{Caller, Placement, ScheduleSpec, Scheduler, Target, When};
use antler_store::{SledStore, StoreRef};
use antler_test_support::{FakeOpenAi, Reply};
use serde_json::Value;

use super::{Setup, TOKEN_A};

fn ms(at: &str) -> u64 {
    u64::try_from(
        chrono::DateTime::parse_from_rfc3339(at)
            .unwrap()
            .timestamp_millis(),
    )
    .unwrap()
}

/// A schedule made in the data dir before the daemon starts (as the CLI does without a
/// daemon): every Monday at 9 in Berlin, made on Sunday at noon.
fn weekly_schedule(setup: &Setup) -> String {
    std::fs::create_dir_all(setup.data_dir()).unwrap();
    let store: StoreRef = Arc::new(SledStore::open(setup.data_dir().join("store")).unwrap());
    let clock = Arc::new(OffsetWallClock::starting_at(ms("2026-12-06T12:00:00Z")));
    let scheduler = Scheduler::new(store.clone(), clock);
    let made = scheduler
        .create(
            &SchedulerConfig::default(),
            &Caller {
                user_id: "alice".into(),
                is_admin: false,
            },
            ScheduleSpec {
                name: Some("weekly PRs".into()),
                prompt: "Summarise last week's merged PRs".into(),
                when: Some(When::Cron("0 9 * * MON".into())),
                timezone: Some("Europe/Berlin".into()),
                ..ScheduleSpec::default()
            },
            Placement {
                target: Target::Thread,
                thread_id: "weekly".into(),
                thread_owner: "alice".into(),
                agent_name: None,
                agent_owner: None,
                model_name: None,
            },
        )
        .unwrap();
    assert_eq!(
        made.next_fire.map(|at| at.to_rfc3339()),
        Some("2026-12-07T08:00:00+00:00".to_string())
    );
    store.flush().unwrap();
    made.id
}

fn series(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_fires_once_at_its_time_on_a_daemon_started_just_before_it() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Last week: 3 PRs merged."));
    let setup = Setup::new(&fake.base_url(), "");
    let id = weekly_schedule(&setup);
    let log = setup.dir.path().join("daemon.log");
    // Monday 08:59:56 in Berlin.
    let daemon = super::Daemon::spawn(
        &setup.config_path,
        &[("ANTLER_CLOCK_START", "2026-12-07T07:59:56Z")],
        Some(&log),
    );
    let ready = daemon.get_json("/readyz", TOKEN_A).await;
    assert_eq!(ready["scheduler"]["enabled"], true, "{ready}");
    assert_eq!(ready["scheduler"]["schedules"], 1, "{ready}");

    let deadline = Instant::now() + Duration::from_secs(60);
    let ran = loop {
        let metrics = daemon
            .http
            .get(daemon.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if series(&metrics, "antler_schedule_fires_total{outcome=\"ran\"} ") == Some(1) {
            break metrics;
        }
        assert!(Instant::now() < deadline, "the slot did not run: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for outcome in ["failed", "skipped_budget", "caught_up", "missed"] {
        let name = format!("antler_schedule_fires_total{{outcome=\"{outcome}\"}} ");
        assert_eq!(series(&ran, &name), Some(0), "{outcome}: {ran}");
    }
    let state: Value = daemon.get_json("/api/threads/weekly/state", TOKEN_A).await;
    let messages = state["values"]["messages"].as_array().unwrap();
    let said: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m["type"] != "system")
        .map(|m| {
            (
                m["type"].as_str().unwrap_or_default(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("human", "Summarise last week's merged PRs"),
            ("ai", "Last week: 3 PRs merged.")
        ],
        "{state}"
    );
    assert_eq!(
        messages[1]["meta"]["extra"]["schedule_fire"],
        format!("{id}@2026-12-07T08:00:00.000Z")
    );
    assert_eq!(fake.requests().len(), 1);
    let after = daemon.get_json("/readyz", TOKEN_A).await;
    assert_eq!(
        after["scheduler"]["next_fire"], "2026-12-14T08:00:00Z",
        "{after}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("ANTLER_CLOCK_START is set"),
        "the start says the clock is moved: {text}"
    );
}
