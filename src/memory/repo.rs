//! [`MemoryRepo`]: one memory document per (user, agent) in the `memory` tree of the `Store`.
//!
//! Every write is a compare-and-set of the whole record (read, change, write if unchanged,
//! retry), so a crash or a concurrent writer never leaves half an update. A write that changes
//! the document also stores it as a new attributed version in the same batch
//! ([`crate::memory::history`]).

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::memory::MemoryError;
use crate::memory::document::{Fact, MemoryDocument, normalize, now};
use crate::memory::history::{self, ChangeSummary, HISTORY_TREE, MemoryVersion, WriteSource};
use crate::memory::settings::MemorySettings;
use antler_store::{BatchOp, Expect, StoreError, StoreRef};

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
/// the updater does not learn them again from the same conversation, and where its history is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Record {
    document: MemoryDocument,
    #[serde(default)]
    forgotten: Vec<String>,
    /// The number of the last version written (0: none yet).
    #[serde(default)]
    head: u64,
    /// No version below this one is stored (pruned or never written).
    #[serde(default)]
    oldest: u64,
}

/// How many deleted facts are remembered as "do not re-add" (oldest go first).
const MAX_FORGOTTEN: usize = 200;
/// Versions kept per (user, agent) unless `memory.history_limit` says otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 20;

/// What a revert wrote: the document, and its new version (`None`: it already matched).
#[derive(Clone, Debug)]
pub struct Reverted {
    pub document: MemoryDocument,
    pub version: Option<u64>,
}

#[derive(Clone)]
pub struct MemoryRepo {
    store: StoreRef,
    /// Read at each write, so a config reload changes it for every clone (chat, API, updater).
    history_limit: Arc<dyn Fn() -> usize + Send + Sync>,
}

impl MemoryRepo {
    pub fn new(store: StoreRef) -> Self {
        Self {
            store,
            history_limit: Arc::new(|| DEFAULT_HISTORY_LIMIT),
        }
    }

    /// Keeps `limit` versions per (user, agent) from the next write on; 0 keeps none.
    pub fn with_history_limit(mut self, limit: usize) -> Self {
        self.history_limit = Arc::new(move || limit);
        self
    }

    /// Keeps as many versions as `memory.history_limit` says at each write.
    pub fn with_settings(mut self, settings: MemorySettings) -> Self {
        self.history_limit = Arc::new(move || settings.current().history_limit);
        self
    }

    pub fn history_limit(&self) -> usize {
        (self.history_limit)()
    }

    pub fn load(&self, scope: &MemoryScope) -> Result<MemoryDocument, MemoryError> {
        Ok(self.read(scope)?.1.document)
    }

    /// Normalized contents of facts the user deleted.
    pub fn forgotten(&self, scope: &MemoryScope) -> Result<Vec<String>, MemoryError> {
        Ok(self.read(scope)?.1.forgotten)
    }

    /// Applies `change` atomically and returns the document as written; a change of content is
    /// a new version attributed to `source`. `change` may run more than once (when another
    /// writer got in between), so it must not have side effects.
    pub fn update<T>(
        &self,
        scope: &MemoryScope,
        source: &WriteSource,
        change: impl FnMut(&mut MemoryDocument, &mut Vec<String>) -> Result<T, MemoryError>,
    ) -> Result<(MemoryDocument, T), MemoryError> {
        let (document, value, _) = self.write(scope, source, None, change)?;
        Ok((document, value))
    }

    /// The stored versions, newest first.
    pub fn history(&self, scope: &MemoryScope) -> Result<Vec<MemoryVersion>, MemoryError> {
        let prefix = history::prefix(&scope.key());
        let mut versions = Vec::new();
        for (key, value) in self.store.scan_prefix(HISTORY_TREE, &prefix)? {
            versions.push(parse_version(scope, &key, &value)?);
        }
        versions.reverse();
        Ok(versions)
    }

    /// One stored version.
    pub fn version(&self, scope: &MemoryScope, version: u64) -> Result<MemoryVersion, MemoryError> {
        let key = history::key(&scope.key(), version);
        match self.store.get(HISTORY_TREE, &key)? {
            Some(value) => parse_version(scope, &key, &value),
            None => Err(MemoryError::VersionNotFound { version }),
        }
    }

    /// Puts back the document of `version` as a new version (so a revert can be undone). Facts
    /// it brings back are no longer "forgotten": the user asked for them.
    pub fn revert(
        &self,
        scope: &MemoryScope,
        version: u64,
        source: &WriteSource,
    ) -> Result<Reverted, MemoryError> {
        let (document, (), written) =
            self.write(scope, source, Some(version), |doc, forgotten| {
                let restored = self.version(scope, version)?.document;
                let keys: HashSet<String> = restored
                    .facts
                    .iter()
                    .map(|f| normalize(&f.content))
                    .collect();
                forgotten.retain(|f| !keys.contains(f));
                *doc = restored;
                Ok(())
            })?;
        Ok(Reverted {
            document,
            version: written,
        })
    }

    /// Replaces the whole document (import), after validating it.
    pub fn replace(
        &self,
        scope: &MemoryScope,
        document: MemoryDocument,
        source: &WriteSource,
    ) -> Result<MemoryDocument, MemoryError> {
        document.validate().map_err(MemoryError::InvalidDocument)?;
        Ok(self
            .update(scope, source, |doc, _| {
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
        source: &WriteSource,
    ) -> Result<MemoryDocument, MemoryError> {
        Ok(self
            .update(scope, source, |doc, forgotten| {
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

    /// Confirms a fact learned from untrusted content, so it is injected from now on. `Ok(false)`:
    /// it needed no confirmation.
    pub fn confirm_fact(
        &self,
        scope: &MemoryScope,
        id: &str,
        source: &WriteSource,
    ) -> Result<(Fact, bool), MemoryError> {
        Ok(self
            .update(scope, source, |doc, _| {
                let fact = doc
                    .facts
                    .iter_mut()
                    .find(|f| f.id == id)
                    .ok_or_else(|| MemoryError::FactNotFound { id: id.to_string() })?;
                let pending = fact.is_unconfirmed();
                fact.confirm();
                Ok((fact.clone(), pending))
            })?
            .1)
    }

    /// Forgets everything: summaries and facts (all fact contents become forgotten). The
    /// history keeps the earlier versions, so this too can be reverted.
    pub fn clear(&self, scope: &MemoryScope, source: &WriteSource) -> Result<usize, MemoryError> {
        Ok(self
            .update(scope, source, |doc, forgotten| {
                let count = doc.facts.len();
                forgotten.extend(doc.facts.iter().map(|f| normalize(&f.content)));
                *doc = MemoryDocument::default();
                Ok(count)
            })?
            .1)
    }

    /// The compare-and-set loop behind every write: the record, its new version and the
    /// pruning of old versions go in one batch conditional on the record being unchanged.
    fn write<T>(
        &self,
        scope: &MemoryScope,
        source: &WriteSource,
        restores: Option<u64>,
        mut change: impl FnMut(&mut MemoryDocument, &mut Vec<String>) -> Result<T, MemoryError>,
    ) -> Result<(MemoryDocument, T, Option<u64>), MemoryError> {
        let key = scope.key();
        for _ in 0..CAS_ATTEMPTS {
            let (raw, mut record) = self.read(scope)?;
            let before = record.document.clone();
            let forgotten_before = record.forgotten.clone();
            let result = change(&mut record.document, &mut record.forgotten)?;
            let excess = record.forgotten.len().saturating_sub(MAX_FORGOTTEN);
            record.forgotten.drain(..excess);
            let changed = !history::same_content(&before, &record.document);
            if !changed {
                record.document.last_updated = before.last_updated.clone();
                if record.forgotten == forgotten_before {
                    return Ok((record.document, result, None));
                }
            }
            let mut ops = Vec::new();
            let mut written = None;
            if changed {
                record.document.last_updated = now();
                written = Some(self.add_version(
                    &key,
                    &mut record,
                    &before,
                    source,
                    restores,
                    &mut ops,
                )?);
            }
            let value = serde_json::to_vec(&record).map_err(|e| StoreError::Io(e.to_string()))?;
            ops.push(BatchOp::Put {
                tree: MEMORY_TREE,
                key: key.clone(),
                value,
            });
            let expect = Expect {
                tree: MEMORY_TREE,
                key: key.clone(),
                value: raw,
            };
            if self.store.apply_batch_if(&expect, ops)? {
                return Ok((record.document, result, written));
            }
        }
        Err(StoreError::Io(format!(
            "memory of {} changed {CAS_ATTEMPTS} times during one update; retry",
            scope.user_id
        ))
        .into())
    }

    /// Adds the puts of the new version (and of the document before history, the first time)
    /// and the deletes of versions past the limit to `ops`; returns the new version number.
    fn add_version(
        &self,
        key: &[u8],
        record: &mut Record,
        before: &MemoryDocument,
        source: &WriteSource,
        restores: Option<u64>,
        ops: &mut Vec<BatchOp>,
    ) -> Result<u64, MemoryError> {
        let limit = self.history_limit() as u64;
        let mut entries = Vec::new();
        if record.head == 0 && !before.is_empty() {
            let at = if before.last_updated.is_empty() {
                now()
            } else {
                before.last_updated.clone()
            };
            record.head = 1;
            entries.push(MemoryVersion {
                version: 1,
                at,
                source: WriteSource::Earlier,
                restores: None,
                changes: ChangeSummary::between(&MemoryDocument::default(), before),
                document: before.clone(),
            });
        }
        let version = record.head + 1;
        entries.push(MemoryVersion {
            version,
            at: record.document.last_updated.clone(),
            source: source.clone(),
            restores,
            changes: ChangeSummary::between(before, &record.document),
            document: record.document.clone(),
        });
        record.head = version;
        // Versions from `keep_from` on stay; everything older that may exist goes.
        let keep_from = (version + 1).saturating_sub(limit).max(1);
        for old in record.oldest.max(1)..keep_from {
            ops.push(BatchOp::Delete {
                tree: HISTORY_TREE,
                key: history::key(key, old),
            });
        }
        record.oldest = record.oldest.max(keep_from);
        for entry in entries.into_iter().filter(|e| e.version >= keep_from) {
            let value = serde_json::to_vec(&entry).map_err(|e| StoreError::Io(e.to_string()))?;
            ops.push(BatchOp::Put {
                tree: HISTORY_TREE,
                key: history::key(key, entry.version),
                value,
            });
        }
        Ok(version)
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

fn parse_version(
    scope: &MemoryScope,
    key: &[u8],
    value: &[u8],
) -> Result<MemoryVersion, MemoryError> {
    serde_json::from_slice(value).map_err(|e| {
        StoreError::Corrupt {
            key: format!(
                "{HISTORY_TREE}/{}/{}",
                scope.user_id,
                String::from_utf8_lossy(&key[key.len().saturating_sub(20)..])
            ),
            detail: e.to_string(),
        }
        .into()
    })
}

#[cfg(test)]
#[path = "repo_history_tests.rs"]
mod history_tests;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::document::{Fact, FactCategory};
    use antler_store::MemoryStore;

    fn repo() -> MemoryRepo {
        MemoryRepo::new(Arc::new(MemoryStore::new()))
    }

    fn add(repo: &MemoryRepo, scope: &MemoryScope, content: &str) -> String {
        let (doc, _) = repo
            .update(scope, &WriteSource::Import, |doc, _| {
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
        let error = repo
            .delete_fact(&scope, "fact_missing", &WriteSource::Import)
            .unwrap_err();
        assert!(matches!(error, MemoryError::FactNotFound { .. }));
        assert_eq!(repo.load(&scope).unwrap().facts[0].id, id);
    }

    #[test]
    fn deleted_facts_are_remembered_as_forgotten() {
        let repo = repo();
        let scope = MemoryScope::new("u", None);
        let id = add(&repo, &scope, "Lives in  Paris");
        repo.delete_fact(&scope, &id, &WriteSource::Import).unwrap();
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
            repo.replace(&scope, doc.clone(), &WriteSource::Import),
            Err(MemoryError::InvalidDocument(_))
        ));
        assert_eq!(repo.load(&scope).unwrap().facts[0].content, "old");
        doc.facts.pop();
        repo.replace(&scope, doc, &WriteSource::Import).unwrap();
        assert_eq!(repo.load(&scope).unwrap().facts[0].content, "new");
    }
}
