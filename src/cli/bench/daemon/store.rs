//! `antler bench store`: bytes written and daemon CPU per turn on fresh threads and on threads
//! whose history holds about 10, 100 and 1,000 messages.
//!
//! A turn is one `/runs/wait` with a message of `message_bytes` answered by a model whose answer
//! has the same size. The write figures come from the daemon's `/proc/<pid>/io` counters, read
//! after the background flush settled: `store` is `wchar` (bytes handed to write calls) less
//! what went over HTTP (the model request, which carries the history, and the `/runs/wait`
//! response, which carries the whole state: both grow with the history by design), `disk` is
//! `write_bytes` (what reached the disk, in pages), `network` the HTTP bytes left out.
//!
//! With `--backend postgres` the daemon runs on the given database: `store` is then what it
//! sent to PostgreSQL, and two columns come from the server: rows of `kv` written per turn and
//! WAL bytes per turn. PostgreSQL reports its table counters late (a server process flushes
//! them when idle, within ten seconds), so each reading waits that long first. Thread ids are
//! new each run, so a database that held an earlier run measures the same.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use antler_store_postgres::{DatabaseActivity, PgOptions, PgStore};

use crate::cli::bench::daemon::DaemonBenchError;
use crate::cli::bench::daemon::spawn::{self, Daemon, ModelBehaviour, percentile};

/// How long a reading of PostgreSQL's table counters waits for the server to report them.
const POSTGRES_STATS_DELAY: Duration = Duration::from_secs(11);

/// Which store the measured daemon runs on.
#[derive(Clone, Debug)]
pub enum BenchBackend {
    Sled,
    /// The database URL.
    Postgres(String),
}

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
    /// On PostgreSQL: rows of `kv` and WAL bytes written per turn.
    pub database: Option<(f64, u64)>,
}

#[derive(Clone, Debug)]
pub struct StoreReport {
    pub message_bytes: usize,
    pub backend: &'static str,
    pub rows: Vec<StoreRow>,
}

impl fmt::Display for StoreReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "per turn through the daemon (/runs/wait) on {}, {}-byte messages and answers",
            self.backend, self.message_bytes
        )?;
        write!(
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
        if self.rows.iter().any(|row| row.database.is_some()) {
            write!(f, " {:>10} {:>11}", "rows/turn", "WAL/turn")?;
        }
        writeln!(f)?;
        for row in &self.rows {
            write!(
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
            if let Some((rows, wal)) = row.database {
                write!(f, " {rows:>10.1} {:>9.1} K", wal as f64 / 1024.0)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Runs the benchmark against `binary` with `turns` measured turns per row.
pub async fn run(
    binary: &Path,
    turns: usize,
    message_bytes: usize,
    backend: BenchBackend,
) -> Result<StoreReport, DaemonBenchError> {
    let turns = turns.max(1);
    let text = "x".repeat(message_bytes.max(1));
    let model = ModelBehaviour {
        answer: text.clone(),
        delay: Duration::ZERO,
    };
    let (extra_config, database) = match &backend {
        BenchBackend::Sled => (String::new(), None),
        BenchBackend::Postgres(url) => {
            let options = PgOptions {
                url: url.clone(),
                pool_size: 2,
            };
            let store = tokio::task::block_in_place(|| PgStore::open(&options))
                .map_err(|e| DaemonBenchError::Setup(e.to_string()))?;
            let quoted =
                serde_json::to_string(url).map_err(|e| DaemonBenchError::Setup(e.to_string()))?;
            (
                format!("store:\n  backend: postgres\n  postgres:\n    url: {quoted}\n"),
                Some(store),
            )
        }
    };
    let daemon = spawn::start(binary, model, &extra_config, 4).await?;
    let run_id = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let probe = Probe {
        daemon: &daemon,
        database: database.as_ref(),
    };
    let mut rows = Vec::new();
    let threads: Vec<String> = (0..turns).map(|i| format!("fresh-{run_id}-{i}")).collect();
    rows.push(measure(&probe, "fresh threads", 0, &threads, &text).await?);
    for history in [10, 100, 1000] {
        let thread = format!("history-{run_id}-{history}");
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
        rows.push(measure(&probe, &label, history_after(grown), &same, &text).await?);
    }
    Ok(StoreReport {
        message_bytes: text.len(),
        backend: match backend {
            BenchBackend::Sled => "sled",
            BenchBackend::Postgres(_) => "postgres",
        },
        rows,
    })
}

/// The measured daemon and, on PostgreSQL, a connection to its database.
struct Probe<'a> {
    daemon: &'a Daemon,
    database: Option<&'a PgStore>,
}

impl Probe<'_> {
    /// Waits for the counters to settle, then reads the database's (none on sled).
    async fn settle(&self) -> Result<Option<DatabaseActivity>, DaemonBenchError> {
        let Some(store) = self.database else {
            tokio::time::sleep(Duration::from_millis(400)).await;
            return Ok(None);
        };
        tokio::time::sleep(POSTGRES_STATS_DELAY).await;
        tokio::task::block_in_place(|| store.activity())
            .map(Some)
            .map_err(|e| DaemonBenchError::Setup(e.to_string()))
    }
}

/// One turn on each of `threads`, in order, between two readings of the counters.
async fn measure(
    probe: &Probe<'_>,
    label: &str,
    history: usize,
    threads: &[String],
    text: &str,
) -> Result<StoreRow, DaemonBenchError> {
    let daemon = probe.daemon;
    let database_before = probe.settle().await?;
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
    let database_after = probe.settle().await?;
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
        database: database_before.zip(database_after).map(|(before, after)| {
            (
                after.rows_written.saturating_sub(before.rows_written) as f64 / n as f64,
                after.wal_bytes.saturating_sub(before.wal_bytes) / n,
            )
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, database: Option<(f64, u64)>) -> StoreRow {
        StoreRow {
            label: label.into(),
            history: 999,
            turns: 20,
            write_per_turn: 512,
            disk_per_turn: 0,
            network_per_turn: 2048,
            cpu_per_turn: Duration::from_micros(1_250),
            p50: Duration::from_millis(3),
            database,
        }
    }

    #[test]
    fn the_database_columns_show_only_on_postgres() {
        let sled = StoreReport {
            message_bytes: 512,
            backend: "sled",
            rows: vec![row("history 1000", None)],
        }
        .to_string();
        assert!(sled.contains("on sled"), "{sled}");
        assert!(!sled.contains("rows/turn"), "{sled}");
        let postgres = StoreReport {
            message_bytes: 512,
            backend: "postgres",
            rows: vec![row("history 1000", Some((8.0, 3_584)))],
        }
        .to_string();
        assert!(postgres.contains("rows/turn"), "{postgres}");
        let line = postgres.lines().last().unwrap();
        assert!(line.contains("8.0") && line.contains("3.5 K"), "{line}");
        assert!(line.contains("1.250 ms"), "{line}");
    }
}
