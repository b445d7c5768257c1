//! `antler agents …`: manage custom agents straight in the data directory (no daemon needed).
//!
//! The CLI is the operator's tool: whoever can run it can read the data directory anyway, so it
//! applies no admin rules; `--user` picks whose agents to work on.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::agents::{AgentConfig, AgentStore, AgentStoreError, VersionInfo};
use crate::config::AppConfig;

/// The user `--user` defaults to: the local operator.
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
    },
    /// Delete an agent and its history.
    Delete { name: String },
    /// List the earlier versions kept for an agent, oldest first.
    History { name: String },
    /// Restore an earlier version (the current one is kept in the history).
    Revert { name: String, version: String },
}

#[derive(Debug, thiserror::Error)]
pub enum AgentsCliError {
    #[error(transparent)]
    Store(#[from] AgentStoreError),
    #[error(
        "no agent named '{name}' for user '{user}'; list them with `antler agents list --user {user}`"
    )]
    NotFound { name: String, user: String },
    #[error("cannot read the soul file {path}: {source}")]
    SoulFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("model '{model}' is not configured; use one of: {available}")]
    UnknownModel { model: String, available: String },
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs one `antler agents` command for `user` on the config's data dir, printing to `out`.
pub fn run(
    config: &AppConfig,
    user: &str,
    command: AgentsCommand,
    out: &mut dyn Write,
) -> Result<(), AgentsCliError> {
    let store = AgentStore::new(config.data_dir());
    match command {
        AgentsCommand::List => {
            let agents = store.list(user)?;
            if agents.is_empty() {
                writeln!(out, "no agents for user '{user}'")?;
            }
            for agent in agents {
                let model = agent.model.as_deref().unwrap_or("(default model)");
                writeln!(
                    out,
                    "{:<24} {:<20} {}",
                    agent.name, model, agent.description
                )?;
            }
        }
        AgentsCommand::Show { name } => {
            let agent = store
                .get(user, &name)?
                .ok_or_else(|| AgentsCliError::NotFound {
                    name: name.clone(),
                    user: user.to_string(),
                })?;
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
        } => {
            if let Some(model) = &model {
                check_model(config, model)?;
            }
            let soul = read_soul(&soul_file)?;
            let mut agent = AgentConfig::new(name.clone(), description.trim());
            agent.model = model;
            let created = store.create(user, &name, &agent, &soul)?;
            writeln!(
                out,
                "created agent '{}' for user '{user}' in {}",
                created.config.name,
                store.agent_dir(user, &name)?.display()
            )?;
        }
        AgentsCommand::Delete { name } => {
            store.delete(user, &name)?;
            writeln!(
                out,
                "deleted agent '{}' of user '{user}'",
                name.to_ascii_lowercase()
            )?;
        }
        AgentsCommand::History { name } => {
            let versions = store.history(user, &name)?;
            if versions.is_empty() {
                writeln!(out, "agent '{name}' has no earlier versions")?;
            }
            for version in versions {
                writeln!(out, "{}", history_line(&version))?;
            }
        }
        AgentsCommand::Revert { name, version } => {
            let archived = store.revert(user, &name, &version)?;
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

fn check_model(config: &AppConfig, model: &str) -> Result<(), AgentsCliError> {
    if config.model(model).is_some() {
        return Ok(());
    }
    let names: Vec<&str> = config.models.iter().map(|m| m.name.as_str()).collect();
    Err(AgentsCliError::UnknownModel {
        model: model.to_string(),
        available: if names.is_empty() {
            "(no models are configured)".to_string()
        } else {
            names.join(", ")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;

    fn run_ok(config: &AppConfig, user: &str, command: AgentsCommand) -> String {
        let mut out = Vec::new();
        run(config, user, command, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn create_show_history_revert_delete() {
        let tmp = tempfile::tempdir().unwrap();
        let config = AppConfig {
            data_dir: Some(tmp.path().join("data")),
            models: vec![ModelConfig {
                name: "main".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let soul_file = tmp.path().join("soul.md");
        std::fs::write(&soul_file, "First soul.").unwrap();
        let created = run_ok(
            &config,
            "alice",
            AgentsCommand::Create {
                name: "Helper".into(),
                description: "Helps".into(),
                soul_file: soul_file.clone(),
                model: Some("main".into()),
            },
        );
        assert!(
            created.starts_with("created agent 'helper' for user 'alice'"),
            "{created}"
        );
        let list = run_ok(&config, "alice", AgentsCommand::List);
        assert!(list.contains("helper") && list.contains("main") && list.contains("Helps"));
        assert_eq!(
            run_ok(&config, "bob", AgentsCommand::List),
            "no agents for user 'bob'\n"
        );

        let store = AgentStore::new(config.data_dir());
        store
            .update(
                "alice",
                "helper",
                crate::agents::AgentUpdate {
                    soul: Some("Second soul.".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        let history = run_ok(
            &config,
            "alice",
            AgentsCommand::History {
                name: "helper".into(),
            },
        );
        assert!(history.starts_with("000001  "), "{history}");
        let reverted = run_ok(
            &config,
            "alice",
            AgentsCommand::Revert {
                name: "helper".into(),
                version: "000001".into(),
            },
        );
        assert!(
            reverted.contains("reverted to version 000001"),
            "{reverted}"
        );
        let shown = run_ok(
            &config,
            "alice",
            AgentsCommand::Show {
                name: "helper".into(),
            },
        );
        assert!(shown.contains("# SOUL.md\nFirst soul.") && shown.contains("model: main"));

        let mut out = Vec::new();
        let err = run(
            &config,
            "bob",
            AgentsCommand::Show {
                name: "helper".into(),
            },
            &mut out,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("no agent named 'helper' for user 'bob'")
        );
        let err = run(
            &config,
            "alice",
            AgentsCommand::Create {
                name: "other".into(),
                description: String::new(),
                soul_file,
                model: Some("gpt-nope".into()),
            },
            &mut out,
        )
        .unwrap_err();
        assert!(matches!(err, AgentsCliError::UnknownModel { .. }), "{err}");

        run_ok(
            &config,
            "alice",
            AgentsCommand::Delete {
                name: "helper".into(),
            },
        );
        assert!(store.get("alice", "helper").unwrap().is_none());
    }
}
