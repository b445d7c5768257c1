//! A bounded cache of parsed agents (config and SOUL.md), checked against the files' identity
//! (inode, size, modification time) on every read, so an edit by hand, by the CLI in another
//! process or by a revert is seen at once; a read costs two `stat`s instead of two reads and a
//! YAML parse.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use antler_store::lru::Lru;

/// Agents kept unless configured (`cache.agents`).
pub const DEFAULT_CACHED_AGENTS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    len: u64,
    modified_ns: i128,
}

/// The identity of an agent's two files (`None`: missing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp([Option<FileStamp>; 2]);

/// The stamp of `files` (config, soul) in `dir`.
pub(crate) fn stamp(dir: &Path, files: [&str; 2]) -> Stamp {
    let file = |name: &str| {
        let meta = std::fs::metadata(dir.join(name)).ok()?;
        Some(FileStamp {
            inode: meta.ino(),
            len: meta.len(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    };
    Stamp([file(files[0]), file(files[1])])
}

/// Parsed agents by directory.
pub(crate) struct AgentCache<V> {
    lru: Mutex<Lru<PathBuf, (Stamp, V)>>,
}

impl<V: Clone> AgentCache<V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            lru: Mutex::new(Lru::new(capacity)),
        }
    }

    /// The agent parsed from `dir` when its files still have `stamp`.
    pub(crate) fn get(&self, dir: &Path, stamp: Stamp) -> Option<V> {
        let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
        match lru.get(dir) {
            Some((cached, agent)) if *cached == stamp => Some(agent.clone()),
            _ => None,
        }
    }

    pub(crate) fn put(&self, dir: &Path, stamp: Stamp, agent: V) {
        let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
        lru.insert(dir.to_path_buf(), (stamp, agent), 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_misses_and_the_cache_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let files = ["config.yaml", "SOUL.md"];
        std::fs::write(dir.path().join("config.yaml"), "a: 1").unwrap();
        let cache = AgentCache::new(1);
        let first = stamp(dir.path(), files);
        cache.put(dir.path(), first, "parsed");
        assert_eq!(
            cache.get(dir.path(), stamp(dir.path(), files)),
            Some("parsed")
        );
        // An atomic replace (what every write does) is a new inode.
        std::fs::write(dir.path().join("new"), "a: 22").unwrap();
        std::fs::rename(dir.path().join("new"), dir.path().join("config.yaml")).unwrap();
        assert_ne!(stamp(dir.path(), files), first);
        assert_eq!(cache.get(dir.path(), stamp(dir.path(), files)), None);
        let other = tempfile::tempdir().unwrap();
        cache.put(other.path(), stamp(other.path(), files), "other");
        assert_eq!(
            cache.get(dir.path(), first),
            None,
            "capacity 1 keeps one agent"
        );
    }
}
