//! Per-skill records in the store's `skills` tree: whether a skill is enabled (absent ⇒
//! enabled) and, for installed skills, the archive's SHA-256.
//!
//! Public skills have one record for everyone (`public/{name}`, changed by admins); a user's
//! custom skills have theirs (`custom/{user}/{name}`). Kept in the store rather than a config
//! file so enabling a skill never races the config watcher and needs no file locking.

use serde::{Deserialize, Serialize};

use antler_store::{StoreError, StoreRef};

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
        let Some(bytes) = self.store.get(TREE, &key.bytes())? else {
            return Ok(SkillRecord::default());
        };
        // A record this version cannot read is treated as absent (enabled), never fatal.
        Ok(serde_json::from_slice(&bytes).unwrap_or_else(|error| {
            tracing::warn!(%error, "Unreadable skill record; treating the skill as enabled");
            SkillRecord::default()
        }))
    }

    pub fn update(
        &self,
        key: RecordKey<'_>,
        change: impl FnOnce(&mut SkillRecord),
    ) -> Result<SkillRecord, StoreError> {
        let mut record = self.get(key)?;
        change(&mut record);
        let bytes = serde_json::to_vec(&record).map_err(|e| StoreError::Corrupt {
            key: String::from_utf8_lossy(&key.bytes()).into_owned(),
            detail: e.to_string(),
        })?;
        self.store.put(TREE, &key.bytes(), &bytes)?;
        Ok(record)
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
        states.remove(alice).unwrap();
        assert_eq!(states.get(alice).unwrap(), SkillRecord::default());
    }
}
