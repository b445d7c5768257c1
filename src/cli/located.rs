//! The commands that work through a running daemon when there is one (`status`, `chat`,
//! `agents`, `skills`, `mcp`, `usage`, `users`, `approvals`, `schedules`): find the daemon, say which (stderr), then work through
//! it, or load the whole config and work on the data dir.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::Command;
use crate::cli::chat::log::ChatLog;
use crate::cli::locate::TargetError;
use crate::config::{EXIT_CONFIG_INVALID, LogFormat, ProcessEnv};

/// Runs a command of [`Command::is_client`]; `flag` is the global `--config`.
pub async fn run(command: Command, flag: Option<&Path>, cwd: PathBuf) -> anyhow::Result<ExitCode> {
    // The chat logs apart from the conversation (a file in the data dir, errors on stderr).
    let chat_log = matches!(command, Command::Chat { .. }).then(|| ChatLog::install("info"));
    if chat_log.is_none() {
        crate::cli::logging::init_to(LogFormat::Text, "warn");
    }
    let locator = crate::config::read_locator(flag, &ProcessEnv, &cwd);
    if let Command::Status = command {
        let ready = crate::cli::status::run(&locator, &ProcessEnv, &mut std::io::stdout()).await?;
        return Ok(ExitCode::from(if ready { 0 } else { 1 }));
    }
    let target = match crate::cli::locate::target(&locator, flag, &ProcessEnv, &cwd).await {
        Ok(target) => target,
        Err(e @ TargetError::Config(_)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_CONFIG_INVALID as u8));
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!("{}", target.description);
    for warning in &target.loaded.warnings {
        tracing::warn!("{warning}");
    }
    let (config, daemon) = (&target.loaded.config, target.daemon.as_ref());
    let mut stdout = std::io::stdout();
    match command {
        Command::Chat { thread } => {
            crate::cli::chat::execute(target, thread, chat_log.unwrap_or_default()).await
        }
        Command::Agents { user, command } => {
            crate::cli::agents::execute(&target, user, command).await
        }
        Command::Skills { user, command } => {
            crate::cli::skills::execute(&target, user, command).await
        }
        Command::Mcp { command } => {
            let file = target.loaded.origin.file();
            Ok(crate::cli::mcp::run(config, file, daemon, command, &mut stdout).await?)
        }
        Command::Users { command } => crate::cli::users::execute(&target, command).await,
        Command::Schedules { command } => crate::cli::schedules::execute(&target, command).await,
        Command::Usage(args) => {
            crate::cli::usage::run(config, daemon, &args, &mut stdout).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Approvals { command } => {
            crate::cli::approvals::run(config, daemon, command, &mut stdout).await?;
            Ok(ExitCode::SUCCESS)
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
