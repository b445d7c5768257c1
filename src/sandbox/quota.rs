//! Disk quotas: one thread's files (`/mnt/user-data`) and the whole data directory.
//!
//! Measuring walks a tree (one `lstat` per entry), so results are cached. A thread's usage is
//! walked once, then adjusted by the size change of every file-tool write; only a shell command
//! (which can write anything) marks it stale, and the next check walks it again. The data
//! directory's total is walked at most every [`DATA_DIR_REWALK`] and adjusted in between by
//! every thread's measured change. While a command runs, a watchdog re-walks the thread at an
//! interval that grows with the walk's cost (about 5% of one core at most) and reports a
//! breach, so the caller can kill the command's process group.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::config::SandboxConfig;
use crate::sandbox::SandboxError;

/// How long the data directory's walked total is trusted (kept current by deltas meanwhile).
const DATA_DIR_REWALK: Duration = Duration::from_secs(600);
/// First watchdog check after a command starts, and the shortest interval between checks.
const WATCH_MIN_INTERVAL: Duration = Duration::from_millis(200);
/// Longest interval between watchdog checks, however costly the walk.
const WATCH_MAX_INTERVAL: Duration = Duration::from_secs(5);
/// The watchdog waits this many times the last walk's duration, so walking costs ≤ 1/20 core.
const WATCH_COST_FACTOR: u32 = 20;
/// Per-file room a command keeps even at or over quota, so deleting and small edits still work.
const MIN_FILE_ROOM: u64 = 64 * 1024;
/// Cached thread entries kept before the cache is reset (each is one path and a number).
const MAX_CACHED_THREADS: usize = 10_000;

/// Which quota was passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaScope {
    /// `sandbox.thread_quota_mb`: this thread's workspace, uploads and outputs.
    Thread,
    /// `sandbox.data_dir_quota_mb`: every thread and the store.
    DataDir,
}

/// A quota passed (or about to be): how much is used and the limit, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaBreach {
    pub scope: QuotaScope,
    pub used: u64,
    pub limit: u64,
    /// Bytes a refused write would have added (0 when a command passed the quota).
    pub writing: u64,
}

impl std::fmt::Display for QuotaBreach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, key) = match self.scope {
            QuotaScope::Thread => (
                "this thread's files in /mnt/user-data",
                "sandbox.thread_quota_mb",
            ),
            QuotaScope::DataDir => (
                "the files of all threads on this server",
                "sandbox.data_dir_quota_mb",
            ),
        };
        let (used, limit) = (human_bytes(self.used), human_bytes(self.limit));
        if self.writing == 0 {
            write!(f, "{what} take {used}, over the {limit} quota ({key})")
        } else {
            write!(
                f,
                "{what} take {used}, and writing {} more would pass the {limit} quota ({key})",
                human_bytes(self.writing)
            )
        }
    }
}

/// `1536` → `1.5 KiB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The quotas of one provider's data directory, shared by all its sandboxes.
pub(crate) struct DiskQuota {
    data_dir: PathBuf,
    thread_limit: u64,
    data_dir_limit: u64,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    /// Keyed by the thread's user-data directory.
    threads: HashMap<PathBuf, Measured>,
    data_dir: Option<(u64, Instant)>,
}

#[derive(Clone, Copy)]
struct Measured {
    bytes: u64,
    /// Something we did not account for (a shell command) may have written since.
    stale: bool,
}

impl DiskQuota {
    pub(crate) fn new(data_dir: &Path, config: &SandboxConfig) -> Arc<Self> {
        let mib = |value: u64| value.saturating_mul(1024 * 1024);
        Arc::new(Self {
            data_dir: data_dir.to_path_buf(),
            thread_limit: mib(config.thread_quota_mb),
            data_dir_limit: mib(config.data_dir_quota_mb),
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The quota of the thread whose files live under `user_data`.
    pub(crate) fn thread(self: &Arc<Self>, user_data: &Path) -> ThreadQuota {
        ThreadQuota {
            quota: self.clone(),
            root: user_data.to_path_buf(),
        }
    }

    fn enabled(&self) -> bool {
        self.thread_limit > 0 || self.data_dir_limit > 0
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The data directory's total (walked when unknown or older than [`DATA_DIR_REWALK`]).
    fn data_dir_usage(&self) -> u64 {
        if let Some((bytes, at)) = self.cache().data_dir
            && at.elapsed() < DATA_DIR_REWALK
        {
            return bytes;
        }
        let bytes = disk_usage(&self.data_dir);
        self.cache().data_dir = Some((bytes, Instant::now()));
        bytes
    }
}

/// What a command may use: the usage ceilings the watchdog enforces and the room left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    thread_ceiling: u64,
    data_dir_ceiling: u64,
    /// Bytes a single file may reach (RLIMIT_FSIZE), `None` when no quota applies.
    pub(crate) file_room: Option<u64>,
}

/// One thread's view of the quotas. Every method but [`watch`](Self::watch) blocks on the
/// file system: call them from `spawn_blocking`.
#[derive(Clone)]
pub(crate) struct ThreadQuota {
    quota: Arc<DiskQuota>,
    root: PathBuf,
}

impl ThreadQuota {
    /// Whether `host_path` counts against this thread (extra mounts live elsewhere).
    pub(crate) fn covers(&self, host_path: &Path) -> bool {
        self.quota.enabled() && host_path.starts_with(&self.root)
    }

    /// Refuses a write that replaces `replaced` bytes with `added` bytes when it would pass a
    /// quota. A write that does not grow the files is always allowed, so a thread over quota
    /// can still shrink.
    pub(crate) fn check_write(&self, replaced: u64, added: u64) -> Result<(), SandboxError> {
        if !self.quota.enabled() || added <= replaced {
            return Ok(());
        }
        let growth = added - replaced;
        let thread = self.usage();
        if self.quota.thread_limit > 0 && thread + growth > self.quota.thread_limit {
            return Err(SandboxError::QuotaExceeded(QuotaBreach {
                scope: QuotaScope::Thread,
                used: thread,
                limit: self.quota.thread_limit,
                writing: growth,
            }));
        }
        if self.quota.data_dir_limit > 0 {
            let total = self.quota.data_dir_usage();
            if total + growth > self.quota.data_dir_limit {
                return Err(SandboxError::QuotaExceeded(QuotaBreach {
                    scope: QuotaScope::DataDir,
                    used: total,
                    limit: self.quota.data_dir_limit,
                    writing: growth,
                }));
            }
        }
        Ok(())
    }

    /// Books a write the caller made, without walking anything.
    pub(crate) fn record_write(&self, replaced: u64, added: u64) {
        if !self.quota.enabled() {
            return;
        }
        let mut cache = self.quota.cache();
        if let Some(measured) = cache.threads.get_mut(&self.root) {
            measured.bytes = (measured.bytes + added).saturating_sub(replaced);
        }
        if let Some((bytes, _)) = cache.data_dir.as_mut() {
            *bytes = (*bytes + added).saturating_sub(replaced);
        }
    }

    /// Marks the cached usage unknown (after a command that may have written anything).
    pub(crate) fn mark_stale(&self) {
        if let Some(measured) = self.quota.cache().threads.get_mut(&self.root) {
            measured.stale = true;
        }
    }

    /// [`Self::budget`] off the async threads (it may walk the thread's files).
    pub(crate) async fn budget_off_thread(&self) -> Result<Budget, SandboxError> {
        let quota = self.clone();
        tokio::task::spawn_blocking(move || quota.budget())
            .await
            .map_err(|e| SandboxError::Unavailable(format!("the quota check failed: {e}")))
    }

    /// The ceilings for a command starting now. A thread already over a quota may still run
    /// commands (that is how it deletes files), but they may not grow its usage further.
    pub(crate) fn budget(&self) -> Budget {
        if !self.quota.enabled() {
            return Budget {
                thread_ceiling: u64::MAX,
                data_dir_ceiling: u64::MAX,
                file_room: None,
            };
        }
        let thread = self.usage();
        let (thread_ceiling, thread_room) = ceiling(thread, self.quota.thread_limit);
        let (data_dir_ceiling, data_dir_room) = if self.quota.data_dir_limit > 0 {
            ceiling(self.quota.data_dir_usage(), self.quota.data_dir_limit)
        } else {
            (u64::MAX, u64::MAX)
        };
        Budget {
            thread_ceiling,
            data_dir_ceiling,
            file_room: Some(thread_room.min(data_dir_room).max(MIN_FILE_ROOM)),
        }
    }

    /// Walks the thread now, books the change (also into the data directory's total) and says
    /// whether `budget` is passed.
    pub(crate) fn measure(&self, budget: &Budget) -> Option<QuotaBreach> {
        let bytes = disk_usage(&self.root);
        let data_dir = {
            let mut cache = self.quota.cache();
            let before = cache.threads.get(&self.root).map(|m| m.bytes);
            if cache.threads.len() >= MAX_CACHED_THREADS {
                cache.threads.clear();
            }
            cache.threads.insert(
                self.root.clone(),
                Measured {
                    bytes,
                    stale: false,
                },
            );
            match (cache.data_dir.as_mut(), before) {
                (Some((total, _)), Some(before)) => {
                    *total = (*total + bytes).saturating_sub(before);
                    Some(*total)
                }
                (Some((total, _)), None) => Some(*total),
                (None, _) => None,
            }
        };
        if bytes > budget.thread_ceiling {
            return Some(QuotaBreach {
                scope: QuotaScope::Thread,
                used: bytes,
                limit: self.quota.thread_limit,
                writing: 0,
            });
        }
        match data_dir {
            Some(total) if total > budget.data_dir_ceiling => Some(QuotaBreach {
                scope: QuotaScope::DataDir,
                used: total,
                limit: self.quota.data_dir_limit,
                writing: 0,
            }),
            _ => None,
        }
    }

    /// Resolves once a check finds `budget` passed; never resolves when no quota applies.
    pub(crate) async fn watch(self, budget: Budget) -> QuotaBreach {
        if budget.file_room.is_none() {
            return std::future::pending().await;
        }
        let mut interval = WATCH_MIN_INTERVAL;
        loop {
            tokio::time::sleep(interval).await;
            let started = Instant::now();
            let quota = self.clone();
            match tokio::task::spawn_blocking(move || quota.measure(&budget)).await {
                Ok(Some(breach)) => return breach,
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "A disk quota check did not finish"),
            }
            interval = (started.elapsed() * WATCH_COST_FACTOR)
                .clamp(WATCH_MIN_INTERVAL, WATCH_MAX_INTERVAL);
        }
    }

    /// The thread's usage: cached, or walked when unknown or stale.
    fn usage(&self) -> u64 {
        match self.quota.cache().threads.get(&self.root) {
            Some(measured) if !measured.stale => return measured.bytes,
            _ => {}
        }
        let unlimited = Budget {
            thread_ceiling: u64::MAX,
            data_dir_ceiling: u64::MAX,
            file_room: None,
        };
        self.measure(&unlimited);
        self.quota
            .cache()
            .threads
            .get(&self.root)
            .map_or(0, |m| m.bytes)
    }
}

/// The ceiling for a command starting at `used` under `limit` (0 = none), and the room left.
fn ceiling(used: u64, limit: u64) -> (u64, u64) {
    if limit == 0 {
        (u64::MAX, u64::MAX)
    } else {
        (used.max(limit), limit.saturating_sub(used))
    }
}

/// Bytes a tree takes: per entry the larger of its length and its allocated blocks, so sparse
/// files count at their apparent size and empty directories at their blocks. Symlinks are not
/// followed; unreadable entries count as nothing.
pub(crate) fn disk_usage(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| {
            let blocks = meta.blocks().saturating_mul(512);
            if meta.is_file() {
                meta.len().max(blocks)
            } else {
                blocks
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(dir: &Path, thread_mb: u64, data_dir_mb: u64) -> (Arc<DiskQuota>, ThreadQuota) {
        let config = SandboxConfig {
            thread_quota_mb: thread_mb,
            data_dir_quota_mb: data_dir_mb,
            ..Default::default()
        };
        let quota = DiskQuota::new(dir, &config);
        let root = dir.join("users/u/threads/t/user-data");
        std::fs::create_dir_all(&root).unwrap();
        let thread = quota.thread(&root);
        (quota, thread)
    }

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn writes_are_refused_past_the_thread_quota_and_booked_without_walking() {
        let tmp = tempfile::tempdir().unwrap();
        let (_quota, thread) = quota(tmp.path(), 1, 0);
        let file = thread.root.join("a.bin");
        std::fs::write(&file, vec![0u8; 600 * 1024]).unwrap();
        thread.check_write(0, 100 * 1024).unwrap();
        let Err(SandboxError::QuotaExceeded(breach)) = thread.check_write(0, 500 * 1024) else {
            panic!("a write past the quota must be refused");
        };
        assert_eq!(breach.scope, QuotaScope::Thread);
        assert_eq!(breach.limit, MIB);
        let text = SandboxError::QuotaExceeded(breach).to_string();
        assert!(text.contains("sandbox.thread_quota_mb"), "{text}");
        assert!(
            text.contains("writing 500.0 KiB more would pass the 1.0 MiB quota"),
            "{text}"
        );
        assert!(text.contains("Delete files"), "{text}");
        assert!(!text.contains(&tmp.path().display().to_string()), "{text}");
        // Replacing the big file with a small one shrinks, which is always allowed.
        thread.check_write(600 * 1024, 10).unwrap();
        // Booked writes move the cached figure; no walk sees the file that is not written.
        thread.record_write(0, 400 * 1024);
        assert!(thread.check_write(0, 100 * 1024).is_err());
        thread.record_write(600 * 1024, 0);
        thread.check_write(0, 100 * 1024).unwrap();
    }

    #[test]
    fn stale_usage_is_walked_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (_quota, thread) = quota(tmp.path(), 1, 0);
        thread.check_write(0, 900 * 1024).unwrap();
        std::fs::write(thread.root.join("b.bin"), vec![1u8; 900 * 1024]).unwrap();
        thread
            .check_write(0, 900 * 1024)
            .unwrap_or_else(|e| panic!("the cache does not know about the unbooked file yet: {e}"));
        thread.mark_stale();
        assert!(thread.check_write(0, 900 * 1024).is_err());
    }

    #[test]
    fn the_data_dir_quota_counts_everything_under_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (_quota, thread) = quota(tmp.path(), 0, 16);
        std::fs::create_dir_all(tmp.path().join("store")).unwrap();
        std::fs::write(tmp.path().join("store/db"), vec![0u8; 15 * MIB as usize]).unwrap();
        let Err(SandboxError::QuotaExceeded(breach)) = thread.check_write(0, 2 * MIB) else {
            panic!("the store's bytes count against the data dir quota");
        };
        assert_eq!(breach.scope, QuotaScope::DataDir);
        assert!(breach.to_string().contains("sandbox.data_dir_quota_mb"));
    }

    #[test]
    fn budgets_let_a_thread_over_quota_shrink_but_not_grow() {
        let tmp = tempfile::tempdir().unwrap();
        let (_quota, thread) = quota(tmp.path(), 1, 0);
        let under = thread.budget();
        assert_eq!(under.thread_ceiling, MIB);
        assert!(under.file_room.unwrap() > MIB / 2);
        std::fs::write(thread.root.join("big"), vec![0u8; 2 * MIB as usize]).unwrap();
        thread.mark_stale();
        let over = thread.budget();
        assert!(over.thread_ceiling >= 2 * MIB);
        assert_eq!(over.file_room, Some(MIN_FILE_ROOM));
        assert_eq!(thread.measure(&over), None, "no growth, no breach");
        std::fs::write(thread.root.join("more"), vec![0u8; 100 * 1024]).unwrap();
        let breach = thread
            .measure(&over)
            .expect("growth past the start is a breach");
        assert_eq!(breach.scope, QuotaScope::Thread);
    }

    #[test]
    fn no_quota_means_no_walks_and_no_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let (quota, thread) = quota(tmp.path(), 0, 0);
        thread.check_write(0, u64::MAX / 2).unwrap();
        assert_eq!(thread.budget().file_room, None);
        assert!(quota.cache().threads.is_empty());
        assert!(!thread.covers(&thread.root.join("x")));
    }

    #[test]
    fn bytes_read_like_a_person_writes_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1024 * MIB), "1.0 GiB");
    }
}
