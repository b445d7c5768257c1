//! `antler bench store`: bytes written and daemon CPU per turn on fresh threads and on threads
//! whose history holds about 10, 100 and 1,000 messages.
//!
//! A turn is one `/runs/wait` with a message of `message_bytes` answered by a model whose answer
//! has the same size. The write figures come from the daemon's `/proc/<pid>/io` counters, read
//! after the background flush settled: `store` is `wchar` (bytes handed to write calls) less
//! what went over HTTP (the model request, which carries the history, and the `/runs/wait`
//! response, which carries the whole state: both grow with the history by design), `disk` is
//! `write_bytes` (what reached the disk, in pages), `network` the HTTP bytes left out.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::cli::bench::daemon::DaemonBenchError;
use crate::cli::bench::daemon::spawn::{self, Daemon, ModelBehaviour, percentile};

/// Messages a thread has after `turns` turns: a human and an AI message each, plus the date
/// reminder the first turn adds.
fn history_after(turns: usize) -> usize {
    2 * turns + 1
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct StoreRow {
    pub label: String,
    /// Messages in the thread when the measured turns start.
    pub history: usize,
    pub turns: usize,
    pub write_per_turn: u64,
    pub disk_per_turn: u64,
    pub network_per_turn: u64,
    pub cpu_per_turn: Duration,
    pub p50: Duration,
}

#[derive(Clone, Debug)]
pub struct StoreReport {
    pub message_bytes: usize,
    pub rows: Vec<StoreRow>,
}

impl fmt::Display for StoreReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "per turn through the daemon (/runs/wait), {}-byte messages and answers",
            self.message_bytes
        )?;
        writeln!(
            f,
            "{:<16} {:>8} {:>6} {:>13} {:>13} {:>13} {:>10} {:>10}",
            "thread",
            "history",
            "turns",
            "store/turn",
            "disk/turn",
            "network/turn",
            "CPU/turn",
            "p50"
        )?;
        for row in &self.rows {
            writeln!(
                f,
                "{:<16} {:>8} {:>6} {:>11.1} K {:>11.1} K {:>11.1} K {:>7.3} ms {:>7.2} ms",
                row.label,
                row.history,
                row.turns,
                row.write_per_turn as f64 / 1024.0,
                row.disk_per_turn as f64 / 1024.0,
                row.network_per_turn as f64 / 1024.0,
                row.cpu_per_turn.as_secs_f64() * 1e3,
                row.p50.as_secs_f64() * 1e3
            )?;
        }
        Ok(())
    }
}

/// Runs the benchmark against `binary` with `turns` measured turns per row.
pub async fn run(
    binary: &Path,
    turns: usize,
    message_bytes: usize,
) -> Result<StoreReport, DaemonBenchError> {
    let turns = turns.max(1);
    let text = "x".repeat(message_bytes.max(1));
    let model = ModelBehaviour {
        answer: text.clone(),
        delay: Duration::ZERO,
    };
    let daemon = spawn::start(binary, model, "", 4).await?;
    let mut rows = Vec::new();
    let threads: Vec<String> = (0..turns).map(|i| format!("fresh-{i}")).collect();
    rows.push(measure(&daemon, "fresh threads", 0, &threads, &text).await?);
    for history in [10, 100, 1000] {
        let thread = format!("history-{history}");
        let mut grown = 0;
        while history_after(grown + 1) < history {
            daemon
                .turn(&thread, &text)
                .await
                .map_err(DaemonBenchError::Turn)?;
            grown += 1;
        }
        let same: Vec<String> = vec![thread; turns];
        let label = format!("history {history}");
        rows.push(measure(&daemon, &label, history_after(grown), &same, &text).await?);
    }
    Ok(StoreReport {
        message_bytes: text.len(),
        rows,
    })
}

/// One turn on each of `threads`, in order, between two readings of the counters.
async fn measure(
    daemon: &Daemon,
    label: &str,
    history: usize,
    threads: &[String],
    text: &str,
) -> Result<StoreRow, DaemonBenchError> {
    let settle = Duration::from_millis(400);
    tokio::time::sleep(settle).await;
    let (write_before, disk_before) = daemon.written();
    let network_before = daemon.network_bytes();
    let cpu_before = daemon.cpu();
    let mut samples = Vec::with_capacity(threads.len());
    for thread in threads {
        let started = Instant::now();
        daemon
            .turn(thread, text)
            .await
            .map_err(DaemonBenchError::Turn)?;
        samples.push(started.elapsed());
    }
    tokio::time::sleep(settle).await;
    let (write_after, disk_after) = daemon.written();
    let network = daemon.network_bytes().saturating_sub(network_before);
    let cpu = daemon.cpu().saturating_sub(cpu_before);
    samples.sort();
    let n = threads.len() as u64;
    Ok(StoreRow {
        label: label.to_string(),
        history,
        turns: threads.len(),
        write_per_turn: write_after
            .saturating_sub(write_before)
            .saturating_sub(network)
            / n,
        disk_per_turn: disk_after.saturating_sub(disk_before) / n,
        network_per_turn: network / n,
        cpu_per_turn: cpu / n as u32,
        p50: percentile(&samples, 0.5),
    })
}
