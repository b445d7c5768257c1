//! Whose memory reaches a prompt: the run's user and agent only, and only on a thread's first
//! turn; a run's conversation comes back as facts after the shutdown flush.

use std::sync::Arc;
use std::time::Duration;

use antler::agent_api::{RunOptions, StopReason};
use antler::config::schema::TitleConfig;
use antler::config::{AppConfig, ConfigHandle, MemoryConfig, ModelConfig};
use antler::custom_agents::AgentConfig;
use antler::harness::{Harness, RunRequest, Speaker};
use antler::memory::{Fact, FactCategory, MemoryScope};
use antler::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;
use antler_store::messages::Message;

fn harness(dir: &std::path::Path, model: Arc<ScriptedModel>) -> Harness {
    let config = AppConfig {
        data_dir: Some(dir.to_path_buf()),
        memory: MemoryConfig {
            enabled: true,
            ..MemoryConfig::default()
        },
        // About memory: the run's model is not also asked for titles.
        title: TitleConfig {
            enabled: false,
            ..TitleConfig::default()
        },
        ..AppConfig::default()
    };
    let models = ModelRegistry::new().with_model("scripted", model, ModelConfig::default());
    Harness::with_parts(
        ConfigHandle::fixed(config),
        Arc::new(MemoryStore::new()),
        Some(models),
    )
    .unwrap()
}

fn remember(harness: &Harness, scope: &MemoryScope, content: &str) {
    let repo = &harness.memory().expect("memory service").repo;
    repo.update(scope, &antler::memory::WriteSource::Import, |doc, _| {
        doc.facts
            .push(Fact::new(content, FactCategory::Knowledge, 0.9, "seed"));
        Ok(())
    })
    .unwrap();
}

async fn run(harness: &Harness, user: &str, thread: &str, agent: Option<&str>, text: &str) {
    let handle = harness
        .start_run(RunRequest {
            user_id: user.into(),
            speaker: Speaker::Owner,
            thread_id: thread.into(),
            input: vec![Message::human(text)],
            options: RunOptions {
                agent_name: agent.map(str::to_string),
                ..RunOptions::default()
            },
            want_values: false,
        })
        .await
        .unwrap();
    let outcome = handle.outcome.await.unwrap();
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
}

/// The `<memory>` message of a model request, if any.
fn memory_in(model: &ScriptedModel, call: usize) -> Option<String> {
    model.requests()[call]
        .messages
        .iter()
        .map(Message::content)
        .find(|text| text.starts_with("<memory>"))
        .map(str::to_string)
}

fn answers(texts: &[&str]) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(
        "scripted",
        texts
            .iter()
            .map(|t| ScriptedTurn::Text(vec![t.to_string()])),
    ))
}

#[tokio::test]
async fn a_users_facts_reach_only_their_own_prompts_and_agent() {
    let dir = tempfile::tempdir().unwrap();
    let model = answers(&["hi alice", "hi bob", "hi coder", "again"]);
    let harness = harness(dir.path(), model.clone());
    harness
        .agents()
        .create(
            "alice",
            "coder",
            &AgentConfig::new("coder", ""),
            "You code.",
        )
        .unwrap();
    remember(
        &harness,
        &MemoryScope::new("alice", None),
        "Alice drinks green tea",
    );
    remember(
        &harness,
        &MemoryScope::new("alice", Some("coder")),
        "Alice's project is written in Rust",
    );

    run(&harness, "alice", "a1", None, "hello").await;
    run(&harness, "bob", "b1", None, "hello").await;
    run(&harness, "alice", "a2", Some("coder"), "hello").await;
    run(&harness, "alice", "a1", None, "and again").await;

    let alice = memory_in(&model, 0).expect("alice's first turn carries her memory");
    assert!(alice.contains("Alice drinks green tea"));
    assert!(
        !alice.contains("Rust"),
        "the coder agent's facts stay with it"
    );
    assert!(
        memory_in(&model, 1).is_none(),
        "bob has no memory: {:?}",
        memory_in(&model, 1)
    );
    let coder = memory_in(&model, 2).expect("the agent's memory");
    assert!(coder.contains("written in Rust"));
    assert!(!coder.contains("green tea"));
    let later = model.requests()[3]
        .messages
        .iter()
        .filter(|m| m.content().starts_with("<memory>"))
        .count();
    assert_eq!(
        later, 1,
        "the block is injected once, on the first turn, and replayed"
    );
    // Memory updates are pending for each conversation; the scripted model has no turns left,
    // so the flush fails them (logged) and memory stays as it was.
    model.allow_unscripted();
    harness.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn a_conversation_becomes_facts_after_the_shutdown_flush() {
    let dir = tempfile::tempdir().unwrap();
    let update = r#"{"newFacts":[{"content":"Is called Sam","category":"context","confidence":0.95},
                                 {"content":"Might like jazz","category":"preference","confidence":0.5}]}"#;
    let model = Arc::new(
        ScriptedModel::new(
            "scripted",
            [
                ScriptedTurn::Text(vec!["Nice to meet you, Sam.".into()]),
                ScriptedTurn::Text(vec![update.into()]),
            ],
        )
        .with_background_script(),
    );
    let harness = harness(dir.path(), model.clone());
    run(&harness, "sam", "s1", None, "I'm Sam").await;
    harness.shutdown(Duration::from_secs(5)).await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one answer and one memory update");
    let update_prompt = requests[1].messages[0].content();
    assert!(update_prompt.contains("user: I'm Sam"));
    assert!(update_prompt.contains("assistant: Nice to meet you, Sam."));
    assert!(
        !update_prompt.contains("<system-reminder>"),
        "injected context is not remembered"
    );
    let doc = harness
        .memory()
        .unwrap()
        .repo
        .load(&MemoryScope::new("sam", None))
        .unwrap();
    let facts: Vec<&str> = doc.facts.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(facts, ["Is called Sam"]);
    assert_eq!(doc.facts[0].source, "s1");
}
