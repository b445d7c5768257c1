//! Hot reload: polls the config file and swaps a valid new version into the [`ConfigHandle`].
//!
//! Why polling with a content hash instead of inotify: file-change notifications are not
//! delivered for files on many container mounts (Docker Desktop and Kubernetes ConfigMap volumes,
//! which swap a symlink; NFS; bind mounts edited from the host), and editors that save by rename
//! break watches on the old inode. A `(mtime, size, sha256)` signature read every couple of
//! seconds works everywhere, and the hash catches edits that keep the size and a coarse mtime.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::config::ConfigHandle;
use crate::config::env::EnvSource;
use crate::config::load::{ConfigOrigin, load_from_str};

/// How often the file is checked unless [`ConfigWatcher::with_interval`] says otherwise.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// What identifies one version of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSignature {
    pub modified: Option<SystemTime>,
    pub size: u64,
    pub sha256: [u8; 32],
}

impl FileSignature {
    pub fn of(bytes: &[u8], modified: Option<SystemTime>) -> Self {
        Self {
            modified,
            size: bytes.len() as u64,
            sha256: Sha256::digest(bytes).into(),
        }
    }
}

/// The result of one check of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollOutcome {
    Unchanged,
    /// A valid new version now backs the handle.
    Reloaded,
    /// The new version is invalid; the running config stays.
    Rejected,
    /// The file could not be read (e.g. mid-replace); the running config stays.
    Unreadable,
}

/// Called around a reload asked for by a signal: `Started`, then `Finished(outcome)`.
pub type ReloadHook = Box<dyn Fn(ReloadPhase) + Send>;

/// Where a signal-driven reload stands (systemd wants RELOADING=1 … READY=1 around it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadPhase {
    Started,
    Finished(PollOutcome),
}

/// Reloads the config file into a handle when its signature changes.
pub struct ConfigWatcher {
    /// The file watched; `None` while the daemon runs on the embedded default.
    path: Option<PathBuf>,
    /// Running on the embedded default: the files that are loaded if one appears, in order.
    candidates: Vec<PathBuf>,
    handle: ConfigHandle,
    env: Arc<dyn EnvSource + Send + Sync>,
    cwd: PathBuf,
    interval: Duration,
    last_seen: Option<FileSignature>,
    reported_unreadable: bool,
    reload_signal: Option<(Arc<tokio::sync::Notify>, ReloadHook)>,
}

impl ConfigWatcher {
    /// Watches `path`; the file's current content is the baseline, so create the watcher right
    /// after loading the config the handle holds.
    pub fn new(
        path: impl Into<PathBuf>,
        handle: ConfigHandle,
        env: Arc<dyn EnvSource + Send + Sync>,
    ) -> Self {
        let path = path.into();
        let last_seen = std::fs::read(&path).ok().map(|bytes| {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            FileSignature::of(&bytes, modified)
        });
        Self {
            path: Some(path),
            candidates: Vec::new(),
            handle,
            env,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            interval: DEFAULT_POLL_INTERVAL,
            last_seen,
            reported_unreadable: false,
            reload_signal: None,
        }
    }

    /// For a daemon started on the embedded default: waits for the first of `candidates` (the
    /// config search path, see `config::config_candidates`) to appear, loads it as a reload,
    /// and from then on watches it.
    pub fn awaiting(
        candidates: Vec<PathBuf>,
        handle: ConfigHandle,
        env: Arc<dyn EnvSource + Send + Sync>,
    ) -> Self {
        Self {
            path: None,
            candidates,
            handle,
            env,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            interval: DEFAULT_POLL_INTERVAL,
            last_seen: None,
            reported_unreadable: false,
            reload_signal: None,
        }
    }

    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The directory relative paths in the config are resolved against (default: process cwd).
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = cwd.into();
        self
    }

    /// Also reloads when `signal` is notified (SIGHUP), even if the file looks unchanged, so an
    /// operator can force a re-read; `hook` hears the start and the outcome.
    pub fn with_reload_signal(
        mut self,
        signal: Arc<tokio::sync::Notify>,
        hook: ReloadHook,
    ) -> Self {
        self.reload_signal = Some((signal, hook));
        self
    }

    /// The file to read: the watched one, or the first candidate that has appeared.
    fn watched(&mut self) -> Option<PathBuf> {
        if self.path.is_none() {
            let appeared = self.candidates.iter().find(|path| path.is_file())?.clone();
            info!(path = %appeared.display(), "A config file appeared; loading it (antler started on the embedded default config)");
            self.path = Some(appeared);
            self.last_seen = None;
        }
        self.path.clone()
    }

    /// Checks the file once and reloads it if it changed.
    pub async fn poll_once(&mut self) -> PollOutcome {
        let Some(path) = self.watched() else {
            return PollOutcome::Unchanged;
        };
        let read = async {
            let modified = tokio::fs::metadata(&path).await?.modified().ok();
            let bytes = tokio::fs::read(&path).await?;
            Ok::<_, std::io::Error>((bytes, modified))
        };
        let (bytes, modified) = match read.await {
            Ok(read) => read,
            Err(error) => {
                if !self.reported_unreadable {
                    self.reported_unreadable = true;
                    warn!(path = %path.display(), %error, "Cannot read the config file; keeping the running config");
                }
                return PollOutcome::Unreadable;
            }
        };
        self.reported_unreadable = false;
        let signature = FileSignature::of(&bytes, modified);
        if self.last_seen.as_ref() == Some(&signature) {
            // Tests read this to know a check happened (at TRACE: one line every interval).
            tracing::trace!(path = %path.display(), "The config file is unchanged");
            return PollOutcome::Unchanged;
        }
        // Remember even a rejected version, so it is reported once rather than every poll.
        self.last_seen = Some(signature);
        let outcome = self.reload(&path, bytes);
        if outcome == PollOutcome::Reloaded {
            self.handle.set_origin(ConfigOrigin::File(path));
        }
        let (label, detail) = match outcome {
            PollOutcome::Reloaded => ("reloaded", None),
            PollOutcome::Rejected => (
                "rejected",
                Some("the changed config is invalid and was not applied; the daemon log says why"),
            ),
            PollOutcome::Unreadable => ("unreadable", None),
            PollOutcome::Unchanged => ("unchanged", None),
        };
        self.handle.record_reload(label, detail.map(str::to_string));
        outcome
    }

    /// Runs the polling loop until `cancel` fires. The caller owns the task: it keeps the handle
    /// and awaits it after cancelling.
    #[allow(clippy::disallowed_methods)]
    pub fn spawn(mut self, cancel: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(self.interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await; // the first tick is immediate; the baseline is already known
            let signal = self
                .reload_signal
                .as_ref()
                .map(|(signal, _)| signal.clone());
            loop {
                let forced = async {
                    match &signal {
                        Some(signal) => signal.notified().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => break,
                    () = forced => {
                        self.forced_reload().await;
                    }
                    _ = ticker.tick() => {
                        self.poll_once().await;
                    }
                }
            }
        })
    }

    /// A signal asked for a reload: re-read the file whatever its signature.
    async fn forced_reload(&mut self) -> PollOutcome {
        match (&self.path, self.candidates.first()) {
            (Some(path), _) => info!(path = %path.display(), "Reload requested (SIGHUP)"),
            (None, Some(first)) => info!(
                create = %first.display(),
                "Reload requested (SIGHUP); running on the embedded default config until a config file appears"
            ),
            (None, None) => info!("Reload requested (SIGHUP)"),
        }
        if let Some((_, hook)) = &self.reload_signal {
            hook(ReloadPhase::Started);
        }
        self.last_seen = None;
        let outcome = self.poll_once().await;
        if let Some((_, hook)) = &self.reload_signal {
            hook(ReloadPhase::Finished(outcome));
        }
        outcome
    }

    fn reload(&mut self, file: &std::path::Path, bytes: Vec<u8>) -> PollOutcome {
        let path = file.display().to_string();
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => {
                error!(
                    path,
                    "Rejected the changed config: it is not UTF-8 text; the running config stays"
                );
                return PollOutcome::Rejected;
            }
        };
        let origin = ConfigOrigin::File(file.to_path_buf());
        let loaded = match load_from_str(&text, origin, self.env.as_ref(), &self.cwd) {
            Ok(loaded) => loaded,
            Err(error) => {
                error!(path, %error, "Rejected the changed config; the running config stays");
                return PollOutcome::Rejected;
            }
        };
        for warning in &loaded.warnings {
            warn!(path, "{warning}");
        }
        let mut config = loaded.config;
        let running = self.handle.current();
        if config.data_dir != running.data_dir {
            // Stores and uploads are already open under the old directory.
            warn!(path, "data_dir changed; it takes effect after a restart");
            config.data_dir.clone_from(&running.data_dir);
        }
        if config.gateway.listen != running.gateway.listen {
            warn!(
                path,
                "gateway.listen changed; it takes effect after a restart"
            );
        }
        if config.runtime != running.runtime {
            warn!(path, "runtime changed; it takes effect after a restart");
        }
        self.handle.replace(config);
        info!(path, "Reloaded the config");
        PollOutcome::Reloaded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_config_file_created_after_an_embedded_start_is_loaded_and_watched() {
        let tmp = tempfile::tempdir().unwrap();
        let (first, second) = (tmp.path().join("config.yaml"), tmp.path().join("home.yaml"));
        let handle = ConfigHandle::fixed(crate::config::AppConfig::default());
        let env: Arc<dyn EnvSource + Send + Sync> = Arc::new(crate::config::MapEnv::new());
        let mut watcher =
            ConfigWatcher::awaiting(vec![first.clone(), second.clone()], handle.clone(), env)
                .with_cwd(tmp.path());
        assert_eq!(watcher.poll_once().await, PollOutcome::Unchanged);
        assert_eq!(handle.origin(), ConfigOrigin::Embedded);
        // The second candidate appears first, then the first: the one found is kept.
        std::fs::write(
            &second,
            "models: [{name: m, model: x, base_url: 'http://h/v1'}]\nrecursion_limit: 42\n",
        )
        .unwrap();
        assert_eq!(watcher.poll_once().await, PollOutcome::Reloaded);
        assert_eq!(handle.current().recursion_limit, 42);
        assert_eq!(handle.origin(), ConfigOrigin::File(second.clone()));
        std::fs::write(
            &first,
            "models: [{name: m, model: x, base_url: 'http://h/v1'}]\nrecursion_limit: 7\n",
        )
        .unwrap();
        assert_eq!(watcher.poll_once().await, PollOutcome::Unchanged);
        std::fs::write(
            &second,
            "models: [{name: m, model: x, base_url: 'http://h/v1'}]\nrecursion_limit: 43\n",
        )
        .unwrap();
        assert_eq!(watcher.poll_once().await, PollOutcome::Reloaded);
        assert_eq!(handle.current().recursion_limit, 43);
    }

    #[test]
    fn signature_changes_with_content_of_same_size() {
        let a = FileSignature::of(b"abc", None);
        let b = FileSignature::of(b"abd", None);
        assert_eq!(a.size, b.size);
        assert_ne!(a, b);
        assert_eq!(a, FileSignature::of(b"abc", None));
    }
}
