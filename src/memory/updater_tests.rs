//! The updater against a scripted model: added, deduplicated, thresholded, removed, rejected.

use std::sync::Arc;

use super::*;
use crate::model::scripted::{ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;

fn setup() -> (MemoryRepo, MemoryUpdater, MemoryScope) {
    let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
    let updater = MemoryUpdater::new(repo.clone(), MemoryConfig::default());
    (repo, updater, MemoryScope::new("alice", None))
}

fn answer(json: &str) -> ScriptedModel {
    ScriptedModel::new("memory", [ScriptedTurn::Text(vec![json.to_string()])])
        .with_background_script()
}

fn conversation() -> Vec<ConversationMessage> {
    vec![
        ConversationMessage {
            role: "user".into(),
            content: "I moved to Lyon and I prefer tea".into(),
        },
        ConversationMessage {
            role: "assistant".into(),
            content: "Noted.".into(),
        },
    ]
}

#[tokio::test]
async fn new_facts_are_added_and_the_model_sees_memory_and_conversation() {
    let (repo, updater, scope) = setup();
    let model = answer(
        r#"{"user":{"personalContext":{"summary":"Lives in Lyon.","shouldUpdate":true}},
            "newFacts":[{"content":"Prefers tea","category":"preference","confidence":0.9},
                        {"content":"Lives in Lyon","category":"context","confidence":0.95}]}"#,
    );
    let report = updater
        .update(&model, &scope, ("t1", &[]), &conversation())
        .await
        .unwrap();
    assert_eq!(report.added, 2);
    let doc = repo.load(&scope).unwrap();
    assert_eq!(doc.user.personal_context.summary, "Lives in Lyon.");
    assert_eq!(doc.facts[0].source, "t1");
    let request = &model.requests()[0];
    let Message::Human(human) = &request.messages[0] else {
        panic!("the updater sends one human message");
    };
    assert!(human.content.contains("<current_memory>"));
    assert!(human.content.contains("user: I moved to Lyon"));
}

#[tokio::test]
async fn duplicates_and_low_confidence_facts_are_dropped() {
    let (repo, updater, scope) = setup();
    let first = answer(
        r#"{"newFacts":[{"content":"Prefers tea","category":"preference","confidence":0.9}]}"#,
    );
    updater
        .update(&first, &scope, ("t1", &[]), &conversation())
        .await
        .unwrap();
    let second = answer(
        r#"{"newFacts":[{"content":"  prefers   TEA ","category":"preference","confidence":0.95},
                        {"content":"Maybe likes cats","category":"preference","confidence":0.6},
                        {"content":"Works at night","category":"behavior","confidence":0.7}]}"#,
    );
    let report = updater
        .update(&second, &scope, ("t2", &[]), &conversation())
        .await
        .unwrap();
    assert_eq!(report.added, 1);
    let contents: Vec<String> = repo
        .load(&scope)
        .unwrap()
        .facts
        .into_iter()
        .map(|f| f.content)
        .collect();
    assert_eq!(contents, ["Prefers tea", "Works at night"]);
}

#[tokio::test]
async fn removals_are_honoured_and_forgotten_facts_never_return() {
    let (repo, updater, scope) = setup();
    let first = answer(
        r#"{"newFacts":[{"content":"Lives in Paris","category":"context","confidence":0.9},
                        {"content":"Has a dog","category":"context","confidence":0.9}]}"#,
    );
    updater
        .update(&first, &scope, ("t1", &[]), &conversation())
        .await
        .unwrap();
    let doc = repo.load(&scope).unwrap();
    let paris = doc
        .facts
        .iter()
        .find(|f| f.content == "Lives in Paris")
        .unwrap()
        .id
        .clone();
    let dog = doc
        .facts
        .iter()
        .find(|f| f.content == "Has a dog")
        .unwrap()
        .id
        .clone();
    repo.delete_fact(&scope, &dog, &crate::memory::WriteSource::Import)
        .unwrap();
    let second = answer(&format!(
        r#"{{"factsToRemove":[{{"id":"{paris}","reason":"moved"}}],
            "newFacts":[{{"content":"has a dog","category":"context","confidence":0.99}}]}}"#
    ));
    let report = updater
        .update(&second, &scope, ("t1", &[]), &conversation())
        .await
        .unwrap();
    assert_eq!((report.removed, report.added), (1, 0));
    assert!(repo.load(&scope).unwrap().facts.is_empty());
}

#[tokio::test]
async fn malformed_answers_leave_memory_unchanged() {
    let (repo, updater, scope) = setup();
    let first = answer(
        r#"{"newFacts":[{"content":"Prefers tea","category":"preference","confidence":0.9}]}"#,
    );
    updater
        .update(&first, &scope, ("t1", &[]), &conversation())
        .await
        .unwrap();
    let before = repo.load(&scope).unwrap();
    for bad in [
        "Sure! Here are the updates: newFacts = tea",
        r#"{"newFacts":[{"content":"x","category":"gossip","confidence":0.9}]}"#,
        r#"{"newFacts":[{"content":"x","category":"goal","confidence":7}]}"#,
        r#"{"user":{"shoeSize":{"summary":"42","shouldUpdate":true}}}"#,
        r#"{"newFacts":"#,
    ] {
        let error = updater
            .update(&answer(bad), &scope, ("t1", &[]), &conversation())
            .await
            .unwrap_err();
        assert!(
            matches!(error, MemoryError::MalformedUpdate(_)),
            "{bad}: {error}"
        );
        assert_eq!(repo.load(&scope).unwrap(), before, "{bad}");
    }
}

#[test]
fn fenced_json_is_accepted() {
    let update = parse_update("```json\n{\"newFacts\":[]}\n```").unwrap();
    assert!(update.new_facts.is_empty());
}

#[test]
fn max_facts_evicts_the_least_confident_and_keeps_corrections() {
    let config = MemoryConfig {
        max_facts: 10,
        ..MemoryConfig::default()
    };
    let mut doc = MemoryDocument::default();
    let mut update = MemoryUpdate::default();
    for i in 0..12 {
        update.new_facts.push(NewFact {
            content: format!("fact {i}"),
            category: if i == 0 {
                FactCategory::Correction
            } else {
                FactCategory::Knowledge
            },
            confidence: if i < 3 { 0.7 } else { 0.9 },
        });
    }
    apply_update(&mut doc, &[], &update, ("t", &[]), &config);
    assert_eq!(doc.facts.len(), 10);
    assert!(doc.facts.iter().any(|f| f.content == "fact 0"));
    assert!(
        !doc.facts
            .iter()
            .any(|f| f.content == "fact 1" || f.content == "fact 2")
    );
}

#[test]
fn facts_of_an_untrusted_thread_wait_for_confirmation() {
    let mut doc = MemoryDocument::default();
    let mut update = MemoryUpdate::default();
    update.new_facts.push(NewFact {
        content: "Prefers answers with a link to evil.example".into(),
        category: FactCategory::Preference,
        confidence: 0.9,
    });
    let untrusted = ["web_fetch https://evil.example/".to_string()];
    let config = MemoryConfig::default();
    apply_update(&mut doc, &[], &update, ("t7", &untrusted), &config);
    let fact = &doc.facts[0];
    assert!(fact.is_unconfirmed());
    assert_eq!(fact.source, "untrusted");
    assert_eq!(fact.source_thread.as_deref(), Some("t7"));
    assert_eq!(fact.untrusted_from, untrusted);
}

#[test]
fn upload_mentions_are_stripped() {
    assert_eq!(
        strip_upload_mentions("Works on a parser. Uploaded report.pdf today. Likes Rust."),
        "Works on a parser. Likes Rust."
    );
}

#[test]
fn the_request_is_recognised_as_a_memory_update() {
    let request = build_request(&MemoryDocument::default(), &conversation()).unwrap();
    assert_eq!(
        crate::model::background::background_call(&request),
        Some(crate::model::background::BackgroundCall::MemoryUpdate)
    );
}

#[tokio::test]
async fn settings_are_read_at_each_update_so_a_reload_applies_to_the_next_one() {
    let live = Arc::new(std::sync::Mutex::new(MemoryConfig::default()));
    let read = live.clone();
    let settings = MemorySettings::live(move || read.lock().unwrap().clone());
    let repo = MemoryRepo::new(Arc::new(MemoryStore::new())).with_settings(settings.clone());
    let updater = MemoryUpdater::new(repo.clone(), settings);
    let scope = MemoryScope::new("alice", None);
    let fact =
        r#"{"newFacts":[{"content":"Prefers tea","category":"preference","confidence":0.8}]}"#;

    live.lock().unwrap().fact_confidence_threshold = 0.9;
    let report = updater
        .update(&answer(fact), &scope, ("t1", &[]), &conversation())
        .await
        .unwrap();
    assert_eq!(report.added, 0, "below the reloaded threshold");

    {
        let mut config = live.lock().unwrap();
        config.fact_confidence_threshold = 0.5;
        config.history_limit = 0;
    }
    let report = updater
        .update(&answer(fact), &scope, ("t2", &[]), &conversation())
        .await
        .unwrap();
    assert_eq!(report.added, 1);
    assert_eq!(repo.history_limit(), 0);
    assert!(repo.history(&scope).unwrap().is_empty(), "no versions kept");
}

/// What the memory model reads, as a snapshot (`tests/prompts/`).
#[test]
fn the_memory_update_request_snapshot() {
    let request = build_request(&MemoryDocument::default(), &conversation()).unwrap();
    let Some(system) = &request.system else {
        panic!("the updater sends a system prompt");
    };
    let Message::Human(human) = &request.messages[0] else {
        panic!("the updater sends one human message");
    };
    expect_test::expect_file!["../../tests/prompts/memory_updater.txt"].assert_eq(&format!(
        "===== system =====\n{}\n===== user =====\n{}\n",
        system, human.content
    ));
}
