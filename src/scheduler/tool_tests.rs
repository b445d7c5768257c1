use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use antler_store::MemoryStore;
use antler_store::state::ThreadState;
use chrono::{TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::agent_api::{ChatPlace, RunContext};
use crate::cluster::WallClock;
use crate::scheduler::model::Target;

struct FixedClock(AtomicU64);

impl WallClock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Saturday 2026-12-05 21:00 UTC.
fn tool() -> ScheduleTaskTool {
    let saturday = Utc.with_ymd_and_hms(2026, 12, 5, 21, 0, 0).unwrap();
    let clock = FixedClock(AtomicU64::new(saturday.timestamp_millis() as u64));
    ScheduleTaskTool::new(Scheduler::new(
        Arc::new(MemoryStore::new()),
        Arc::new(clock),
    ))
}

fn run_of(user: &str) -> RunContext {
    let mut run = RunContext::new("thread-1", user, Arc::new(AppConfig::default()));
    run.options.model_name = Some("gpt-test".into());
    run
}

async fn call(tool: &ScheduleTaskTool, run: &RunContext, args: Value) -> Result<String, ToolError> {
    let state = ThreadState::default();
    let ctx = ToolContext {
        run,
        state: &state,
        tool_call_id: "call-1",
    };
    tool.call(args, &ctx).await.map(|output| output.content)
}

fn invalid(result: Result<String, ToolError>) -> String {
    match result {
        Err(ToolError::InvalidArguments(message)) => message,
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

#[tokio::test]
async fn create_in_a_chat_answers_the_next_three_times_in_the_zone() {
    let tool = tool();
    let mut run = run_of("ann");
    run.options.chat = Some(ChatPlace {
        chat_key: "telegram:42".into(),
        sender_id: "1001".into(),
        sender_name: Some("Ann".into()),
        shared: false,
    });
    let args = json!({
        "action": "create",
        "prompt": "Remind Ann to water the plants",
        "when": {"cron": "0 9 * * MON"},
        "timezone": "Europe/Berlin",
        "name": "plants",
    });
    let text = call(&tool, &run, args).await.unwrap();
    assert!(
        text.contains(
            "Next runs: Mon 2026-12-07 09:00 CET; Mon 2026-12-14 09:00 CET; Mon 2026-12-21 09:00 CET."
        ),
        "{text}"
    );
    assert!(text.contains("the latest runs once"), "{text}");
    let caller = Caller {
        user_id: "ann".into(),
        is_admin: false,
    };
    let made = tool.scheduler.list(&caller).unwrap();
    assert_eq!(made.len(), 1);
    let made = &made[0];
    assert!(
        text.contains(&format!("`/unschedule {}`", made.id)),
        "{text}"
    );
    assert_eq!(made.name, "plants");
    assert_eq!(made.thread_id, "thread-1");
    assert_eq!(made.thread_owner, "ann");
    assert_eq!(made.model_name.as_deref(), Some("gpt-test"));
    assert_eq!(
        made.target,
        Target::Chat {
            chat_key: "telegram:42".into(),
            sender_id: "1001".into(),
            sender_name: Some("Ann".into()),
            shared: false,
        }
    );

    let listed = call(&tool, &run, json!({"action": "list"})).await.unwrap();
    assert!(
        listed.contains(&made.id) && listed.contains("next Mon 2026-12-07 09:00 CET"),
        "{listed}"
    );
    let paused = call(&tool, &run, json!({"action": "pause", "id": made.id}))
        .await
        .unwrap();
    assert!(
        paused.starts_with("Paused schedule") && paused.contains("paused"),
        "{paused}"
    );
    let resumed = call(&tool, &run, json!({"action": "resume", "id": made.id}))
        .await
        .unwrap();
    assert!(
        resumed.contains("next Mon 2026-12-07 09:00 CET"),
        "{resumed}"
    );
    // Another user's schedule is not theirs to cancel.
    let other = call(
        &tool,
        &run_of("bob"),
        json!({"action": "cancel", "id": made.id}),
    )
    .await;
    assert!(matches!(other, Err(ToolError::Failed(m)) if m.contains("no schedule")));
    let removed = call(&tool, &run, json!({"action": "cancel", "id": made.id}))
        .await
        .unwrap();
    assert!(removed.contains("Removed schedule"), "{removed}");
    assert!(tool.scheduler.list(&caller).unwrap().is_empty());
}

#[tokio::test]
async fn a_broken_when_gets_an_error_the_model_can_fix() {
    let tool = tool();
    let run = run_of("ann");
    let create =
        |when: Value| json!({"action": "create", "prompt": "check the status page", "when": when});
    let text = invalid(call(&tool, &run, create(json!("every 30 minutes"))).await);
    assert!(
        text.contains("`when` must be an object") && text.contains("every_seconds"),
        "{text}"
    );
    let two = invalid(
        call(
            &tool,
            &run,
            create(json!({"cron": "0 9 * * *", "every_seconds": 600})),
        )
        .await,
    );
    assert!(two.contains("more than one form"), "{two}");
    let typo = invalid(call(&tool, &run, create(json!({"crom": "0 9 * * *"}))).await);
    assert!(typo.contains("not understood"), "{typo}");
    let often = invalid(call(&tool, &run, create(json!({"every_seconds": 60}))).await);
    assert!(often.contains("scheduler.min_interval_seconds"), "{often}");
    let missing_id = invalid(call(&tool, &run, json!({"action": "pause"})).await);
    assert!(missing_id.contains("action `list`"), "{missing_id}");
    let thread_only = call(&tool, &run, create(json!({"every_seconds": 1800})))
        .await
        .unwrap();
    assert!(thread_only.contains("every 1800 s in UTC"), "{thread_only}");
}

#[tokio::test]
async fn a_scheduled_run_cannot_make_or_change_schedules() {
    let tool = tool();
    let mut run = run_of("ann");
    run.options.schedule_fire = Some("abcd1234@2026-12-07T08:00:00.000Z".into());
    let args = json!({"action": "create", "prompt": "again", "when": {"every_seconds": 600}});
    let refused = call(&tool, &run, args).await;
    assert!(matches!(refused, Err(ToolError::Denied(m)) if m.contains("scheduled run")));
    let listed = call(&tool, &run, json!({"action": "list"})).await.unwrap();
    assert!(listed.starts_with("No schedules"), "{listed}");
}

#[test]
fn offered_while_enabled_and_the_agents_groups_allow() {
    let mut config = AppConfig::default();
    assert!(offered(&config, None));
    assert!(offered(&config, Some(&["web".into(), "schedule".into()])));
    assert!(!offered(&config, Some(&["web".into()])));
    config.scheduler.enabled = false;
    assert!(!offered(&config, None));
}
