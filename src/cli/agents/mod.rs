//! `antler agents …`: manage custom agents, in the data directory or, while a daemon owns it,
//! through the daemon's local socket.
//!
//! The CLI is the operator's tool: whoever can run it can read the data directory anyway, so it
//! applies no admin rules (the daemon trusts its socket the same way); `--user` picks whose
//! agents to work on, and must be given once `gateway.api_tokens` names users.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Subcommand};

mod backend;
mod error;

use crate::cli::agents::backend::Backend;
pub use crate::cli::agents::error::AgentsCliError;
use crate::cli::daemon_client::DaemonClient;
use crate::cli::locate::Target;
use crate::config::AppConfig;
use crate::custom_agents::{AgentConfig, AgentStore, AgentStoreError, AgentUpdate, VersionInfo};
use std::process::ExitCode;

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
    run_command(config, daemon, user, command, out)
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

async fn run_command(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    user: &str,
    command: AgentsCommand,
    out: &mut dyn Write,
) -> Result<(), AgentsCliError> {
    let agents = Backend::new(config, daemon, user);
    let not_found = |name: &str| AgentsCliError::NotFound {
        name: name.to_string(),
        user: user.to_string(),
    };
    match command {
        AgentsCommand::List => {
            let list = agents.list(user).await?;
            if list.is_empty() {
                writeln!(out, "no agents for user '{user}'")?;
            }
            for agent in list {
                let model = agent.model.as_deref().unwrap_or("(default model)");
                writeln!(
                    out,
                    "{:<24} {:<20} {}",
                    agent.name, model, agent.description
                )?;
            }
        }
        AgentsCommand::Show { name } => {
            let agent = agents
                .get(user, &name)
                .await?
                .ok_or_else(|| not_found(&name))?;
            let yaml = agent
                .config
                .to_yaml()
                .map_err(|source| AgentStoreError::Config {
                    name: name.clone(),
                    source,
                })?;
            writeln!(out, "# config.yaml\n{}", yaml.trim_end())?;
            writeln!(out, "\n# SOUL.md\n{}", agent.soul.trim_end())?;
        }
        AgentsCommand::Create {
            name,
            description,
            soul_file,
            model,
            tool_groups,
            skills,
        } => {
            let soul = read_soul(&soul_file)?;
            let mut agent = AgentConfig::new(name.clone(), description.trim());
            agent.model = model;
            agent.tool_groups = tool_groups.map(|l| l.0);
            agent.skills = skills.map(|l| l.0);
            let created = agents.create(user, &agent, &soul).await?;
            writeln!(
                out,
                "created agent '{}' for user '{user}' in {}",
                created.config.name,
                AgentStore::new(config.data_dir())
                    .agent_dir(user, &name)?
                    .display()
            )?;
        }
        AgentsCommand::Update {
            name,
            description,
            soul_file,
            model,
            tool_groups,
            skills,
        } => {
            let update = AgentUpdate {
                soul: soul_file.as_deref().map(read_soul).transpose()?,
                description: description.map(|d| d.trim().to_string()),
                model,
                tool_groups: tool_groups.map(|l| l.0),
                skills: skills.map(|l| l.0),
                ..Default::default()
            };
            if update == AgentUpdate::default() {
                return Err(AgentsCliError::NothingToUpdate);
            }
            let outcome = agents.update(user, &name, update).await?;
            let name = name.to_ascii_lowercase();
            if outcome.fields.is_empty() {
                writeln!(
                    out,
                    "agent '{name}' of user '{user}' already has these values; nothing changed"
                )?;
            } else {
                write!(
                    out,
                    "updated agent '{name}' of user '{user}': {}",
                    outcome.fields.join(", ")
                )?;
                match outcome.archived_version {
                    Some(id) => writeln!(out, "; the replaced files are kept as version {id}")?,
                    None => writeln!(out)?,
                }
            }
        }
        AgentsCommand::Delete { name } => {
            agents.delete(user, &name).await?;
            writeln!(
                out,
                "deleted agent '{}' of user '{user}'",
                name.to_ascii_lowercase()
            )?;
        }
        AgentsCommand::History { name } => {
            let versions = agents.history(user, &name).await?;
            if versions.is_empty() {
                writeln!(out, "agent '{name}' has no earlier versions")?;
            }
            for version in versions {
                writeln!(out, "{}", history_line(&version))?;
            }
        }
        AgentsCommand::Revert { name, version } => {
            let archived = agents.revert(user, &name, &version).await?;
            write!(
                out,
                "agent '{}' reverted to version {version}",
                name.to_ascii_lowercase()
            )?;
            match archived {
                Some(id) => writeln!(out, "; the replaced files are kept as version {id}")?,
                None => writeln!(out)?,
            }
        }
    }
    Ok(())
}

fn history_line(version: &VersionInfo) -> String {
    let short = |hash: &Option<String>| {
        hash.as_deref()
            .map(|h| h.chars().take(12).collect::<String>())
            .unwrap_or_else(|| "-".to_string())
    };
    format!(
        "{}  {}  soul {}  config {}",
        version.id,
        version.created_at.format("%Y-%m-%d %H:%M:%S UTC"),
        short(&version.soul_sha256),
        short(&version.config_sha256)
    )
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
