//! One function per `antler agents` subcommand: each asks the backend (the daemon or the data
//! dir) and prints what happened.

use std::io::Write;

use crate::cli::agents::backend::Backend;
use crate::cli::agents::{AgentsCliError, AgentsCommand, read_soul};
use crate::cli::daemon_client::DaemonClient;
use crate::config::AppConfig;
use crate::custom_agents::authorship::author_label;
use crate::custom_agents::{AgentConfig, AgentStore, AgentStoreError, AgentUpdate, VersionInfo};

/// What every subcommand works with: the backend, whose agents, and where it prints.
struct Session<'a> {
    config: &'a AppConfig,
    agents: Backend<'a>,
    user: &'a str,
    out: &'a mut dyn Write,
}

/// Runs `command` for `user` through `daemon`, else on the config's data dir.
pub(super) async fn run(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    user: &str,
    command: AgentsCommand,
    out: &mut dyn Write,
) -> Result<(), AgentsCliError> {
    let mut session = Session {
        config,
        agents: Backend::new(config, daemon, user),
        user,
        out,
    };
    match command {
        AgentsCommand::List => session.list().await,
        AgentsCommand::Show { name } => session.show(&name).await,
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
            session.create(&agent, &soul).await
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
            session.update(&name, update).await
        }
        AgentsCommand::Delete { name } => session.delete(&name).await,
        AgentsCommand::History { name } => session.history(&name).await,
        AgentsCommand::Revert { name, version } => session.revert(&name, &version).await,
    }
}

impl Session<'_> {
    async fn list(&mut self) -> Result<(), AgentsCliError> {
        let user = self.user;
        let list = self.agents.list(user).await?;
        if list.is_empty() {
            writeln!(self.out, "no agents for user '{user}'")?;
        }
        for agent in list {
            let model = agent.model.as_deref().unwrap_or("(default model)");
            writeln!(
                self.out,
                "{:<24} {:<20} {}",
                agent.name, model, agent.description
            )?;
        }
        Ok(())
    }

    async fn show(&mut self, name: &str) -> Result<(), AgentsCliError> {
        let agent =
            self.agents
                .get(self.user, name)
                .await?
                .ok_or_else(|| AgentsCliError::NotFound {
                    name: name.to_string(),
                    user: self.user.to_string(),
                })?;
        let yaml = agent
            .config
            .to_yaml()
            .map_err(|source| AgentStoreError::Config {
                name: name.to_string(),
                source,
            })?;
        writeln!(self.out, "# config.yaml\n{}", yaml.trim_end())?;
        writeln!(self.out, "\n# SOUL.md\n{}", agent.soul.trim_end())?;
        Ok(())
    }

    async fn create(&mut self, agent: &AgentConfig, soul: &str) -> Result<(), AgentsCliError> {
        let user = self.user;
        let created = self.agents.create(user, agent, soul).await?;
        let dir = AgentStore::new(self.config.data_dir()).agent_dir(user, &agent.name)?;
        writeln!(
            self.out,
            "created agent '{}' for user '{user}' in {}",
            created.config.name,
            dir.display()
        )?;
        Ok(())
    }

    async fn update(&mut self, name: &str, update: AgentUpdate) -> Result<(), AgentsCliError> {
        if update == AgentUpdate::default() {
            return Err(AgentsCliError::NothingToUpdate);
        }
        let user = self.user;
        let outcome = self.agents.update(user, name, update).await?;
        let name = name.to_ascii_lowercase();
        if outcome.fields.is_empty() {
            writeln!(
                self.out,
                "agent '{name}' of user '{user}' already has these values; nothing changed"
            )?;
            return Ok(());
        }
        write!(
            self.out,
            "updated agent '{name}' of user '{user}': {}",
            outcome.fields.join(", ")
        )?;
        self.kept_as(outcome.archived_version)
    }

    async fn delete(&mut self, name: &str) -> Result<(), AgentsCliError> {
        let user = self.user;
        self.agents.delete(user, name).await?;
        writeln!(
            self.out,
            "deleted agent '{}' of user '{user}'",
            name.to_ascii_lowercase()
        )?;
        Ok(())
    }

    async fn history(&mut self, name: &str) -> Result<(), AgentsCliError> {
        let (versions, current) = self.agents.history(self.user, name).await?;
        if versions.is_empty() {
            writeln!(self.out, "agent '{name}' has no earlier versions")?;
        }
        for version in versions {
            writeln!(self.out, "{}", history_line(&version))?;
        }
        if let Some(current) = current {
            writeln!(self.out, "{}  (current)", history_line(&current))?;
        }
        Ok(())
    }

    async fn revert(&mut self, name: &str, version: &str) -> Result<(), AgentsCliError> {
        let archived = self.agents.revert(self.user, name, version).await?;
        write!(
            self.out,
            "agent '{}' reverted to version {version}",
            name.to_ascii_lowercase()
        )?;
        self.kept_as(archived)
    }

    /// Ends a confirmation line with the version the replaced files are kept as, if any.
    fn kept_as(&mut self, archived: Option<String>) -> Result<(), AgentsCliError> {
        match archived {
            Some(id) => writeln!(self.out, "; the replaced files are kept as version {id}")?,
            None => writeln!(self.out)?,
        }
        Ok(())
    }
}

fn history_line(version: &VersionInfo) -> String {
    let short = |hash: &Option<String>| {
        hash.as_deref()
            .map(|h| h.chars().take(12).collect::<String>())
            .unwrap_or_else(|| "-".to_string())
    };
    format!(
        "{}  {}  soul {}  config {}  by {}: {}",
        version.id,
        version.created_at.format("%Y-%m-%d %H:%M:%S UTC"),
        short(&version.soul_sha256),
        short(&version.config_sha256),
        author_label(version.author.as_ref()),
        version.summary.as_deref().unwrap_or("change not known"),
    )
}
