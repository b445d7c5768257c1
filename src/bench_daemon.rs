//! `antler bench daemon`: start-to-ready time, idle RSS and `/runs/wait` throughput of the real
//! daemon binary, against an in-process model server that answers instantly.
//!
//! The model server speaks the OpenAI streaming format (one text chunk, then `[DONE]`), so the
//! daemon runs its real provider, loop, middleware chain and checkpoints for every message.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use tokio::io::{AsyncBufReadExt, BufReader};

#[derive(Debug, thiserror::Error)]
pub enum DaemonBenchError {
    #[error("could not prepare the benchmark: {0}")]
    Setup(String),
    #[error("the daemon did not become ready: {0}")]
    NotReady(String),
}

/// What `antler bench daemon` prints.
#[derive(Clone, Debug)]
pub struct DaemonReport {
    /// From spawning the process to the first successful `/healthz`.
    pub ready: Duration,
    /// Resident set size after start, before any request.
    pub idle_rss_kib: u64,
    pub clients: usize,
    pub runs: u64,
    pub failures: u64,
    pub elapsed: Duration,
    /// Daemon process CPU (user + system) per completed run.
    pub cpu_per_run: Duration,
    /// Resident set size after the load.
    pub loaded_rss_kib: u64,
}

impl fmt::Display for DaemonReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per_sec = self.runs as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON);
        writeln!(
            f,
            "start-to-ready        {:>10.1} ms",
            self.ready.as_secs_f64() * 1e3
        )?;
        writeln!(
            f,
            "idle RSS              {:>10.1} MiB",
            self.idle_rss_kib as f64 / 1024.0
        )?;
        writeln!(
            f,
            "/runs/wait            {:>10.0} runs/s ({} clients, {} runs, {} failed, {:.1} s)",
            per_sec,
            self.clients,
            self.runs,
            self.failures,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "daemon CPU per run    {:>10.3} ms",
            self.cpu_per_run.as_secs_f64() * 1e3
        )?;
        write!(
            f,
            "RSS after load        {:>10.1} MiB",
            self.loaded_rss_kib as f64 / 1024.0
        )
    }
}

/// The instant model: every call streams one chunk and finishes.
async fn instant_completion() -> impl axum::response::IntoResponse {
    const BODY: &str = concat!(
        "data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    (
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        BODY,
    )
}

/// Runs the benchmark: `clients` concurrent `/runs/wait` loops for `duration`, each on its own
/// growing conversation, or on a fresh thread per message with `fresh_threads`.
pub async fn run(
    binary: &Path,
    clients: usize,
    duration: Duration,
    fresh_threads: bool,
) -> Result<DaemonReport, DaemonBenchError> {
    let setup = |e: std::io::Error| DaemonBenchError::Setup(e.to_string());
    let model = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(setup)?;
    let model_addr = model.local_addr().map_err(setup)?;
    let model_server = tokio::spawn(async move {
        let app = Router::new().route("/v1/chat/completions", post(instant_completion));
        let _ = axum::serve(model, app).await;
    });

    let dir = std::env::temp_dir().join(format!(
        "antler-bench-daemon-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).map_err(setup)?;
    let config = write_config(&dir, model_addr).map_err(setup)?;

    let started = Instant::now();
    let mut child = tokio::process::Command::new(binary)
        .arg("--config")
        .arg(&config)
        .arg("run")
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(setup)?;
    let pid = child.id().unwrap_or_default();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| DaemonBenchError::Setup("no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                if let Some(url) = line.strip_prefix("antler listening on ") {
                    break url.trim().to_string();
                }
            }
            _ => return Err(DaemonBenchError::NotReady("the daemon exited".into())),
        }
    };
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(clients)
        .build()
        .map_err(|e| DaemonBenchError::Setup(e.to_string()))?;
    loop {
        if http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err(DaemonBenchError::NotReady(
                "no /healthz answer within 10 s".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let ready = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss_kib = rss_kib(pid);

    let runs = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let cpu_before = crate::bench::cpu_time_of(&pid.to_string());
    let load_started = Instant::now();
    let deadline = load_started + duration;
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let http = http.clone();
        let base = base.clone();
        let runs = runs.clone();
        let failures = failures.clone();
        tasks.push(tokio::spawn(async move {
            // One conversation per client (runs on one thread are serialized by design), or a
            // fresh thread per message to measure without the history growing.
            let body =
                serde_json::json!({"input": {"messages": [{"role": "user", "content": "hi"}]}});
            let mut message = 0u64;
            while Instant::now() < deadline {
                let thread = if fresh_threads {
                    message += 1;
                    format!("bench-{client}-{message}")
                } else {
                    format!("bench-{client}")
                };
                let url = format!("{base}/api/threads/{thread}/runs/wait");
                match http.post(&url).json(&body).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        runs.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let elapsed = load_started.elapsed();
    let cpu = crate::bench::cpu_time_of(&pid.to_string()).saturating_sub(cpu_before);
    let loaded_rss_kib = rss_kib(pid);
    let runs = runs.load(Ordering::Relaxed);
    let _ = child.kill().await;
    model_server.abort();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(DaemonReport {
        ready,
        idle_rss_kib,
        clients,
        runs,
        failures: failures.load(Ordering::Relaxed),
        elapsed,
        cpu_per_run: if runs == 0 {
            Duration::ZERO
        } else {
            cpu / runs as u32
        },
        loaded_rss_kib,
    })
}

fn write_config(dir: &Path, model: std::net::SocketAddr) -> std::io::Result<PathBuf> {
    let path = dir.join("config.yaml");
    let yaml = format!(
        "data_dir: {data}\nmodels:\n  - name: instant\n    model: instant\n    base_url: http://{model}/v1\ngateway:\n  listen: 127.0.0.1:0\nsandbox:\n  provider: local\n",
        data = dir.join("data").display()
    );
    std::fs::write(&path, yaml)?;
    Ok(path)
}

/// `VmRSS` of a process in KiB (0 when unknown).
fn rss_kib(pid: u32) -> u64 {
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
