//! [`MemoryRepo`]: one memory document per (user, agent) in the `memory` tree of the `Store`.
//!
//! Every write is a compare-and-set of the whole record (read, change, write if unchanged,
//! retry), so a crash or a concurrent writer never leaves half an update.

use serde::{Deserialize, Serialize};

use crate::memory::MemoryError;
use crate::memory::document::{MemoryDocument, normalize, now};
use crate::store::{BatchOp, Expect, StoreError, StoreRef};

pub const MEMORY_TREE: &str = "memory";
/// The agent bucket of the default agent (DeerMem's reserved name).
pub const DEFAULT_AGENT: &str = "__default__";
/// Compare-and-set attempts before a write gives up (only under constant contention).
const CAS_ATTEMPTS: usize = 16;

/// Whose memory: a user, and the custom agent it belongs to (`None`: the default agent).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemoryScope {
    pub user_id: String,
    pub agent_name: Option<String>,
}

impl MemoryScope {
    pub fn new(user_id: impl Into<String>, agent_name: Option<&str>) -> Self {
        Self {
            user_id: user_id.into(),
            agent_name: agent_name.map(str::to_lowercase),
        }
    }

    fn key(&self) -> Vec<u8> {
        let agent = self.agent_name.as_deref().unwrap_or(DEFAULT_AGENT);
        format!("{}\0{agent}", self.user_id).into_bytes()
    }
}

/// What is stored: the document plus the normalized contents of facts the user deleted, so
/// the updater does not learn them again from the same conversation.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Record {
    document: MemoryDocument,
    #[serde(default)]
    forgotten: Vec<String>,
}

/// How many deleted facts are remembered as "do not re-add" (oldest go first).
const MAX_FORGOTTEN: usize = 200;

#[derive(Clone)]
pub struct MemoryRepo {
    store: StoreRef,
}

impl MemoryRepo {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    pub fn load(&self, scope: &MemoryScope) -> Result<MemoryDocument, MemoryError> {
        Ok(self.read(scope)?.1.document)
    }

    /// Normalized contents of facts the user deleted.
    pub fn forgotten(&self, scope: &MemoryScope) -> Result<Vec<String>, MemoryError> {
        Ok(self.read(scope)?.1.forgotten)
    }

    /// Applies `change` atomically and returns the document as written. `change` may run more
    /// than once (when another writer got in between), so it must not have side effects.
    pub fn update<T>(
        &self,
        scope: &MemoryScope,
        mut change: impl FnMut(&mut MemoryDocument, &mut Vec<String>) -> Result<T, MemoryError>,
    ) -> Result<(MemoryDocument, T), MemoryError> {
        let key = scope.key();
        for _ in 0..CAS_ATTEMPTS {
            let (raw, mut record) = self.read(scope)?;
            let result = change(&mut record.document, &mut record.forgotten)?;
            record.document.last_updated = now();
            let excess = record.forgotten.len().saturating_sub(MAX_FORGOTTEN);
            record.forgotten.drain(..excess);
            let value = serde_json::to_vec(&record).map_err(|e| StoreError::Io(e.to_string()))?;
            let expect = Expect {
                tree: MEMORY_TREE,
                key: key.clone(),
                value: raw,
            };
            let put = BatchOp::Put {
                tree: MEMORY_TREE,
                key: key.clone(),
                value,
            };
            if self.store.apply_batch_if(&expect, vec![put])? {
                return Ok((record.document, result));
            }
        }
        Err(StoreError::Io(format!(
            "memory of {} changed {CAS_ATTEMPTS} times during one update; retry",
            scope.user_id
        ))
        .into())
    }

    /// Replaces the whole document (import), after validating it.
    pub fn replace(
        &self,
        scope: &MemoryScope,
        document: MemoryDocument,
    ) -> Result<MemoryDocument, MemoryError> {
        document.validate().map_err(MemoryError::InvalidDocument)?;
        Ok(self
            .update(scope, |doc, _| {
                *doc = document.clone();
                Ok(())
            })?
            .0)
    }

    /// Deletes one fact; its content is remembered as forgotten.
    pub fn delete_fact(
        &self,
        scope: &MemoryScope,
        id: &str,
    ) -> Result<MemoryDocument, MemoryError> {
        Ok(self
            .update(scope, |doc, forgotten| {
                let index = doc
                    .facts
                    .iter()
                    .position(|f| f.id == id)
                    .ok_or_else(|| MemoryError::FactNotFound { id: id.to_string() })?;
                let fact = doc.facts.remove(index);
                forgotten.push(normalize(&fact.content));
                Ok(())
            })?
            .0)
    }

    /// Forgets everything: summaries and facts (all fact contents become forgotten).
    pub fn clear(&self, scope: &MemoryScope) -> Result<usize, MemoryError> {
        Ok(self
            .update(scope, |doc, forgotten| {
                let count = doc.facts.len();
                forgotten.extend(doc.facts.iter().map(|f| normalize(&f.content)));
                *doc = MemoryDocument::default();
                Ok(count)
            })?
            .1)
    }

    fn read(&self, scope: &MemoryScope) -> Result<(Option<Vec<u8>>, Record), MemoryError> {
        let key = scope.key();
        let Some(raw) = self.store.get(MEMORY_TREE, &key)? else {
            return Ok((None, Record::default()));
        };
        let record = serde_json::from_slice(&raw).map_err(|e| StoreError::Corrupt {
            key: format!("{MEMORY_TREE}/{}", scope.user_id),
            detail: e.to_string(),
        })?;
        Ok((Some(raw), record))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::document::{Fact, FactCategory};
    use crate::store::MemoryStore;

    fn repo() -> MemoryRepo {
        MemoryRepo::new(Arc::new(MemoryStore::new()))
    }

    fn add(repo: &MemoryRepo, scope: &MemoryScope, content: &str) -> String {
        let (doc, _) = repo
            .update(scope, |doc, _| {
                doc.facts
                    .push(Fact::new(content, FactCategory::Knowledge, 0.9, "t"));
                Ok(())
            })
            .unwrap();
        doc.facts.last().unwrap().id.clone()
    }

    #[test]
    fn users_and_agents_have_separate_memories() {
        let repo = repo();
        let alice = MemoryScope::new("alice", None);
        let alice_coder = MemoryScope::new("alice", Some("Coder"));
        let bob = MemoryScope::new("bob", None);
        add(&repo, &alice, "Alice likes tea");
        add(&repo, &alice_coder, "Alice writes Rust");
        assert_eq!(repo.load(&alice).unwrap().facts.len(), 1);
        assert_eq!(
            repo.load(&alice_coder).unwrap().facts[0].content,
            "Alice writes Rust"
        );
        assert!(repo.load(&bob).unwrap().is_empty());
        assert_eq!(
            repo.load(&MemoryScope::new("alice", Some("coder")))
                .unwrap()
                .facts
                .len(),
            1
        );
    }

    #[test]
    fn a_failed_change_writes_nothing() {
        let repo = repo();
        let scope = MemoryScope::new("u", None);
        let id = add(&repo, &scope, "keep me");
        let error = repo.delete_fact(&scope, "fact_missing").unwrap_err();
        assert!(matches!(error, MemoryError::FactNotFound { .. }));
        assert_eq!(repo.load(&scope).unwrap().facts[0].id, id);
    }

    #[test]
    fn deleted_facts_are_remembered_as_forgotten() {
        let repo = repo();
        let scope = MemoryScope::new("u", None);
        let id = add(&repo, &scope, "Lives in  Paris");
        repo.delete_fact(&scope, &id).unwrap();
        assert!(repo.load(&scope).unwrap().facts.is_empty());
        assert_eq!(repo.forgotten(&scope).unwrap(), ["lives in paris"]);
    }

    #[test]
    fn import_validates_and_replaces() {
        let repo = repo();
        let scope = MemoryScope::new("u", None);
        add(&repo, &scope, "old");
        let mut doc = MemoryDocument::default();
        doc.facts
            .push(Fact::new("new", FactCategory::Goal, 0.8, "import"));
        doc.facts.push(doc.facts[0].clone());
        assert!(matches!(
            repo.replace(&scope, doc.clone()),
            Err(MemoryError::InvalidDocument(_))
        ));
        assert_eq!(repo.load(&scope).unwrap().facts[0].content, "old");
        doc.facts.pop();
        repo.replace(&scope, doc).unwrap();
        assert_eq!(repo.load(&scope).unwrap().facts[0].content, "new");
    }
}
