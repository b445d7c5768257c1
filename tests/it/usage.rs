//! Per-run token usage and per-user daily budgets through the harness: usage is recorded per
//! user and model, and a user whose budget is spent gets the notice with no model call made.

use std::sync::Arc;

use antler::agent_api::{RunOptions, StopReason};
use antler::config::{AppConfig, ConfigHandle, ModelConfig};
use antler::harness::{Harness, RunError, RunRequest, Speaker};
use antler::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler::usage::{UsageStore, today, usage_text};
use antler_store::messages::{AiMessage, Message, Usage};
use antler_store::{MemoryStore, StoreRef};

fn spend(text: &str, total: u64) -> ScriptedTurn {
    ScriptedTurn::Message(AiMessage {
        content: text.into(),
        usage: Some(Usage {
            input_tokens: total - 10,
            output_tokens: 10,
            total_tokens: total,
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn request(user: &str, thread: &str) -> RunRequest {
    RunRequest {
        user_id: user.into(),
        speaker: Speaker::Owner,
        thread_id: thread.into(),
        input: vec![Message::human("hello")],
        options: RunOptions::default(),
        want_values: false,
    }
}

#[tokio::test]
async fn a_user_over_the_daily_budget_is_refused_without_a_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = AppConfig {
        data_dir: Some(dir.path().to_path_buf()),
        ..AppConfig::default()
    };
    config.budgets.default_daily_tokens = Some(100);
    config.budgets.users.insert("bob".into(), 10_000.into());
    config.admins.push("root".into());
    // Titles are metered too (`title` rows, in the background): this test counts runs' calls.
    config.title.enabled = false;
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [
            spend("first", 150),
            spend("for bob", 70),
            spend("bob again", 70),
        ],
    ));
    let models = ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
    let store: StoreRef = Arc::new(MemoryStore::new());
    let harness = Harness::with_parts(
        ConfigHandle::fixed(config.clone()),
        store.clone(),
        Some(models),
    )
    .unwrap();

    let first = harness.start_run(request("alice", "a1")).await.unwrap();
    let outcome = first.outcome.await.unwrap();
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);

    // Over budget: refused before any model call, also on a new thread.
    for thread in ["a1", "a2"] {
        let Err(RunError::BudgetSpent { notice }) =
            harness.start_run(request("alice", thread)).await
        else {
            panic!("alice is over her budget");
        };
        assert!(notice.contains("150 of 100 tokens"), "{notice}");
        assert!(notice.contains("resets at 00:00 UTC"), "{notice}");
    }
    assert_eq!(
        model.requests().len(),
        1,
        "no model call for a spent budget"
    );

    // Bob's override leaves him room for two runs.
    for _ in 0..2 {
        let run = harness.start_run(request("bob", "b1")).await.unwrap();
        assert_eq!(run.outcome.await.unwrap().stop, StopReason::Completed);
    }
    let usage = UsageStore::new(store);
    assert_eq!(usage.tokens_on("alice", today()).unwrap(), 150);
    let bob = usage.rows(Some("bob"), Some(today())).unwrap();
    assert_eq!(bob.len(), 1, "one record per user, day, model and kind");
    assert_eq!(
        (bob[0].model.as_str(), bob[0].totals.calls),
        ("scripted", 2)
    );
    assert_eq!(bob[0].totals.total_tokens, 140);

    let admin = usage_text(&usage, &config, "root", true, &|_| None).unwrap();
    assert!(admin.contains("alice scripted: 150 tokens"), "{admin}");
    assert!(admin.contains("bob scripted: 140 tokens"), "{admin}");
    assert!(admin.contains("Total: 290 tokens"), "{admin}");
    let own = usage_text(&usage, &config, "bob", false, &|_| None).unwrap();
    assert!(!own.contains("alice"), "{own}");
    assert!(
        own.contains("Daily budget: 10,000 tokens, 9,860 tokens left"),
        "{own}"
    );
}
