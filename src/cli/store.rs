//! `antler store stats` and `antler store compact`: the store's footprint per user and per
//! thread, and an offline compaction, both on the data dir (the daemon must be stopped: the
//! store is a single-process database while it is sled).

use crate::config::LoadedConfig;
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;

use crate::config::AppConfig;
use antler_store::maintenance::size;
use antler_store::sled_store::{self, SledStore};
use antler_store::threads::ThreadError;
use antler_store::{STORE_DIR, StoreError, ThreadStore};

#[derive(Debug, clap::Subcommand)]
pub enum StoreCommand {
    /// Size of the store per user and per thread (messages, log records, bytes).
    Stats,
    /// Drop superseded records (per store.retention_days) and rewrite the store's files so
    /// deleted threads and old records free their space. The daemon must be stopped.
    Compact,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreCliError {
    #[error(
        "the store at {0} is in use, most likely by a running daemon; stop it first \
         (`antler store` works on the data dir only)"
    )]
    Locked(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error("could not write the output: {0}")]
    Output(#[from] std::io::Error),
}

pub fn run(
    config: &AppConfig,
    command: &StoreCommand,
    out: &mut dyn Write,
) -> Result<(), StoreCliError> {
    let path = config.data_dir().join(STORE_DIR);
    let locked = |e: StoreError| match e {
        StoreError::Locked { path } => StoreCliError::Locked(path),
        other => StoreCliError::Store(other),
    };
    match command {
        StoreCommand::Stats => {
            let sled = SledStore::open_with_cache(&path, config.store.cache_capacity_mb)
                .map_err(locked)?;
            let disk = sled.size_on_disk()?;
            let threads = ThreadStore::new(Arc::new(sled))?;
            let mut stats = threads.stats()?;
            stats.disk_bytes = Some(disk);
            write!(out, "{stats}")?;
        }
        StoreCommand::Compact => {
            let days = config.store.retention_days;
            {
                let sled = SledStore::open_with_cache(&path, config.store.cache_capacity_mb)
                    .map_err(locked)?;
                let threads = ThreadStore::new(Arc::new(sled))?;
                if days > 0 {
                    let report = threads.apply_retention(days)?;
                    writeln!(
                        out,
                        "retention ({days} days): dropped {} superseded records ({}) in {} threads",
                        report.records,
                        size(report.bytes),
                        report.threads
                    )?;
                }
                threads.flush()?;
            }
            let report =
                sled_store::compact(&path, config.store.cache_capacity_mb).map_err(locked)?;
            writeln!(
                out,
                "compacted {}: {} -> {} ({} keys)",
                path.display(),
                size(report.bytes_before),
                size(report.bytes_after),
                report.keys
            )?;
        }
    }
    Ok(())
}

/// `antler store`: runs `command` on the data dir of `loaded` (off the async workers: the store
/// is synchronous), saying which data dir on stderr.
pub async fn execute(loaded: LoadedConfig, command: StoreCommand) -> anyhow::Result<()> {
    let config = loaded.config;
    eprintln!("antler: using the data dir {}", config.data_dir().display());
    tokio::task::spawn_blocking(move || run(&config, &command, &mut std::io::stdout()))
        .await
        .context("the store command did not finish")??;
    Ok(())
}
