//! The `antler` command line: its types ([`args`]), one module per subcommand, and the daemon
//! client and locator the client commands share. `main` parses, loads the config, sets up
//! logging and calls in here.

// The command line is the one place that prints to stdout (the daemon logs).
#![allow(clippy::print_stdout)]

pub mod agents;
pub mod approvals;
mod args;
pub mod bench;
pub mod chat;
pub mod config;
pub mod daemon_client;
pub mod internal;
pub mod locate;
pub mod located;
pub mod logging;
pub mod mcp;
pub mod run;
pub mod schedules;
pub mod skills;
pub mod status;
pub mod store;
pub mod store_copy;
pub mod usage;
pub mod users;

use std::path::PathBuf;
use std::process::ExitCode;

pub use args::{Cli, Command};

use crate::config::LoadedConfig;

/// Runs a command that needs the loaded configuration: the daemon (the default), `bench` or
/// `store`. `config`, `internal` and the client commands ([`Command::is_client`]) are run
/// before the configuration is loaded, by [`config::run`], [`internal`] and [`located::run`].
pub async fn run(
    command: Option<Command>,
    loaded: LoadedConfig,
    cwd: PathBuf,
) -> anyhow::Result<ExitCode> {
    match command {
        None | Some(Command::Run) => run::run(loaded, &cwd).await,
        Some(Command::Bench { command }) => {
            bench::command::run(command).await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Store { command }) => {
            store::execute(loaded, command).await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(_) => Ok(ExitCode::SUCCESS),
    }
}

/// Runs `work` to completion on `runtime`, printing an error at the edge.
pub fn block_on(
    runtime: std::io::Result<tokio::runtime::Runtime>,
    work: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match work.await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {}", error_text(&e));
                ExitCode::FAILURE
            }
        }
    })
}

/// The chain, but a cause a message already quotes is not said twice.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1).map(ToString::to_string) {
        if !text.contains(&cause) {
            text = format!("{text}: {cause}");
        }
    }
    text
}
