//! The repo's version history: attribution, the bound, exact reverts, isolation, and that a
//! write whose batch is refused leaves neither record nor version behind.

use std::sync::Arc;

use super::*;
use crate::memory::document::{Fact, FactCategory};
use antler_store::{MemoryStore, Store};

fn updater(thread: &str) -> WriteSource {
    WriteSource::Updater {
        thread_id: thread.into(),
    }
}

fn add(repo: &MemoryRepo, scope: &MemoryScope, content: &str, source: &WriteSource) {
    repo.update(scope, source, |doc, _| {
        doc.facts
            .push(Fact::new(content, FactCategory::Knowledge, 0.9, "t"));
        Ok(())
    })
    .unwrap();
}

#[test]
fn each_change_is_a_numbered_attributed_version() {
    let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
    let scope = MemoryScope::new("u", None);
    add(&repo, &scope, "Likes tea", &updater("t1"));
    let doc = repo.load(&scope).unwrap();
    let chat = WriteSource::Chat {
        command: "/forget all".into(),
    };
    repo.clear(&scope, &chat).unwrap();
    // Nothing to clear any more: no new version.
    repo.clear(&scope, &chat).unwrap();
    let history = repo.history(&scope).unwrap();
    let numbers: Vec<u64> = history.iter().map(|v| v.version).collect();
    assert_eq!(numbers, [2, 1]);
    assert_eq!(history[0].source, chat);
    assert_eq!(history[0].changes.describe(), "−1 fact");
    assert_eq!(history[1].source, updater("t1"));
    assert_eq!(history[1].document, doc);
    assert_eq!(history[1].at, doc.last_updated);
}

#[test]
fn revert_restores_the_exact_content_as_a_new_version() {
    let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
    let scope = MemoryScope::new("u", None);
    add(&repo, &scope, "Likes tea", &updater("t1"));
    repo.update(&scope, &updater("t2"), |doc, _| {
        doc.user.work_context.summary = "Rust developer".into();
        doc.facts[0].confidence = 0.75;
        Ok(())
    })
    .unwrap();
    let version_two = repo.load(&scope).unwrap();
    repo.clear(&scope, &WriteSource::Import).unwrap();
    let reverted = repo.revert(&scope, 2, &WriteSource::Import).unwrap();
    assert_eq!(reverted.version, Some(4));
    let now = repo.load(&scope).unwrap();
    assert!(history::same_content(&now, &version_two));
    assert_eq!(
        serde_json::to_value(&now.facts).unwrap(),
        serde_json::to_value(&version_two.facts).unwrap()
    );
    assert_eq!(repo.version(&scope, 4).unwrap().restores, Some(2));
    // The revert itself is undone the same way.
    repo.revert(&scope, 3, &WriteSource::Import).unwrap();
    assert!(repo.load(&scope).unwrap().is_empty());
    assert!(matches!(
        repo.revert(&scope, 99, &WriteSource::Import),
        Err(MemoryError::VersionNotFound { version: 99 })
    ));
}

#[test]
fn only_the_last_versions_are_kept() {
    let store = Arc::new(MemoryStore::new());
    let repo = MemoryRepo::new(store.clone()).with_history_limit(3);
    let scope = MemoryScope::new("u", None);
    for i in 0..6 {
        add(&repo, &scope, &format!("fact {i}"), &updater("t"));
    }
    let numbers: Vec<u64> = repo
        .history(&scope)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(numbers, [6, 5, 4]);
    // A lower limit prunes on the next write; 0 keeps nothing.
    let repo = repo.with_history_limit(1);
    add(&repo, &scope, "fact 6", &updater("t"));
    let numbers: Vec<u64> = repo
        .history(&scope)
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(numbers, [7]);
    let repo = repo.with_history_limit(0);
    add(&repo, &scope, "fact 7", &updater("t"));
    assert!(repo.history(&scope).unwrap().is_empty());
    assert!(store.scan_prefix(HISTORY_TREE, b"").unwrap().is_empty());
}

#[test]
fn histories_are_per_user_and_agent() {
    let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
    let alice = MemoryScope::new("alice", None);
    let alice_coder = MemoryScope::new("alice", Some("coder"));
    let bob = MemoryScope::new("bob", None);
    add(&repo, &alice, "Alice likes tea", &updater("a"));
    add(&repo, &alice_coder, "Alice writes Rust", &updater("c"));
    assert!(repo.history(&bob).unwrap().is_empty());
    assert!(matches!(
        repo.revert(&bob, 1, &WriteSource::Import),
        Err(MemoryError::VersionNotFound { .. })
    ));
    let coder = repo.history(&alice_coder).unwrap();
    assert_eq!(coder.len(), 1);
    assert_eq!(coder[0].document.facts[0].content, "Alice writes Rust");
    assert_eq!(repo.history(&alice).unwrap()[0].source, updater("a"));
}

#[test]
fn a_document_from_before_history_becomes_version_one() {
    let store = Arc::new(MemoryStore::new());
    let scope = MemoryScope::new("u", None);
    let mut old = MemoryDocument::default();
    old.facts
        .push(Fact::new("Old fact", FactCategory::Goal, 0.9, "t"));
    let legacy = serde_json::json!({"document": old, "forgotten": []});
    store
        .put(
            MEMORY_TREE,
            &scope.key(),
            &serde_json::to_vec(&legacy).unwrap(),
        )
        .unwrap();
    let repo = MemoryRepo::new(store);
    add(&repo, &scope, "New fact", &updater("t"));
    let history = repo.history(&scope).unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].source, WriteSource::Earlier);
    assert_eq!(history[1].document.facts, old.facts);
    assert_eq!(history[0].changes.describe(), "+1 fact");
}

/// A store whose conditional batches always lose the race: the write must give up without
/// leaving a version behind.
#[test]
fn a_refused_batch_leaves_no_version() {
    struct Contended(MemoryStore);
    impl Store for Contended {
        fn get(&self, tree: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            self.0.get(tree, key)
        }
        fn put(&self, tree: &str, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
            self.0.put(tree, key, value)
        }
        fn delete(&self, tree: &str, key: &[u8]) -> Result<(), StoreError> {
            self.0.delete(tree, key)
        }
        fn scan_prefix(
            &self,
            tree: &str,
            prefix: &[u8],
        ) -> Result<antler_store::KeyValues, StoreError> {
            self.0.scan_prefix(tree, prefix)
        }
        fn apply_batch(&self, ops: Vec<BatchOp>) -> Result<(), StoreError> {
            self.0.apply_batch(ops)
        }
        fn apply_batch_if(&self, _: &Expect, _: Vec<BatchOp>) -> Result<bool, StoreError> {
            Ok(false)
        }
        fn flush(&self) -> Result<(), StoreError> {
            Ok(())
        }
    }
    let repo = MemoryRepo::new(Arc::new(Contended(MemoryStore::new())));
    let scope = MemoryScope::new("u", None);
    let result = repo.update(&scope, &updater("t"), |doc, _| {
        doc.facts.push(Fact::new("x", FactCategory::Goal, 0.9, "t"));
        Ok(())
    });
    assert!(result.is_err());
    assert!(repo.history(&scope).unwrap().is_empty());
    assert!(repo.load(&scope).unwrap().is_empty());
}
