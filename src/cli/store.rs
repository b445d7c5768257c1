//! `antler store stats`, `compact` and `copy`: the store's footprint per user and per thread
//! (on either backend), an offline compaction of sled's files, and the move of a sled store
//! into PostgreSQL (`store_copy`). On sled the daemon must be stopped: sled is a
//! single-process database.

use crate::config::LoadedConfig;
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;

use crate::config::AppConfig;
use antler_store::maintenance::size;
use antler_store::sled_store::{self, SledStore};
use antler_store::threads::ThreadError;
use antler_store::{STORE_DIR, StoreError, ThreadStore};
use antler_store_postgres::{PgOptions, PgStore};

use crate::cli::store_copy::{self, CopyError};
use crate::config::StoreBackend;

/// Where `antler store copy` finds the target database when `--to` is not given.
pub const DATABASE_URL_VAR: &str = "ANTLER_DATABASE_URL";

#[derive(Debug, clap::Subcommand)]
pub enum StoreCommand {
    /// Size of the store per user and per thread (messages, log records, bytes).
    Stats,
    /// Drop superseded records (per store.retention_days) and rewrite the store's files so
    /// deleted threads and old records free their space. The daemon must be stopped. For the
    /// sled backend (PostgreSQL's autovacuum reclaims space on its own).
    Compact,
    /// Copy this data dir's sled store into a PostgreSQL database, to run with
    /// `store.backend: postgres` (README "Running several instances"). The daemon must be
    /// stopped; running it again copies only what is missing. Prints every tree's key count.
    Copy {
        /// The target database, postgres://user:password@host:5432/database (empty, or
        /// holding an earlier copy of this store); default $ANTLER_DATABASE_URL.
        #[arg(long, value_name = "URL")]
        to: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum StoreCliError {
    #[error(
        "the store at {0} is in use, most likely by a running daemon; stop it first \
         (`antler store` works on the data dir only)"
    )]
    Locked(String),
    #[error(
        "`antler store compact` rewrites sled's files; this data dir's store is PostgreSQL \
         (store.backend: postgres), whose autovacuum reclaims space (VACUUM FULL kv gives it \
         back to the file system); `store.retention_days` is applied by the daemon"
    )]
    CompactIsForSled,
    #[error(
        "no target database: pass --to postgres://user:password@host:5432/database or set \
         ${DATABASE_URL_VAR}"
    )]
    NoTarget,
    #[error(
        "no sled store at {0} to copy; point --config (or data_dir) at the data dir that holds \
         it"
    )]
    NothingToCopy(String),
    #[error(transparent)]
    Copy(#[from] CopyError),
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
        StoreCommand::Stats if config.store.backend == StoreBackend::Postgres => {
            let threads = ThreadStore::new(crate::storage::open_store(config)?)?;
            writeln!(out, "backend: postgres")?;
            write!(out, "{}", threads.stats()?)?;
        }
        StoreCommand::Stats => {
            let sled = SledStore::open_with_cache(&path, config.store.cache_capacity_mb)
                .map_err(locked)?;
            let disk = sled.size_on_disk()?;
            let threads = ThreadStore::new(Arc::new(sled))?;
            let mut stats = threads.stats()?;
            stats.disk_bytes = Some(disk);
            write!(out, "{stats}")?;
        }
        StoreCommand::Compact if config.store.backend == StoreBackend::Postgres => {
            return Err(StoreCliError::CompactIsForSled);
        }
        StoreCommand::Copy { to } => {
            let url = to
                .clone()
                .or_else(|| std::env::var(DATABASE_URL_VAR).ok())
                .filter(|url| !url.is_empty())
                .ok_or(StoreCliError::NoTarget)?;
            if !path.join("db").exists() {
                return Err(StoreCliError::NothingToCopy(path.display().to_string()));
            }
            let source = SledStore::open_with_cache(&path, config.store.cache_capacity_mb)
                .map_err(locked)?;
            let target =
                PgStore::open(&PgOptions { url, pool_size: 2 }).map_err(StoreError::from)?;
            writeln!(
                out,
                "copying {} into {}",
                path.display(),
                antler_store_postgres::redacted(&target_url(to))
            )?;
            let report = store_copy::copy(&source, &target)?;
            writeln!(out, "{report}")?;
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

/// The URL the copy went to, for its first line (the password is never printed).
fn target_url(to: &Option<String>) -> String {
    to.clone()
        .or_else(|| std::env::var(DATABASE_URL_VAR).ok())
        .unwrap_or_default()
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
