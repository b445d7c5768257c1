//! The daemon under test: a scratch work dir with its config, the process started from the
//! binary's path (logging to `antler.log` there), readiness from `/readyz`, SIGKILL and RSS.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bench::BenchError;

/// A scratch dir holding `config.yaml`, `data/` and `antler.log`; removed when dropped unless
/// `keep()` was called (to read the log of a failed run).
pub struct Workdir {
    path: PathBuf,
    keep: bool,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Workdir {
    pub fn new(label: &str) -> Result<Self, BenchError> {
        let path = std::env::temp_dir().join(format!(
            "antler-ops-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path, keep: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn data_dir(&self) -> PathBuf {
        self.path.join("data")
    }

    pub fn log(&self) -> PathBuf {
        self.path.join("antler.log")
    }

    /// Writes `config.yaml`: the data dir, `model_url` as the only model, the gateway on
    /// `port`, the local sandbox, then `channels` (a `channels:` block).
    pub fn write_config(
        &self,
        model_url: &str,
        port: u16,
        channels: &str,
    ) -> Result<PathBuf, BenchError> {
        let yaml = format!(
            "config_version: 1\ndata_dir: {data}\nmodels:\n  - name: fake\n    provider: openai\n    model: fake-model\n    base_url: {model_url}\n    timeout: 120\nsandbox:\n  provider: local\ngateway:\n  listen: 127.0.0.1:{port}\n{channels}",
            data = self.data_dir().display(),
        );
        let path = self.path.join("config.yaml");
        std::fs::write(&path, yaml)?;
        Ok(path)
    }

    /// Keeps the dir after the run (its path is in the report).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A free port on 127.0.0.1 (the gateway must keep it across restarts, and Feishu pushes to
/// it).
pub(crate) fn free_port() -> Result<u16, BenchError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A running daemon; SIGKILLed when dropped.
pub struct DaemonProcess {
    child: tokio::process::Child,
    pub pid: u32,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// From spawning to ready.
    pub ready_after: Duration,
}

impl DaemonProcess {
    /// Starts `binary --config <dir>/config.yaml run` and waits until `/readyz` reports each of
    /// `channels` running.
    pub async fn start(
        binary: &Path,
        dir: &Workdir,
        port: u16,
        channels: &[&str],
    ) -> Result<Self, BenchError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.log())?;
        let started = Instant::now();
        let child = tokio::process::Command::new(binary)
            .arg("--config")
            .arg(dir.path().join("config.yaml"))
            .arg("run")
            // Its runtime record stays in the workdir: benches kill daemons, and a record left
            // in the user's runtime dir would be read (and deleted) by their next CLI command.
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("RUST_LOG", "warn")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| BenchError::Spawn {
                binary: binary.display().to_string(),
                error,
            })?;
        let mut daemon = Self {
            pid: child.id().unwrap_or_default(),
            child,
            base: format!("http://127.0.0.1:{port}"),
            ready_after: Duration::ZERO,
        };
        daemon.wait_ready(dir, channels).await?;
        daemon.ready_after = started.elapsed();
        Ok(daemon)
    }

    async fn wait_ready(&mut self, dir: &Workdir, channels: &[&str]) -> Result<(), BenchError> {
        // 60 s, or `ANTLER_BENCH_READY_S`: link/symbol-order.sh starts the daemon under
        // callgrind, which runs its start-up some fifty times slower.
        let limit = std::env::var("ANTLER_BENCH_READY_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Duration::from_secs(60), Duration::from_secs);
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let deadline = Instant::now() + limit;
        let mut last = String::from("no answer from /readyz");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                last = format!("the daemon exited ({status})");
                break;
            }
            if let Ok(response) = http.get(format!("{}/readyz", self.base)).send().await
                && let Ok(text) = response.text().await
                && let Ok(body) = serde_json::from_str::<Value>(&text)
            {
                if channels
                    .iter()
                    .all(|c| body["channels"][*c]["state"] == "running")
                {
                    return Ok(());
                }
                last = format!("channels: {}", body["channels"]);
            }
            if Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(BenchError::NotReady {
            seconds: limit.as_secs(),
            what: last,
            log: dir.log().display().to_string(),
        })
    }

    /// `VmRSS` in KiB (0 once the process is gone).
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid)
    }

    /// SIGKILL, and reap the process.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// `VmRSS` of a process in KiB (0 when unknown).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// `VmHWM`, the most a process has had resident since it started, in KiB (0 when unknown).
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
