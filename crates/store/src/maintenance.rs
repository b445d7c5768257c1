//! Store upkeep: sizes per user and per thread (`antler store stats`) and retention (records
//! a later one superseded, older than `store.retention_days`, are dropped; the state the head
//! describes is always kept).

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};

use crate::log::{self, HEADS, Head, LOG};
use crate::threads::{THREADS, ThreadError, ThreadRecord, decode};
use crate::{BatchOp, ThreadStore};

/// One thread's footprint in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStats {
    pub thread_id: String,
    pub user_id: String,
    pub title: Option<String>,
    pub updated_at: DateTime<Utc>,
    /// Live messages (from the head).
    pub messages: u64,
    /// Log records, superseded ones included.
    pub records: u64,
    /// Keys and values of the record, the head and the log.
    pub bytes: u64,
}

/// What `antler store stats` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Largest first.
    pub threads: Vec<ThreadStats>,
    /// The store's files on disk, when the backend knows (sled).
    pub disk_bytes: Option<u64>,
}

impl StoreStats {
    /// Per user: (threads, messages, bytes), by user id.
    pub fn per_user(&self) -> BTreeMap<&str, (u64, u64, u64)> {
        let mut users: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
        for thread in &self.threads {
            let user = users.entry(thread.user_id.as_str()).or_default();
            user.0 += 1;
            user.1 += thread.messages;
            user.2 += thread.bytes;
        }
        users
    }
}

impl fmt::Display for StoreStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.threads.iter().map(|t| t.bytes).sum();
        write!(
            f,
            "{} threads, {} of records",
            self.threads.len(),
            size(total)
        )?;
        if let Some(disk) = self.disk_bytes {
            write!(f, ", {} on disk", size(disk))?;
        }
        writeln!(
            f,
            "\n\n{:<24} {:>8} {:>10} {:>12}",
            "user", "threads", "messages", "size"
        )?;
        for (user, (threads, messages, bytes)) in self.per_user() {
            let user = if user.is_empty() { "(none)" } else { user };
            writeln!(
                f,
                "{user:<24} {threads:>8} {messages:>10} {:>12}",
                size(bytes)
            )?;
        }
        writeln!(
            f,
            "\n{:<38} {:<20} {:>8} {:>8} {:>12}  {:<20} title",
            "thread", "user", "messages", "records", "size", "updated"
        )?;
        for t in &self.threads {
            writeln!(
                f,
                "{:<38} {:<20} {:>8} {:>8} {:>12}  {:<20} {}",
                t.thread_id,
                t.user_id,
                t.messages,
                t.records,
                size(t.bytes),
                t.updated_at.format("%Y-%m-%d %H:%M:%S"),
                t.title.as_deref().unwrap_or("")
            )?;
        }
        Ok(())
    }
}

/// `1.5 MiB`-style sizes.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// What retention dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub threads: u64,
    pub records: u64,
    pub bytes: u64,
}

impl ThreadStore {
    /// Sizes of every thread (reads every log; meant for the CLI, not for a request path).
    pub fn stats(&self) -> Result<StoreStats, ThreadError> {
        let store = self.store();
        let mut threads = Vec::new();
        for (key, value) in store.scan_prefix(THREADS, b"")? {
            let record: ThreadRecord = decode(&key, &value)?;
            let id = record.thread_id.as_str();
            let mut bytes = (key.len() + value.len()) as u64;
            let mut messages = 0;
            if let Some(head) = store.get(HEADS, id.as_bytes())? {
                bytes += (id.len() + head.len()) as u64;
                messages = decode::<Head>(id.as_bytes(), &head)?.messages;
            }
            let log = store.scan_prefix(LOG, &log::prefix(id))?;
            bytes += log
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>();
            threads.push(ThreadStats {
                thread_id: record.thread_id,
                user_id: record.user_id,
                title: record.title,
                updated_at: record.updated_at,
                messages,
                records: log.len() as u64,
                bytes,
            });
        }
        threads.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.thread_id.cmp(&b.thread_id)));
        Ok(StoreStats {
            threads,
            disk_bytes: None,
        })
    }

    /// Drops the log records that no longer shape any thread's state and are older than `days`
    /// days. The folded states stay exactly as they were (cached ones included).
    pub fn apply_retention(&self, days: u32) -> Result<RetentionReport, ThreadError> {
        let cutoff = Utc::now().timestamp() - i64::from(days) * 86_400;
        self.drop_superseded_before(cutoff)
    }

    pub(crate) fn drop_superseded_before(
        &self,
        cutoff: i64,
    ) -> Result<RetentionReport, ThreadError> {
        let store = self.store();
        let mut report = RetentionReport::default();
        for (thread_id, _) in store.scan_prefix(HEADS, b"")? {
            let thread_id = String::from_utf8_lossy(&thread_id).into_owned();
            let records = store.scan_prefix(LOG, &log::prefix(&thread_id))?;
            let doomed = log::superseded_before(&records, cutoff).map_err(|(key, e)| {
                ThreadError::Store(crate::StoreError::Corrupt {
                    key: String::from_utf8_lossy(&key).replace('\0', "/"),
                    detail: e.to_string(),
                })
            })?;
            if doomed.is_empty() {
                continue;
            }
            report.threads += 1;
            report.records += doomed.len() as u64;
            let sizes: BTreeMap<Vec<u8>, usize> = records
                .into_iter()
                .map(|(k, v)| {
                    let len = k.len() + v.len();
                    (k, len)
                })
                .collect();
            let ops: Vec<BatchOp> = doomed
                .into_iter()
                .map(|seq| {
                    let key = log::key(&thread_id, seq);
                    report.bytes += sizes.get(&key).copied().unwrap_or(0) as u64;
                    BatchOp::Delete { tree: LOG, key }
                })
                .collect();
            store.apply_batch(ops)?;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_a_person_writes_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
    }
}
