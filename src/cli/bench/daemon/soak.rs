//! `antler bench soak`: the daemon's RSS over a soak of many turns spread over many threads
//! (sampled every 1,000 turns), then bursts of runs in flight at once against a model that
//! takes a while (peak RSS, RSS 10 s after, latency percentiles, errors).

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cli::bench::daemon::DaemonBenchError;
use crate::cli::bench::daemon::spawn::{self, Daemon, ModelBehaviour, mib, percentile};

/// What to run.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    pub turns: u64,
    pub threads: u64,
    /// Concurrent clients of the soak (each owns a share of the threads).
    pub clients: u64,
    /// Runs started at once per burst (0: no burst).
    pub burst_runs: usize,
    pub bursts: usize,
    pub model_delay: Duration,
    /// Waited after each burst before RSS is read again.
    pub settle: Duration,
}

#[derive(Clone, Debug)]
pub struct SoakReport {
    pub options: SoakOptions,
    pub idle_rss_kib: u64,
    /// (turns done, RSS KiB, seconds since the start).
    pub samples: Vec<(u64, u64, f64)>,
    pub failures: u64,
    pub cpu_per_turn: Duration,
    pub bursts: Vec<BurstReport>,
}

#[derive(Clone, Debug)]
pub struct BurstReport {
    pub before_rss_kib: u64,
    pub peak_rss_kib: u64,
    pub after_rss_kib: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub errors: u64,
    pub elapsed: Duration,
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.options;
        writeln!(
            f,
            "soak: {} turns over {} threads, {} clients, instant model; idle RSS {:.1} MiB",
            o.turns,
            o.threads,
            o.clients,
            mib(self.idle_rss_kib)
        )?;
        writeln!(f, "{:>8} {:>10} {:>9}", "turns", "RSS MiB", "seconds")?;
        for (turns, rss, seconds) in &self.samples {
            writeln!(f, "{turns:>8} {:>10.1} {seconds:>9.1}", mib(*rss))?;
        }
        writeln!(
            f,
            "failed turns {}, daemon CPU per turn {:.3} ms",
            self.failures,
            self.cpu_per_turn.as_secs_f64() * 1e3
        )?;
        if self.bursts.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "\nburst: {} runs in flight at once, model answers after {} ms, RSS {} s after",
            o.burst_runs,
            o.model_delay.as_millis(),
            o.settle.as_secs()
        )?;
        writeln!(
            f,
            "{:>5} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8}",
            "burst", "before MiB", "peak MiB", "after MiB", "p50 ms", "p99 ms", "errors", "seconds"
        )?;
        for (index, b) in self.bursts.iter().enumerate() {
            writeln!(
                f,
                "{:>5} {:>11.1} {:>9.1} {:>9.1} {:>9.0} {:>9.0} {:>7} {:>8.1}",
                index + 1,
                mib(b.before_rss_kib),
                mib(b.peak_rss_kib),
                mib(b.after_rss_kib),
                b.p50.as_secs_f64() * 1e3,
                b.p99.as_secs_f64() * 1e3,
                b.errors,
                b.elapsed.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

pub async fn run(binary: &Path, options: SoakOptions) -> Result<SoakReport, DaemonBenchError> {
    let clients = options.clients.clamp(1, options.threads.max(1));
    let daemon = spawn::start(binary, ModelBehaviour::instant(), "", clients as usize).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss_kib = daemon.rss_kib();
    let daemon = Arc::new(daemon);
    let done = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let cpu_before = daemon.cpu();
    let per_thread = options.turns.div_ceil(options.threads.max(1));
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (daemon, done, failures) = (daemon.clone(), done.clone(), failures.clone());
        let (threads, total) = (options.threads.max(1), options.turns);
        // Every client is awaited below before the figures are read.
        #[allow(clippy::disallowed_methods)]
        tasks.push(tokio::spawn(async move {
            // Round robin over the threads this client owns, one turn each per round.
            for _round in 0..per_thread {
                for thread in (client..threads).step_by(clients as usize) {
                    if done.fetch_add(1, Ordering::SeqCst) >= total {
                        return;
                    }
                    if daemon.turn(&format!("soak-{thread}"), "hi").await.is_err() {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let mut samples = Vec::new();
    let mut next = 1000;
    while next <= options.turns {
        let finished = tasks.iter().all(|t| t.is_finished());
        let turns = done.load(Ordering::SeqCst).min(options.turns);
        if turns >= next || finished {
            samples.push((
                next.min(turns),
                daemon.rss_kib(),
                started.elapsed().as_secs_f64(),
            ));
            next += 1000;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for task in tasks {
        let _ = task.await;
    }
    let cpu = daemon.cpu().saturating_sub(cpu_before);
    let turns = options.turns.max(1);
    drop(daemon);
    let bursts = if options.burst_runs == 0 {
        Vec::new()
    } else {
        bursts(binary, &options).await?
    };
    Ok(SoakReport {
        idle_rss_kib,
        samples,
        failures: failures.load(Ordering::Relaxed),
        cpu_per_turn: cpu / u32::try_from(turns).unwrap_or(u32::MAX),
        bursts,
        options,
    })
}

/// A fresh daemon, warmed up by a few turns, then `bursts` bursts of `burst_runs` runs.
async fn bursts(
    binary: &Path,
    options: &SoakOptions,
) -> Result<Vec<BurstReport>, DaemonBenchError> {
    let model = ModelBehaviour {
        answer: "ok".into(),
        delay: options.model_delay,
    };
    let daemon = Arc::new(spawn::start(binary, model, "", options.burst_runs).await?);
    for i in 0..20 {
        daemon
            .turn(&format!("warm-{i}"), "hi")
            .await
            .map_err(DaemonBenchError::Turn)?;
    }
    tokio::time::sleep(options.settle).await;
    let mut reports = Vec::new();
    for burst in 0..options.bursts.max(1) {
        reports.push(one_burst(&daemon, burst, options).await);
    }
    Ok(reports)
}

async fn one_burst(daemon: &Arc<Daemon>, burst: usize, options: &SoakOptions) -> BurstReport {
    let before_rss_kib = daemon.rss_kib();
    let running = Arc::new(AtomicBool::new(true));
    // The sampler and the burst's runs are awaited below before the figures are read.
    #[allow(clippy::disallowed_methods)]
    let sampler = {
        let (daemon, running) = (daemon.clone(), running.clone());
        tokio::spawn(async move {
            let mut peak = 0;
            while running.load(Ordering::SeqCst) {
                peak = peak.max(daemon.rss_kib());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak.max(daemon.rss_kib())
        })
    };
    let started = Instant::now();
    #[allow(clippy::disallowed_methods)]
    let runs: Vec<_> = (0..options.burst_runs)
        .map(|i| {
            let daemon = daemon.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let result = daemon.turn(&format!("burst-{burst}-{i}"), "hi").await;
                (started.elapsed(), result.is_ok())
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(runs.len());
    let mut errors = 0;
    for run in runs {
        match run.await {
            Ok((latency, true)) => latencies.push(latency),
            _ => errors += 1,
        }
    }
    let elapsed = started.elapsed();
    running.store(false, Ordering::SeqCst);
    let peak_rss_kib = sampler.await.unwrap_or(0);
    tokio::time::sleep(options.settle).await;
    latencies.sort();
    BurstReport {
        before_rss_kib,
        peak_rss_kib,
        after_rss_kib: daemon.rss_kib(),
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        errors,
        elapsed,
    }
}
