//! What every daemon benchmark starts: an OpenAI-compatible model server in this process (an
//! answer of a chosen size after a chosen delay) and the daemon binary on a scratch data dir,
//! plus readers of the daemon's RSS, CPU time and write counters from `/proc`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;

use crate::cli::bench::daemon::DaemonBenchError;

/// How the in-process model answers every call.
#[derive(Clone, Debug)]
pub struct ModelBehaviour {
    /// The answer's text.
    pub answer: String,
    /// Waited before the answer is streamed (a model's latency).
    pub delay: Duration,
}

impl ModelBehaviour {
    pub fn instant() -> Self {
        Self {
            answer: "ok".into(),
            delay: Duration::ZERO,
        }
    }
}

/// A running daemon under test; killed when dropped.
pub struct Daemon {
    pub child: tokio::process::Child,
    pub pid: u32,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub http: reqwest::Client,
    /// From spawning the process to the first successful `/healthz`.
    pub ready: Duration,
    pub dir: PathBuf,
    /// Bytes the daemon sent over HTTP: model request bodies and the responses it gave.
    network: Arc<AtomicU64>,
    model_server: tokio::task::JoinHandle<()>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.model_server.abort();
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts the model server and the daemon (`binary`), waits for `/healthz`. `extra_config` is
/// appended to the generated config.yaml; `clients` sizes the HTTP client's idle pool.
pub async fn start(
    binary: &Path,
    model: ModelBehaviour,
    extra_config: &str,
    clients: usize,
) -> Result<Daemon, DaemonBenchError> {
    let (model_addr, network, model_server) = serve_model(model).await?;
    let dir = std::env::temp_dir().join(format!(
        "antler-bench-daemon-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let config = write_config(&dir, model_addr, extra_config)?;
    let started = Instant::now();
    let (child, base) = spawn_daemon(binary, &config, &dir).await?;
    let pid = child.id().unwrap_or_default();
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(clients)
        // Clients that go quiet hang up, as people's do: idle connections would otherwise
        // stay open on the daemon and count in its RSS after a burst.
        .pool_idle_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|e| DaemonBenchError::Setup(e.to_string()))?;
    wait_healthy(&http, &base, started).await?;
    Ok(Daemon {
        child,
        pid,
        base,
        http,
        ready: started.elapsed(),
        dir,
        network,
        model_server,
    })
}

fn setup_error(error: std::io::Error) -> DaemonBenchError {
    DaemonBenchError::Setup(error.to_string())
}

/// The in-process model: every chat completion streams `model.answer` after `model.delay`.
/// Returns its address, the request bytes it received, and its task (aborted with the
/// [`Daemon`]).
async fn serve_model(
    model: ModelBehaviour,
) -> Result<(SocketAddr, Arc<AtomicU64>, JoinHandle<()>), DaemonBenchError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(setup_error)?;
    let model_addr = listener.local_addr().map_err(setup_error)?;
    let body: Arc<str> = completion_body(&model.answer).into();
    let delay = model.delay;
    let network = Arc::new(AtomicU64::new(0));
    let counted = network.clone();
    // Owned by the bench's `Daemon`, which aborts it when the measurement ends.
    #[allow(clippy::disallowed_methods)]
    let model_server = tokio::spawn(async move {
        let app = Router::new().route(
            "/v1/chat/completions",
            post(move |request: axum::body::Bytes| {
                counted.fetch_add(request.len() as u64, Ordering::Relaxed);
                let body = body.clone();
                async move {
                    tokio::time::sleep(delay).await;
                    (
                        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
                        body.to_string(),
                    )
                }
            }),
        );
        let _ = axum::serve(listener, app).await;
    });
    Ok((model_addr, network, model_server))
}

/// Writes `dir/config.yaml`: the in-process model, a port of the kernel's choosing, the local
/// sandbox, then `extra_config`.
fn write_config(
    dir: &Path,
    model_addr: SocketAddr,
    extra_config: &str,
) -> Result<PathBuf, DaemonBenchError> {
    std::fs::create_dir_all(dir).map_err(setup_error)?;
    let config = dir.join("config.yaml");
    // Every client of the load generator shares one address: the per-client cap would refuse
    // a burst's runs past it, so it is as high as the cap on all connections.
    let yaml = format!(
        "data_dir: {data}\nmodels:\n  - name: instant\n    model: instant\n    base_url: http://{model_addr}/v1\n    timeout: 120\ngateway:\n  listen: 127.0.0.1:0\n  max_connections_per_ip: 2048\nsandbox:\n  provider: local\n{extra_config}",
        data = dir.join("data").display()
    );
    std::fs::write(&config, yaml).map_err(setup_error)?;
    Ok(config)
}

/// Starts `binary` on `config` and reads the address it prints once it listens.
async fn spawn_daemon(
    binary: &Path,
    config: &Path,
    dir: &Path,
) -> Result<(tokio::process::Child, String), DaemonBenchError> {
    let mut child = tokio::process::Command::new(binary)
        .arg("--config")
        .arg(config)
        .arg("run")
        // Its runtime record stays with the bench's files, not in the user's runtime dir.
        .env("XDG_RUNTIME_DIR", dir)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(setup_error)?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| DaemonBenchError::Setup("no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                if let Some(url) = line.strip_prefix("antler listening on ") {
                    return Ok((child, url.trim().to_string()));
                }
            }
            _ => return Err(DaemonBenchError::NotReady("the daemon exited".into())),
        }
    }
}

/// Polls `/healthz` until it answers 2xx, at most 10 s after `started`.
async fn wait_healthy(
    http: &reqwest::Client,
    base: &str,
    started: Instant,
) -> Result<(), DaemonBenchError> {
    loop {
        if http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err(DaemonBenchError::NotReady(
                "no /healthz answer within 10 s".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

impl Daemon {
    /// One turn on `thread` through `/runs/wait`: `Ok` if the daemon answered 2xx.
    pub async fn turn(&self, thread: &str, text: &str) -> Result<(), String> {
        let body = serde_json::json!({"input": {"messages": [{"role": "user", "content": text}]}});
        let url = format!("{}/api/threads/{thread}/runs/wait", self.base);
        match self.http.post(&url).json(&body).send().await {
            Ok(response) if response.status().is_success() => {
                let received = response.bytes().await.map_or(0, |b| b.len());
                self.network.fetch_add(received as u64, Ordering::Relaxed);
                Ok(())
            }
            Ok(response) => Err(format!("HTTP {}", response.status())),
            Err(error) => Err(error.to_string()),
        }
    }

    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid)
    }

    /// CPU time of the daemon from the scheduler's per-thread nanosecond counters (the clock
    /// ticks of `/proc/<pid>/stat` come in 10 ms steps, too coarse for a few turns). A thread
    /// that exits during a measurement takes its time with it; the daemon's threads live long.
    pub fn cpu(&self) -> Duration {
        let mut nanos = 0u64;
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) {
            for task in tasks.flatten() {
                let stat =
                    std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
                nanos += stat
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        if nanos == 0 {
            return crate::cli::bench::cpu_time_of(&self.pid.to_string());
        }
        Duration::from_nanos(nanos)
    }

    /// Bytes of model request bodies and of responses the daemon sent so far.
    pub fn network_bytes(&self) -> u64 {
        self.network.load(Ordering::Relaxed)
    }

    /// (bytes passed to write calls, bytes the process caused to be written to disk).
    pub fn written(&self) -> (u64, u64) {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.pid)).unwrap_or_default();
        let field = |name: &str| {
            io.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        (field("wchar:"), field("write_bytes:"))
    }
}

/// The streamed completion: the answer in one chunk, then the finish.
fn completion_body(answer: &str) -> String {
    let chunk = serde_json::json!({"id": "b", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": answer}, "finish_reason": null}]});
    let done = serde_json::json!({"id": "b", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {}, "finish_reason": "stop"}]});
    format!("data: {chunk}\n\ndata: {done}\n\ndata: [DONE]\n\n")
}

/// `VmRSS` of a process in KiB (0 when unknown).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Percentile `q` (0..=1) of sorted `samples`.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
