//! Per-skill records in the store's `skills` tree: whether a skill is enabled (absent ⇒
//! enabled) and, for installed skills, the archive's SHA-256.
//!
//! Public skills have one record for everyone (`public/{name}`, changed by admins); a user's
//! custom skills have theirs (`custom/{user}/{name}`). Kept in the store rather than a config
//! file so enabling a skill never races the config watcher and needs no file locking.

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use antler_store::{BatchOp, Expect, StoreError, StoreRef};

const TREE: &str = "skills";

/// What is recorded about one skill.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillRecord {
    /// `None` until someone changes it: a skill is enabled by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Hex SHA-256 of the archive the skill was installed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Whose record: the shared one of a public skill, or a user's custom skill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKey<'a> {
    Public(&'a str),
    Custom { user: &'a str, name: &'a str },
}

impl RecordKey<'_> {
    fn bytes(&self) -> Vec<u8> {
        match self {
            RecordKey::Public(name) => format!("public/{name}").into_bytes(),
            RecordKey::Custom { user, name } => format!("custom/{user}/{name}").into_bytes(),
        }
    }
}

/// A set of records read together by [`SkillStates::scope`].
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    Public,
    Custom { user: &'a str },
}

impl Scope<'_> {
    fn prefix(&self) -> String {
        match self {
            Scope::Public => "public/".into(),
            Scope::Custom { user } => format!("custom/{user}/"),
        }
    }
}

/// A record this version cannot read is treated as absent (enabled), never fatal.
fn parse(bytes: &[u8]) -> SkillRecord {
    serde_json::from_slice(bytes).unwrap_or_else(|error| {
        tracing::warn!(%error, "Unreadable skill record; treating the skill as enabled");
        SkillRecord::default()
    })
}

/// The `skills` tree.
#[derive(Clone)]
pub struct SkillStates {
    store: StoreRef,
}

impl SkillStates {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    pub fn get(&self, key: RecordKey<'_>) -> Result<SkillRecord, StoreError> {
        Ok(self
            .store
            .get(TREE, &key.bytes())?
            .map_or_else(SkillRecord::default, |bytes| parse(&bytes)))
    }

    /// Every record of one scope (the public skills, or one user's custom skills) by skill
    /// name, in one read: listing a user's skills is one range read per scope, not one read
    /// per skill (a round trip each on a database).
    pub fn scope(&self, scope: Scope<'_>) -> Result<HashMap<String, SkillRecord>, StoreError> {
        let prefix = scope.prefix();
        Ok(self
            .store
            .scan_prefix(TREE, prefix.as_bytes())?
            .into_iter()
            .filter_map(|(key, bytes)| {
                let name = std::str::from_utf8(&key).ok()?.strip_prefix(&prefix)?;
                // `custom/{user}/` must not take in a longer user id's records.
                (!name.contains('/')).then(|| (name.to_string(), parse(&bytes)))
            })
            .collect())
    }

    /// Changes a record with a compare-and-set, so two daemons changing one skill at once both
    /// land (the loser reads the winner's record and applies its change again).
    pub fn update(
        &self,
        key: RecordKey<'_>,
        mut change: impl FnMut(&mut SkillRecord),
    ) -> Result<SkillRecord, StoreError> {
        let key_bytes = key.bytes();
        loop {
            let stored = self.store.get(TREE, &key_bytes)?;
            let mut record = stored.as_deref().map_or_else(SkillRecord::default, parse);
            change(&mut record);
            let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Corrupt {
                key: String::from_utf8_lossy(&key_bytes).into_owned(),
                detail: e.to_string(),
            })?;
            let expect = Expect {
                tree: TREE,
                key: key_bytes.clone(),
                value: stored,
            };
            let put = BatchOp::Put {
                tree: TREE,
                key: key_bytes.clone(),
                value: bytes,
            };
            if self.store.apply_batch_if(&expect, vec![put])? {
                return Ok(record);
            }
        }
    }

    pub fn remove(&self, key: RecordKey<'_>) -> Result<(), StoreError> {
        self.store.delete(TREE, &key.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_default_to_enabled_and_keep_their_scope() {
        let states = SkillStates::new(std::sync::Arc::new(antler_store::MemoryStore::new()));
        let alice = RecordKey::Custom {
            user: "alice",
            name: "x",
        };
        assert_eq!(states.get(alice).unwrap(), SkillRecord::default());
        states.update(alice, |r| r.enabled = Some(false)).unwrap();
        assert_eq!(states.get(alice).unwrap().enabled, Some(false));
        let bob = RecordKey::Custom {
            user: "bob",
            name: "x",
        };
        assert_eq!(states.get(bob).unwrap().enabled, None);
        assert_eq!(states.get(RecordKey::Public("x")).unwrap().enabled, None);
        states
            .update(RecordKey::Public("y"), |r| r.enabled = Some(false))
            .unwrap();
        let alicia = RecordKey::Custom {
            user: "alice/x",
            name: "z",
        };
        states.update(alicia, |r| r.enabled = Some(false)).unwrap();
        let custom = states.scope(Scope::Custom { user: "alice" }).unwrap();
        assert_eq!(custom.keys().collect::<Vec<_>>(), ["x"]);
        let public = states.scope(Scope::Public).unwrap();
        assert_eq!(public.get("y").and_then(|r| r.enabled), Some(false));
        states.remove(alice).unwrap();
        assert_eq!(states.get(alice).unwrap(), SkillRecord::default());
    }
}
