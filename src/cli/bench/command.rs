//! `antler bench`'s subcommands and their dispatch: each runs one measurement and prints it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Subcommand;

use crate::cli::bench::daemon::soak::SoakOptions;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum StoreBenchBackend {
    Sled,
    Postgres,
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// One turn (1 message → 2 tool calls → answer) with a checkpoint per step; prints p50/p99.
    Turn {
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
    /// Building the lead agent (factory call, no model call) for the default, custom and
    /// bootstrap branches; prints p50/p99.
    Agent {
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
    /// The daemon binary: start-to-ready, idle RSS, and `/runs/wait` throughput with an instant
    /// model and concurrent clients.
    Daemon {
        #[arg(long, default_value_t = 50)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// A new thread per message (else one growing conversation per client).
        #[arg(long)]
        fresh_threads: bool,
        /// The daemon binary to measure (default: this one).
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Write bytes and daemon CPU per turn on fresh threads and at a history of 10, 100 and
    /// 1,000 messages; on PostgreSQL also rows and WAL bytes per turn.
    Store {
        /// The store the daemon runs on.
        #[arg(long, value_enum, default_value = "sled")]
        backend: StoreBenchBackend,
        /// The database of `--backend postgres` (default $ANTLER_DATABASE_URL); the bench's
        /// threads are added to it.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Measured turns per row.
        #[arg(long, default_value_t = 20)]
        turns: usize,
        /// Size of each message and answer.
        #[arg(long, default_value_t = 512)]
        message_bytes: usize,
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// RSS over a soak (sampled every 1,000 turns), then bursts of runs in flight against a
    /// slow model: peak RSS, RSS after, p50/p99, errors.
    Soak {
        #[arg(long, default_value_t = 10_000)]
        turns: u64,
        #[arg(long, default_value_t = 200)]
        threads: u64,
        #[arg(long, default_value_t = 8)]
        clients: u64,
        /// Runs in flight at once per burst (0: no burst).
        #[arg(long, default_value_t = 1000)]
        burst: usize,
        #[arg(long, default_value_t = 3)]
        bursts: usize,
        #[arg(long, default_value_t = 300)]
        model_delay_ms: u64,
        /// Seconds after a burst before RSS is read again.
        #[arg(long, default_value_t = 10)]
        settle_seconds: u64,
        #[arg(long, value_name = "PATH")]
        binary: Option<PathBuf>,
    },
    /// Overhead of a trivial `bash` call (`true`) per sandbox provider, against `sh -c true`.
    Sandbox {
        #[arg(long, default_value_t = 200)]
        iterations: usize,
    },
    /// What metering and budget checks add per model call (the check and the records alone,
    /// and a turn with the run's account on and off); prints p50/p99 and CPU.
    Meter {
        #[arg(long, default_value_t = 5000)]
        iterations: usize,
    },
    /// What the SSE encoder costs per run event (in process): Antler's own set and the SDK's
    /// stream modes over the same realistic run; prints median ns per event.
    Stream {
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
    },
}

/// Runs one benchmark and prints its report on stdout.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    let report = match command {
        BenchCommand::Turn { iterations } => crate::cli::bench::turn(iterations).await?.to_string(),
        BenchCommand::Agent { iterations } => {
            crate::cli::bench::factory(iterations).await?.to_string()
        }
        BenchCommand::Daemon {
            clients,
            seconds,
            fresh_threads,
            binary,
        } => {
            let seconds = Duration::from_secs(seconds.max(1));
            let binary = bench_binary(binary)?;
            crate::cli::bench::daemon::run(&binary, clients.max(1), seconds, fresh_threads)
                .await?
                .to_string()
        }
        BenchCommand::Store {
            backend,
            url,
            turns,
            message_bytes,
            binary,
        } => {
            use crate::cli::bench::daemon::store::BenchBackend;
            let binary = bench_binary(binary)?;
            let backend = match backend {
                StoreBenchBackend::Sled => BenchBackend::Sled,
                StoreBenchBackend::Postgres => BenchBackend::Postgres(
                    url.or_else(|| std::env::var(crate::cli::store::DATABASE_URL_VAR).ok())
                        .filter(|url| !url.is_empty())
                        .context(
                            "--backend postgres needs --url postgres://… or $ANTLER_DATABASE_URL",
                        )?,
                ),
            };
            crate::cli::bench::daemon::store::run(&binary, turns, message_bytes, backend)
                .await?
                .to_string()
        }
        BenchCommand::Soak {
            turns,
            threads,
            clients,
            burst,
            bursts,
            model_delay_ms,
            settle_seconds,
            binary,
        } => {
            let binary = bench_binary(binary)?;
            let options = SoakOptions {
                turns,
                threads,
                clients,
                burst_runs: burst,
                bursts,
                model_delay: Duration::from_millis(model_delay_ms),
                settle: Duration::from_secs(settle_seconds),
            };
            crate::cli::bench::daemon::soak::run(&binary, options)
                .await?
                .to_string()
        }
        BenchCommand::Sandbox { iterations } => sandbox(iterations).await?,
        BenchCommand::Meter { iterations } => crate::cli::bench::meter::meter(iterations)
            .await?
            .to_string(),
        BenchCommand::Stream { iterations } => {
            crate::cli::bench::stream::stream(iterations).to_string()
        }
    };
    println!("{report}");
    Ok(())
}

async fn sandbox(iterations: usize) -> anyhow::Result<String> {
    let scratch = std::env::temp_dir().join(format!("antler-bench-sandbox-{}", std::process::id()));
    let result = crate::sandbox::bench_bash_overhead(&scratch, iterations.max(1)).await;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(result?.to_string().trim_end().to_string())
}

/// The daemon binary a benchmark measures: the given one, else this one.
fn bench_binary(binary: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match binary {
        Some(binary) => Ok(binary),
        None => std::env::current_exe().context("cannot find the antler binary"),
    }
}
