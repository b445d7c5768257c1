//! A shared conversation through the harness: one thread, owned by whoever started it, each
//! turn run as its speaker (memory, usage, files under the owner's thread).

use std::sync::Arc;
use std::time::Duration;

use antler::agent_api::{RunOptions, StopReason};
use antler::config::sandbox::SandboxProviderKind;
use antler::config::schema::TitleConfig;
use antler::config::{AppConfig, ConfigHandle, MemoryConfig, ModelConfig};
use antler::harness::{Harness, RunRequest, Speaker};
use antler::memory::{Fact, FactCategory, MemoryScope, WriteSource};
use antler::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler::usage::{UsageKind, UsageStore, window_rows};
use antler_store::MemoryStore;
use antler_store::messages::{AiMessage, HumanMessage, Message, Usage};
use serde_json::json;

fn harness(dir: &std::path::Path, model: Arc<ScriptedModel>, inject_in_groups: bool) -> Harness {
    let mut config = AppConfig {
        data_dir: Some(dir.to_path_buf()),
        memory: MemoryConfig {
            enabled: true,
            inject_in_groups,
            ..MemoryConfig::default()
        },
        title: TitleConfig {
            enabled: false,
            ..TitleConfig::default()
        },
        ..AppConfig::default()
    };
    config.sandbox.provider = SandboxProviderKind::Local;
    let models = ModelRegistry::new().with_model("scripted", model, ModelConfig::default());
    Harness::with_parts(
        ConfigHandle::fixed(config),
        Arc::new(MemoryStore::new()),
        Some(models),
    )
    .unwrap()
}

fn remember(harness: &Harness, user: &str, content: &str) {
    let repo = &harness.memory().expect("memory service").repo;
    repo.update(
        &MemoryScope::new(user, None),
        &WriteSource::Import,
        |doc, _| {
            doc.facts
                .push(Fact::new(content, FactCategory::Knowledge, 0.9, "seed"));
            Ok(())
        },
    )
    .unwrap();
}

/// A group message as the channel layer stores it: the sender's id and name in its meta.
fn said_by(user: &str, name: &str, text: &str) -> Message {
    let mut human = HumanMessage {
        id: antler_store::messages::new_id("human").into(),
        content: text.into(),
        ..Default::default()
    };
    human.set_shared_sender(user, name);
    Message::Human(human)
}

async fn turn(harness: &Harness, owner: &str, speaker: Speaker, input: Message) {
    let handle = harness
        .start_run(RunRequest {
            user_id: owner.into(),
            speaker,
            thread_id: "group".into(),
            input: vec![input],
            options: RunOptions::default(),
            want_values: false,
        })
        .await
        .unwrap();
    let outcome = handle.outcome.await.unwrap();
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.error);
}

fn member(user: &str) -> Speaker {
    Speaker::Member {
        user_id: user.into(),
    }
}

/// The conversation messages of request `call` (system prompt and reminders left out).
fn request_texts(model: &ScriptedModel, call: usize) -> Vec<String> {
    model.requests()[call]
        .messages
        .iter()
        .filter(|m| !matches!(m, Message::System(_)))
        .map(|m| m.content().to_string())
        .collect()
}

/// An answer that used `total` tokens.
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

fn answers(texts: &[&str]) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(
        "scripted",
        texts
            .iter()
            .map(|t| ScriptedTurn::Text(vec![t.to_string()])),
    ))
}

#[tokio::test]
async fn each_turn_is_its_speakers_and_the_history_is_everyones() {
    let dir = tempfile::tempdir().unwrap();
    let write = ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: vec![(
            "write_file".into(),
            json!({"description": "note", "path": "/mnt/user-data/outputs/bob.txt", "content": "in"}),
        )],
    };
    let model = Arc::new(ScriptedModel::new(
        "scripted",
        [spend("Sure, Ann.", 100), write, spend("Hi Bob.", 40)],
    ));
    let harness = harness(dir.path(), model.clone(), false);
    remember(&harness, "ann", "Ann drinks green tea");
    remember(&harness, "bob", "Bob has a dog named Rex");

    turn(
        &harness,
        "ann",
        member("ann"),
        said_by("ann", "Ann", "plan the offsite"),
    )
    .await;
    turn(
        &harness,
        "ann",
        member("bob"),
        said_by("bob", "Bob", "count me in"),
    )
    .await;

    assert_eq!(request_texts(&model, 0), ["[Ann] plan the offsite"]);
    assert_eq!(
        request_texts(&model, 1),
        ["[Ann] plan the offsite", "Sure, Ann.", "[Bob] count me in"],
        "the history is shared, names and all; no one's memory is in it"
    );
    let record = harness.get_thread("ann", "group").unwrap().expect("ann's");
    assert_eq!(record.user_id, "ann", "the thread stays its starter's");
    let outputs = "threads/group/user-data/outputs/bob.txt";
    assert!(
        dir.path().join("users/ann").join(outputs).is_file(),
        "files are the thread's"
    );
    assert!(!dir.path().join("users/bob").exists());
    let stored = harness.thread_state("group").await.unwrap().unwrap();
    let typed: Vec<&str> = stored
        .messages
        .iter()
        .filter(|m| m.is_genuine_human())
        .map(Message::content)
        .collect();
    assert_eq!(
        typed,
        ["plan the offsite", "count me in"],
        "stored as typed"
    );

    let usage = UsageStore::new(harness.threads().store().clone());
    let rows = window_rows(&usage, None, 1).unwrap();
    let tokens = |user: &str| -> u64 {
        // The turns' own calls: titles and memory updates are metered apart.
        rows.iter()
            .filter(|row| row.user_id == user && row.kind == UsageKind::Lead)
            .map(|row| row.totals.total_tokens)
            .sum()
    };
    // Bob's: his answer's 40 and the 15 of the step that wrote the file.
    assert_eq!((tokens("ann"), tokens("bob")), (100, 55), "{rows:?}");
    model.allow_unscripted();
    harness.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn with_inject_in_groups_each_speaker_gets_their_own_memory_for_their_turn_only() {
    let dir = tempfile::tempdir().unwrap();
    let model = answers(&["Sure, Ann.", "Hi Bob.", "Noted."]);
    let harness = harness(dir.path(), model.clone(), true);
    remember(&harness, "ann", "Ann drinks green tea");
    remember(&harness, "bob", "Bob has a dog named Rex");

    turn(
        &harness,
        "ann",
        member("ann"),
        said_by("ann", "Ann", "plan the offsite"),
    )
    .await;
    turn(
        &harness,
        "ann",
        member("bob"),
        said_by("bob", "Bob", "count me in"),
    )
    .await;
    turn(
        &harness,
        "ann",
        member("ann"),
        said_by("ann", "Ann", "and lunch?"),
    )
    .await;

    let ann = request_texts(&model, 0);
    assert_eq!(ann.len(), 1);
    assert!(
        ann[0].starts_with(
            "<memory>\nWhat you remember about Ann from earlier conversations (it may be \
             outdated; what they say now wins). Not part of the message: Ann sends the message \
             below this block.\n"
        ) && ann[0].contains("Ann drinks green tea")
            && ann[0].ends_with("</memory>\n\n[Ann] plan the offsite"),
        "{ann:?}"
    );
    let bob = request_texts(&model, 1);
    assert_eq!(
        bob[0], "[Ann] plan the offsite",
        "ann's memory was hers alone"
    );
    assert!(
        bob[2].contains("Bob has a dog named Rex") && !bob[2].contains("green tea"),
        "{bob:?}"
    );
    assert!(bob[2].ends_with("[Bob] count me in"), "{bob:?}");
    let later = request_texts(&model, 2);
    assert_eq!(later[2], "[Bob] count me in", "bob's memory was his alone");
    assert!(later[4].contains("green tea") && !later[4].contains("Rex"));
    model.allow_unscripted();
    harness.shutdown(Duration::from_secs(5)).await.unwrap();
}
