//! `antler agents …`: manage custom agents, in the data directory or, while a daemon owns it,
//! through the daemon's local socket.
//!
//! The CLI is the operator's tool: whoever can run it can read the data directory anyway, so it
//! applies no admin rules (the daemon trusts its socket the same way); `--user` picks whose
//! agents to work on, and must be given once `gateway.api_tokens` names users.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgGroup, Subcommand};

mod backend;
mod commands;
mod error;

pub use crate::cli::agents::error::AgentsCliError;
use crate::cli::daemon_client::DaemonClient;
use crate::cli::locate::Target;
use crate::config::AppConfig;
use crate::custom_agents::AgentStoreError;

/// The user `--user` defaults to on an install without API tokens: the local operator.
pub const DEFAULT_CLI_USER: &str = "local";

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List the user's agents.
    List,
    /// Show an agent's config and SOUL.md.
    Show { name: String },
    /// Create an agent from a SOUL.md file.
    Create {
        name: String,
        /// One line saying what the agent is for.
        #[arg(long, default_value = "")]
        description: String,
        /// The agent's SOUL.md ('-' reads it from stdin).
        #[arg(long, value_name = "PATH")]
        soul_file: PathBuf,
        /// Preferred model (a `models[].name` of the config).
        #[arg(long)]
        model: Option<String>,
        /// Allowed tool groups, comma-separated (default: all groups; '' for none).
        #[arg(long, value_name = "LIST", value_parser = parse_list)]
        tool_groups: Option<NameList>,
        /// Enabled skills, comma-separated (default: all enabled skills; '' for none).
        #[arg(long, value_name = "LIST", value_parser = parse_list)]
        skills: Option<NameList>,
    },
    /// Change the given fields of an agent; the files it replaces are kept in its history.
    #[command(group(ArgGroup::new("change").required(true).multiple(true)))]
    Update {
        name: String,
        /// One line saying what the agent is for.
        #[arg(long, group = "change")]
        description: Option<String>,
        /// A new SOUL.md ('-' reads it from stdin).
        #[arg(long, value_name = "PATH", group = "change")]
        soul_file: Option<PathBuf>,
        /// Preferred model (a `models[].name` of the config).
        #[arg(long, group = "change")]
        model: Option<String>,
        /// Allowed tool groups, comma-separated ('' for none).
        #[arg(long, value_name = "LIST", value_parser = parse_list, group = "change")]
        tool_groups: Option<NameList>,
        /// Enabled skills, comma-separated ('' for none).
        #[arg(long, value_name = "LIST", value_parser = parse_list, group = "change")]
        skills: Option<NameList>,
    },
    /// Delete an agent and its history.
    Delete { name: String },
    /// List the earlier versions kept for an agent, oldest first.
    History { name: String },
    /// Restore an earlier version (the current one is kept in the history).
    Revert { name: String, version: String },
}

/// A comma-separated list of names from the command line; empty means "none".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameList(pub Vec<String>);

fn parse_list(value: &str) -> Result<NameList, String> {
    Ok(NameList(
        value
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
            .collect(),
    ))
}

/// Whose agents a command works on: `--user` if given (a valid id), else the local operator on
/// a token-less install. With tokens there is no obvious owner, so guessing is refused.
pub fn resolve_user(config: &AppConfig, requested: Option<&str>) -> Result<String, AgentsCliError> {
    if let Some(user) = requested {
        crate::paths::validate_id("user", user).map_err(AgentStoreError::InvalidUser)?;
        return Ok(user.to_string());
    }
    let mut users: Vec<&str> = config
        .gateway
        .api_tokens
        .iter()
        .map(|t| t.user.as_str())
        .collect();
    users.sort_unstable();
    users.dedup();
    // No tokens, or only the local operator's own (`ANTLER_API_TOKEN`): nobody else to mean.
    if users.is_empty() || users == [DEFAULT_CLI_USER] {
        return Ok(DEFAULT_CLI_USER.to_string());
    }
    Err(AgentsCliError::UserRequired {
        example: users[0].to_string(),
        users: users.join(", "),
    })
}

/// Runs one `antler agents` command for `user`, through `daemon` when one owns the data dir,
/// else on the config's data dir, printing to `out`.
pub async fn run(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    user: &str,
    command: AgentsCommand,
    out: &mut dyn Write,
) -> Result<(), AgentsCliError> {
    let name = match &command {
        AgentsCommand::List | AgentsCommand::Create { .. } => None,
        AgentsCommand::Show { name }
        | AgentsCommand::Update { name, .. }
        | AgentsCommand::Delete { name }
        | AgentsCommand::History { name }
        | AgentsCommand::Revert { name, .. } => Some(name.clone()),
    };
    // One message for a missing agent, whichever backend and command noticed it.
    commands::run(config, daemon, user, command, out)
        .await
        .map_err(|error| match (error, name) {
            (AgentsCliError::Store(AgentStoreError::NotFound { .. }), Some(name)) => {
                AgentsCliError::NotFound {
                    name,
                    user: user.to_string(),
                }
            }
            (error, _) => error,
        })
}

fn read_soul(path: &Path) -> Result<String, AgentsCliError> {
    let error = |source| AgentsCliError::SoulFile {
        path: path.display().to_string(),
        source,
    };
    if path == Path::new("-") {
        let mut soul = String::new();
        std::io::stdin().read_to_string(&mut soul).map_err(error)?;
        return Ok(soul);
    }
    std::fs::read_to_string(path).map_err(error)
}

/// `antler agents`: resolves whose agents, then runs `command` through the daemon of `target`
/// or on its data dir; usage errors exit 2.
pub async fn execute(
    target: &Target,
    user: Option<String>,
    command: AgentsCommand,
) -> anyhow::Result<ExitCode> {
    let config = &target.loaded.config;
    let result = async {
        let user = resolve_user(config, user.as_deref())?;
        let mut stdout = std::io::stdout();
        run(config, target.daemon.as_ref(), &user, command, &mut stdout).await
    }
    .await;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.is_usage() => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
