//! Atomic file writes and the bounded version history kept beside each agent's files.
//!
//! A version is a directory `history/{id}/` holding copies of the files as they were just before
//! they were overwritten, plus `version.json` with the time it was archived and, when known, who
//! wrote those files and what their write changed (`custom_agents::authorship`). Ids are
//! zero-padded sequence numbers, so lexical order is chronological order.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::custom_agents::authorship::{VersionAuthor, WriteRecord};
pub(crate) use crate::custom_agents::durable::{
    hash_file, read_optional, sync_dir, write_atomic, write_synced,
};

/// Width of a version id (`000042`).
const ID_WIDTH: usize = 6;
const VERSION_META: &str = "version.json";

/// One archived version of an agent's files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub id: String,
    /// When this version was archived, i.e. when a later write replaced it.
    pub created_at: DateTime<Utc>,
    /// SHA-256 (hex) of the archived SOUL.md, if the version has one.
    pub soul_sha256: Option<String>,
    /// SHA-256 (hex) of the archived config.yaml, if the version has one.
    pub config_sha256: Option<String>,
    /// Who wrote these files; `None` ("unknown") for versions archived before authors were
    /// recorded, and for files changed outside Antler.
    #[serde(default)]
    pub author: Option<VersionAuthor>,
    /// When these files were written (`created_at` is when they were replaced).
    #[serde(default)]
    pub written_at: Option<DateTime<Utc>>,
    /// What their write changed, in one line ("SOUL.md +12/−3 lines; config: model changed").
    #[serde(default)]
    pub summary: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct VersionMeta {
    created_at: DateTime<Utc>,
    /// The record the write of these files left, when it still described them.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    written: Option<WriteRecord>,
}

/// The history directory of one set of versioned files.
pub(crate) struct History {
    dir: PathBuf,
    limit: usize,
}

impl History {
    pub(crate) fn new(dir: PathBuf, limit: usize) -> Self {
        Self { dir, limit }
    }

    /// Copies the given files (skipping absent ones) into a new version, with the record of
    /// their write when known, and prunes the oldest beyond the limit. Returns the new id, or
    /// `None` when there was nothing to archive.
    pub(crate) fn archive(
        &self,
        files: &[(&str, Option<&[u8]>)],
        written: Option<WriteRecord>,
        now: DateTime<Utc>,
    ) -> std::io::Result<Option<String>> {
        if self.limit == 0 || files.iter().all(|(_, bytes)| bytes.is_none()) {
            return Ok(None);
        }
        std::fs::create_dir_all(&self.dir)?;
        let id = self.next_id()?;
        // Build the version in a hidden temp dir and rename it into place, so a crash never
        // leaves a half-written version that would later be "restored".
        let staging = self
            .dir
            .join(format!(".staging-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir(&staging)?;
        let result = (|| {
            for (name, bytes) in files {
                if let Some(bytes) = bytes {
                    write_synced(&staging.join(name), bytes)?;
                }
            }
            let meta = serde_json::to_vec(&VersionMeta {
                created_at: now,
                written,
            })?;
            write_synced(&staging.join(VERSION_META), &meta)?;
            std::fs::rename(&staging, self.dir.join(&id))
        })();
        if let Err(error) = result {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(error);
        }
        sync_dir(&self.dir);
        self.prune()?;
        Ok(Some(id))
    }

    /// Versions, oldest first.
    pub(crate) fn list(&self, files: (&str, &str)) -> std::io::Result<Vec<VersionInfo>> {
        let mut versions = Vec::new();
        for (_, id) in self.ids()? {
            let dir = self.dir.join(&id);
            let meta = std::fs::read(dir.join(VERSION_META))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<VersionMeta>(&bytes).ok());
            let created_at = meta
                .as_ref()
                .map_or(DateTime::<Utc>::UNIX_EPOCH, |meta| meta.created_at);
            let written = meta.and_then(|meta| meta.written);
            versions.push(VersionInfo {
                soul_sha256: hash_file(&dir.join(files.0))?,
                config_sha256: hash_file(&dir.join(files.1))?,
                id,
                created_at,
                author: written.as_ref().and_then(|w| w.author.clone()),
                written_at: written.as_ref().map(|w| w.written_at),
                summary: written.map(|w| w.summary),
            });
        }
        Ok(versions)
    }

    /// The archived bytes of one file of a version; `Ok(None)` if the version lacks it.
    pub(crate) fn read(&self, id: &str, file: &str) -> std::io::Result<Option<Vec<u8>>> {
        read_optional(&self.dir.join(id).join(file))
    }

    /// The id the next archived version gets: the one the files in place will be kept as.
    pub(crate) fn next_id(&self) -> std::io::Result<String> {
        let next = self.ids()?.last().map_or(1, |(seq, _)| seq + 1);
        Ok(format!("{next:0ID_WIDTH$}"))
    }

    pub(crate) fn exists(&self, id: &str) -> bool {
        is_version_id(id) && self.dir.join(id).is_dir()
    }

    /// Existing version ids with their sequence numbers, ascending.
    fn ids(&self) -> std::io::Result<Vec<(u64, String)>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if is_version_id(&name)
                && let Ok(seq) = name.parse::<u64>()
            {
                ids.push((seq, name));
            }
        }
        ids.sort();
        Ok(ids)
    }

    fn prune(&self) -> std::io::Result<()> {
        let ids = self.ids()?;
        let excess = ids.len().saturating_sub(self.limit);
        for (_, id) in ids.into_iter().take(excess) {
            std::fs::remove_dir_all(self.dir.join(id))?;
        }
        Ok(())
    }
}

/// A version id is all digits; checked before it is joined onto a path.
pub(crate) fn is_version_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custom_agents::durable::sha256_hex;

    #[test]
    fn archive_lists_and_prunes_to_the_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let history = History::new(tmp.path().join("history"), 3);
        for i in 0..5u8 {
            let soul = [b'a' + i];
            history
                .archive(
                    &[("SOUL.md", Some(&soul)), ("config.yaml", None)],
                    None,
                    Utc::now(),
                )
                .unwrap();
        }
        let versions = history.list(("SOUL.md", "config.yaml")).unwrap();
        let ids: Vec<_> = versions.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["000003", "000004", "000005"]);
        assert_eq!(
            versions[0].soul_sha256.as_deref(),
            Some(sha256_hex(b"c").as_str())
        );
        assert_eq!(versions[0].config_sha256, None);
        assert_eq!(
            history.read("000005", "SOUL.md").unwrap(),
            Some(b"e".to_vec())
        );
        assert!(!history.exists("../x") && !history.exists("000001"));
    }

    #[test]
    fn atomic_write_leaves_no_temp_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("SOUL.md");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
