//! Budgets in money, enforced before every model call, through the harness against the fake
//! OpenAI server: a run that keeps calling tools (and delegates to a sub-agent) stops where its
//! user's `daily_cost` is reached, says so, warns once at 80 %, and titles and memory updates
//! are metered with their kind.

use std::time::{Duration, Instant};

use antler::agent_api::metering::BUDGET_WARNING_EVENT;
use antler::agent_api::{RunEvent, RunOptions, StopReason};
use antler::config::budgets::{BudgetLimits, ModelPrice};
use antler::config::{AppConfig, ConfigHandle, ModelConfig, SandboxProviderKind};
use antler::harness::{Harness, RunRequest, Speaker};
use antler::usage::{UsageKind, UsageRow, UsageStore, report_json, today};
use antler_store::messages::Message;
use antler_test_support::{FakeOpenAi, Reply};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// The fake model at $1,000 per million tokens either way: a token costs $0.001.
fn config(data_dir: &std::path::Path, fake: &FakeOpenAi) -> AppConfig {
    let mut config = AppConfig {
        data_dir: Some(data_dir.to_path_buf()),
        models: vec![ModelConfig {
            name: "fake".into(),
            model: "fake-model".into(),
            base_url: fake.base_url(),
            timeout: 30.0,
            ..Default::default()
        }],
        ..AppConfig::default()
    };
    config.sandbox.provider = SandboxProviderKind::Local;
    config.sandbox.allow_host_bash = true;
    config.memory.enabled = true;
    config.memory.debounce_seconds = 1;
    config.pricing.models.insert(
        "fake".into(),
        ModelPrice {
            input: 1000.0,
            output: 1000.0,
            cached_input: None,
        },
    );
    config.budgets.default = Some(BudgetLimits {
        daily_cost: Some(0.5),
        ..Default::default()
    });
    config
}

fn request(thread: &str, text: &str) -> RunRequest {
    RunRequest {
        user_id: "alice".into(),
        speaker: Speaker::Owner,
        thread_id: thread.into(),
        input: vec![Message::human(text)],
        options: RunOptions {
            subagent_enabled: true,
            ..RunOptions::default()
        },
        want_values: false,
    }
}

fn bash(step: &str) -> Reply {
    Reply::tool_call(
        "bash",
        json!({"description": "a step", "command": format!("echo {step}")}),
    )
    .usage(100, 20)
}

fn rows(store: &UsageStore) -> Vec<UsageRow> {
    store.rows(Some("alice"), Some(today())).unwrap()
}

fn of_kind(rows: &[UsageRow], kind: UsageKind) -> Option<&UsageRow> {
    rows.iter().find(|row| row.kind == kind)
}

fn cost(rows: &[UsageRow]) -> f64 {
    rows.iter().filter_map(|row| row.totals.cost).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_calling_tools_stops_at_the_daily_cost_with_its_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let config = config(dir.path(), &fake);
    let harness = Harness::open(ConfigHandle::fixed(config.clone())).unwrap();
    let usage = UsageStore::new(harness.threads().store().clone());

    // A first conversation: its answer, its title and its memory update are paid for
    // (15 tokens each, $0.045 in all).
    fake.push(Reply::text("Hello Alice."));
    let first = harness.start_run(request("t-first", "hi")).await.unwrap();
    assert_eq!(first.outcome.await.unwrap().stop, StopReason::Completed);
    let deadline = Instant::now() + WAIT;
    while of_kind(&rows(&usage), UsageKind::Memory).is_none()
        || of_kind(&rows(&usage), UsageKind::Title).is_none()
    {
        assert!(
            Instant::now() < deadline,
            "no title or memory usage: {:?}",
            rows(&usage)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let spent = rows(&usage);
    for kind in [UsageKind::Lead, UsageKind::Title, UsageKind::Memory] {
        let row = of_kind(&spent, kind).unwrap();
        assert_eq!(
            (row.totals.calls, row.totals.total_tokens),
            (1, 15),
            "{kind}"
        );
    }
    assert!((cost(&spent) - 0.045).abs() < 1e-9, "{spent:?}");

    // $0.12 a call: the lead's two steps and its delegation, then the sub-agent's step that
    // passes $0.50 ($0.525); the sub-agent's next call and the lead's are refused.
    fake.push(bash("one"))
        .push(bash("two"))
        .push(
            Reply::tool_call(
                "task",
                json!({"description": "Dig deeper", "prompt": "Keep digging.", "subagent_type": "general-purpose"}),
            )
            .usage(100, 20),
        )
        .push(bash("sub"));
    let mut run = harness.start_run(request("t-costly", "dig")).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = run.events.recv().await {
        events.push(event);
    }
    let outcome = run.outcome.await.unwrap();
    assert_eq!(
        outcome.stop,
        StopReason::BudgetExceeded,
        "{:?}",
        outcome.error
    );
    let notice = "stopped: daily budget of $0.50 reached; resets at 00:00 UTC";
    let answer = outcome.state.last_ai().expect("the run's answer");
    assert_eq!(answer.content, notice);
    assert_eq!(fake.remaining(), 0);
    assert_eq!(fake.requests().len(), 5, "no call after the limit");

    let task_end = events
        .iter()
        .find_map(|event| match event {
            RunEvent::TaskEnded(end) => Some(end.clone()),
            _ => None,
        })
        .expect("the sub-agent ended");
    assert_eq!(task_end.result.as_deref(), Some(notice), "{task_end:?}");
    let warnings: Vec<String> = events
        .iter()
        .filter_map(|event| match event {
            RunEvent::Custom { name, data } if name == BUDGET_WARNING_EVENT => {
                data["message"].as_str().map(str::to_string)
            }
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "once per period: {warnings:?}");
    assert!(
        warnings[0].starts_with("Budget notice: 81% of the daily budget of $0.50"),
        "{warnings:?}"
    );
    let stopped = events.iter().any(|event| {
        matches!(event, RunEvent::Finished { stop_reason } if *stop_reason == StopReason::BudgetExceeded)
    });
    assert!(stopped);

    let spent = rows(&usage);
    let subagent = of_kind(&spent, UsageKind::Subagent).expect("the sub-agent's call");
    assert_eq!(subagent.totals.calls, 1);
    assert_eq!(of_kind(&spent, UsageKind::Lead).unwrap().totals.calls, 4);
    let total = cost(&spent);
    assert!((total - 0.525).abs() < 1e-9, "{spent:?}");
    assert!(total <= 0.5 + 0.12 + 1e-9, "over by more than one call");

    // The same through `GET /api/usage`'s answer, and a new run is refused up front.
    let answer = report_json(&spent, &config, 1);
    assert_eq!(answer["currency"], "USD");
    for kind in ["lead", "subagent", "title", "memory"] {
        assert!(
            answer["kinds"][kind]["calls"].as_u64() >= Some(1),
            "{kind}: {answer}"
        );
    }
    let refused = harness.start_run(request("t-new", "more")).await;
    let Err(antler::harness::RunError::BudgetSpent { notice }) = refused else {
        panic!("alice's budget is spent");
    };
    assert!(notice.contains("daily budget ($0.53 of $0.50)"), "{notice}");
    harness.shutdown(Duration::from_secs(5)).await.unwrap();
}
