//! Benchmarks of the real daemon binary against an in-process model server: `antler bench
//! daemon` (start-to-ready, idle RSS, `/runs/wait` throughput), `bench store` (write bytes and
//! CPU per turn as a thread's history grows) and `bench soak` (RSS over a long soak, and a
//! burst of runs in flight).
//!
//! The model server speaks the OpenAI streaming format, so the daemon runs its real provider,
//! loop, middleware chain and checkpoints for every message. Every figure is printed, never
//! asserted; `--binary` points them at another build (e.g. the one before a change).

pub mod soak;
pub mod spawn;
pub mod store;

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use spawn::ModelBehaviour;

#[derive(Debug, thiserror::Error)]
pub enum DaemonBenchError {
    #[error("could not prepare the benchmark: {0}")]
    Setup(String),
    #[error("the daemon did not become ready: {0}")]
    NotReady(String),
    #[error("a benchmark turn failed: {0}")]
    Turn(String),
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

/// Runs the benchmark: `clients` concurrent `/runs/wait` loops for `duration`, each on its own
/// growing conversation, or on a fresh thread per message with `fresh_threads`.
pub async fn run(
    binary: &Path,
    clients: usize,
    duration: Duration,
    fresh_threads: bool,
) -> Result<DaemonReport, DaemonBenchError> {
    let daemon = spawn::start(binary, ModelBehaviour::instant(), "", clients).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle_rss_kib = daemon.rss_kib();
    let daemon = Arc::new(daemon);
    let runs = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let cpu_before = daemon.cpu();
    let load_started = Instant::now();
    let deadline = load_started + duration;
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let daemon = daemon.clone();
        let runs = runs.clone();
        let failures = failures.clone();
        // Every client is awaited below before the figures are read.
        #[allow(clippy::disallowed_methods)]
        tasks.push(tokio::spawn(async move {
            // One conversation per client (runs on one thread are serialized by design), or a
            // fresh thread per message to measure without the history growing.
            let mut message = 0u64;
            while Instant::now() < deadline {
                let thread = if fresh_threads {
                    message += 1;
                    format!("bench-{client}-{message}")
                } else {
                    format!("bench-{client}")
                };
                match daemon.turn(&thread, "hi").await {
                    Ok(()) => runs.fetch_add(1, Ordering::Relaxed),
                    Err(_) => failures.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let elapsed = load_started.elapsed();
    let cpu = daemon.cpu().saturating_sub(cpu_before);
    let loaded_rss_kib = daemon.rss_kib();
    let runs = runs.load(Ordering::Relaxed);
    Ok(DaemonReport {
        ready: daemon.ready,
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
