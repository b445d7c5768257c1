//! `antler usage`: usage by user, day, model and kind of call (costs in `pricing.currency`,
//! unpriced models named), from the
//! running daemon (`GET /api/usage` over its socket, as the operator) or from the data dir.

use std::io::Write;

use reqwest::Method;

use crate::cli::daemon_client::{DaemonClient, DaemonClientError, segment};
use crate::config::AppConfig;
use crate::usage::{MAX_DAYS, UsageStore, report, today, window_rows};
use antler_store::StoreError;

#[derive(Debug, Clone, clap::Args)]
pub struct UsageArgs {
    /// Days up to and including today (1 = today only).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_DAYS))]
    pub days: u64,
    /// Only this user (an Antler user id such as `telegram-123`).
    #[arg(long)]
    pub user: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UsageCliError {
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("could not write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Prints the report of `args`, from `daemon` when one runs, else from `config`'s data dir.
pub async fn run(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    args: &UsageArgs,
    out: &mut dyn Write,
) -> Result<(), UsageCliError> {
    let text = match daemon {
        Some(client) => {
            let mut path = format!("/api/usage?days={}", args.days);
            if let Some(user) = &args.user {
                path.push_str(&format!("&user={}", segment(user)));
            }
            let body = client.send(Method::GET, &path, None).await?;
            body["report"]
                .as_str()
                .ok_or_else(|| {
                    DaemonClientError::Protocol("the usage answer has no `report`".into())
                })?
                .to_string()
        }
        None => {
            let usage = UsageStore::new(crate::storage::open_store(config)?);
            offline_report(&usage, config, args)?
        }
    };
    writeln!(out, "{text}")?;
    Ok(())
}

/// The report of `args`' window from `usage` (the data dir path; the daemon builds the same).
pub fn offline_report(
    usage: &UsageStore,
    config: &AppConfig,
    args: &UsageArgs,
) -> Result<String, StoreError> {
    let rows = window_rows(usage, args.user.as_deref(), args.days)?;
    Ok(report(&rows, &config.pricing, (args.days == 1).then(today)))
}
