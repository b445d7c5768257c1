//! The per-user record of running daemons, so the CLI finds one from any directory.
//!
//! A daemon's socket lives in its data dir, which the CLI knows only from a config; run from
//! another directory, on the embedded default, it looked in the wrong place. So each daemon
//! also writes `{runtime dir}/daemon-{hash of its data dir}.json` once it serves (pid, socket,
//! data dir, config file, listen address) and removes it on a clean stop. The runtime dir is
//! `$XDG_RUNTIME_DIR/antler`, else `~/.local/state/antler` (mode 0700, records 0600: the
//! socket they point to is the owner's alone anyway). One record per data dir lets several
//! daemons run side by side. A record a crash left behind is stale: readers check that its
//! socket answers, and delete records whose process is gone.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::EnvSource;

/// What a running daemon says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonRecord {
    pub pid: u32,
    pub socket: PathBuf,
    pub data_dir: PathBuf,
    /// The config file it started with; `None`: the embedded default.
    pub config: Option<PathBuf>,
    /// The address it listens on (as bound: the real port when the config said 0).
    pub listen: String,
}

/// Where this user's daemons are recorded: `$XDG_RUNTIME_DIR/antler`, else
/// `$HOME/.local/state/antler`; `None` without either (nothing is recorded then).
pub fn runtime_dir(env: &dyn EnvSource) -> Option<PathBuf> {
    let absolute = |name: &str| {
        env.get(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    if let Some(dir) = absolute("XDG_RUNTIME_DIR") {
        return Some(dir.join("antler"));
    }
    absolute("HOME").map(|home| home.join(".local/state/antler"))
}

/// The record of the daemon of `data_dir` in `dir`.
pub fn record_path(dir: &Path, data_dir: &Path) -> PathBuf {
    let digest = Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
    dir.join(format!("daemon-{}.json", &hex::encode(digest)[..16]))
}

/// A record this process wrote; dropping it removes the file unless another daemon has
/// replaced it since (the same data dir, started after this one lost it).
#[derive(Debug)]
pub struct RecordFile {
    path: PathBuf,
    pid: u32,
}

impl RecordFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RecordFile {
    fn drop(&mut self) {
        let ours = read_record(&self.path).is_some_and(|record| record.pid == self.pid);
        if ours && let Err(error) = std::fs::remove_file(&self.path) {
            tracing::warn!(%error, path = %self.path.display(), "Could not remove the daemon's runtime record");
        }
    }
}

/// Writes `record` (atomically: a reader never sees half of it) into the runtime dir of `env`.
pub fn publish(env: &dyn EnvSource, record: &DaemonRecord) -> std::io::Result<Option<RecordFile>> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let Some(dir) = runtime_dir(env) else {
        return Ok(None);
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let path = record_path(&dir, &record.data_dir);
    let staging = dir.join(format!(".daemon-{}.tmp", record.pid));
    let text = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&staging)?;
    file.write_all(&text)?;
    drop(file);
    std::fs::rename(&staging, &path)?;
    Ok(Some(RecordFile {
        path,
        pid: record.pid,
    }))
}

/// Every record in `dir` whose process still exists, deleting the others; sorted by data dir.
/// Whether each daemon answers is for the caller to check (its socket).
pub fn live_records(dir: &Path) -> Vec<DaemonRecord> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("daemon-") && name.ends_with(".json")) {
            continue;
        }
        let path = entry.path();
        match read_record(&path) {
            Some(record) if process_exists(record.pid) => records.push(record),
            // Left by a crash (or unreadable): nothing will ever answer for it.
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    records.sort_by(|a, b| a.data_dir.cmp(&b.data_dir));
    records
}

fn read_record(path: &Path) -> Option<DaemonRecord> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether a process with `pid` exists (Linux's `/proc`; elsewhere, assume it does and let the
/// socket decide).
fn process_exists(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// `path` with symlinks and `..` resolved, so two spellings of one file compare equal.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MapEnv;
    use std::os::unix::fs::PermissionsExt;

    fn record(data_dir: &Path, pid: u32) -> DaemonRecord {
        DaemonRecord {
            pid,
            socket: data_dir.join("antler.sock"),
            data_dir: data_dir.to_path_buf(),
            config: None,
            listen: "127.0.0.1:8787".into(),
        }
    }

    #[test]
    fn the_runtime_dir_follows_xdg_then_home() {
        let env = MapEnv::new()
            .with("XDG_RUNTIME_DIR", "/run/user/7")
            .with("HOME", "/home/u");
        assert_eq!(runtime_dir(&env), Some(PathBuf::from("/run/user/7/antler")));
        let env = MapEnv::new()
            .with("XDG_RUNTIME_DIR", "relative")
            .with("HOME", "/home/u");
        assert_eq!(
            runtime_dir(&env),
            Some(PathBuf::from("/home/u/.local/state/antler"))
        );
        assert_eq!(runtime_dir(&MapEnv::new()), None);
    }

    #[test]
    fn records_are_private_one_per_data_dir_and_removed_when_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let env = MapEnv::new().with("XDG_RUNTIME_DIR", tmp.path().to_string_lossy());
        let dir = runtime_dir(&env).unwrap();
        let me = std::process::id();
        let a = publish(&env, &record(Path::new("/srv/a"), me))
            .unwrap()
            .unwrap();
        let b = publish(&env, &record(Path::new("/srv/b"), me))
            .unwrap()
            .unwrap();
        assert_ne!(a.path(), b.path());
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(a.path()), 0o600);
        let live = live_records(&dir);
        assert_eq!(
            live,
            [
                record(Path::new("/srv/a"), me),
                record(Path::new("/srv/b"), me)
            ]
        );
        drop(a);
        assert_eq!(live_records(&dir), [record(Path::new("/srv/b"), me)]);
        // Another daemon took b's data dir over: b's drop leaves its record alone.
        std::fs::write(
            b.path(),
            serde_json::to_vec(&record(Path::new("/srv/b"), me + 1)).unwrap(),
        )
        .unwrap();
        let path = b.path().to_path_buf();
        drop(b);
        assert!(path.exists());
    }

    #[test]
    fn records_of_gone_processes_are_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        // Above any pid_max: no such process.
        let gone = record(Path::new("/srv/gone"), 4_999_999);
        let path = record_path(tmp.path(), &gone.data_dir);
        std::fs::write(&path, serde_json::to_vec(&gone).unwrap()).unwrap();
        std::fs::write(tmp.path().join("daemon-garbage.json"), "not json").unwrap();
        assert!(live_records(tmp.path()).is_empty());
        assert!(!path.exists());
        assert!(!tmp.path().join("daemon-garbage.json").exists());
    }
}
