//! Short runs of the operational benchmarks (`ops_bench` example) against the debug binary:
//! the same library code with small sizes, asserting what the full runs must show — no reply
//! lost or sent twice, through concurrent chats, SIGKILLs and all four channels at once, and one
//! run and one Slack answer per signed webhook delivery however often it is sent.

use std::path::Path;
use std::time::Duration;

use antler_test_support::bench::{
    Again, ConcurrencyOptions, CrashOptions, Rng, ScheduleCrashOptions, SoakOptions,
    WebhookOptions, concurrency, crash, schedule_crash, schedule_idle, soak, webhooks,
};

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_antler"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_chats_at_once_get_one_reply_each() {
    let options = ConcurrencyOptions {
        chats: 50,
        ..ConcurrencyOptions::default()
    };
    let report = concurrency(binary(), options)
        .await
        .expect("benchmark runs");
    println!("{report}");
    assert_eq!(report.tally.lost, Vec::<String>::new(), "{report}");
    assert_eq!(report.tally.duplicated, Vec::new(), "{report}");
    assert_eq!(report.tally.answered, 50);
    assert_eq!(report.added.len(), 50, "every reply has a latency");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_mid_conversation_lose_and_repeat_nothing() {
    let options = CrashOptions {
        turns: 30,
        chats: 6,
        kills: 5,
        seed: Rng::clock_seed(),
        ..CrashOptions::default()
    };
    let report = crash(binary(), options).await.expect("benchmark runs");
    println!("{report}");
    assert_eq!(report.kills, 5, "{report}");
    assert!(
        report.in_flight_at_kills > 0,
        "kills land mid-turn: {report}"
    );
    assert_eq!(report.tally.lost, Vec::<String>::new(), "{report}");
    assert_eq!(report.tally.duplicated, Vec::new(), "{report}");
    assert_eq!(report.tally.answered, 30, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_through_all_four_channels_finishes() {
    let options = SoakOptions {
        turns: 240,
        threads: 24,
        sample_every: 80,
        stream_over: Duration::from_millis(20),
        ..SoakOptions::default()
    };
    let report = soak(binary(), options).await.expect("benchmark runs");
    println!("{report}");
    assert!(report.finished, "{report}");
    assert_eq!(report.tally.answered, 240, "{report}");
    assert_eq!(report.tally.lost, Vec::<String>::new(), "{report}");
    assert_eq!(report.tally.duplicated, Vec::new(), "{report}");
    assert_eq!(
        report.by_platform.len(),
        4,
        "every channel carried turns: {report}"
    );
    assert_eq!(
        report.samples.len(),
        4,
        "before, and every 80 turns: {report}"
    );
    assert!(
        report.samples.iter().all(|(_, rss, _)| *rss > 0),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkills_among_scheduled_slots_lose_none_and_run_none_twice() {
    let options = ScheduleCrashOptions {
        schedules: 20,
        slots: 300,
        every_seconds: 1,
        kills: 2,
        down: Duration::from_secs(4),
        max_concurrent: 8,
        seed: Rng::clock_seed(),
        ..ScheduleCrashOptions::default()
    };
    let report = schedule_crash(binary(), options)
        .await
        .expect("benchmark runs");
    println!("{report}");
    assert_eq!(report.kills, 2, "{report}");
    assert!(report.slots >= 300, "{report}");
    assert_eq!(report.lost, Vec::<String>::new(), "{report}");
    assert_eq!(report.duplicates, Vec::<String>::new(), "{report}");
    assert_eq!(report.ran_without_answer, Vec::<String>::new(), "{report}");
    let count = |outcome: &str| report.outcomes.get(outcome).copied().unwrap_or(0);
    assert!(count("ran") > 0, "{report}");
    // Down across slots a second apart: `latest` and `none` record the slots they skip.
    assert!(count("missed") > 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_hours_away_cost_an_idle_daemon_no_cpu() {
    let report = schedule_idle(binary(), 100, Duration::from_secs(5))
        .await
        .expect("benchmark runs");
    println!("{report}");
    // No polling loop: a few ticks of noise at most, whatever the schedules.
    assert!(
        report.cpu_with <= report.cpu_without + Duration::from_millis(100),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_webhook_deliveries_sent_twice_make_one_run_and_one_answer_each() {
    let options = WebhookOptions {
        deliveries: 60,
        in_flight: 4,
        redeliver_percent: 10,
        chats: 6,
        stream_over: Duration::from_millis(50),
        seed: Rng::clock_seed(),
        ..WebhookOptions::default()
    };
    let report = webhooks(binary(), options).await.expect("benchmark runs");
    println!("{report}");
    assert_eq!(report.sent, 60, "{report}");
    assert_eq!(report.redeliveries(), 6, "{report}");
    for kind in [Again::Racing, Again::Running, Again::Answered] {
        assert_eq!(
            report.redelivered.get(&kind),
            Some(&2),
            "{kind:?}: {report}"
        );
    }
    assert_eq!(report.refused, Vec::<String>::new(), "{report}");
    assert_eq!(report.accepted, 66, "every request got its 202: {report}");
    assert_eq!(report.distinct_runs, 60, "{report}");
    assert_eq!(report.mismatched, Vec::<String>::new(), "{report}");
    assert_eq!(report.model_miscounts, Vec::<String>::new(), "{report}");
    assert_eq!(report.model_calls, 60, "{report}");
    assert_eq!(report.tally.lost, Vec::<String>::new(), "{report}");
    assert_eq!(report.tally.duplicated, Vec::new(), "{report}");
    assert_eq!(report.tally.answered, 60, "{report}");
    assert_eq!(report.misplaced, Vec::<String>::new(), "{report}");
    assert!(report.ok(), "{report}");
    assert!(report.rss_end_kib > 0, "{report}");
}
