//! `antler skills list|enable|disable|install|remove`: through the running daemon's local
//! socket (`/api/skills`, as the operator acting for `--user`), or on the data dir when no
//! daemon owns it. The CLI is the operator's tool, so it may toggle public skills.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use crate::config::AppConfig;
use crate::daemon_client::{DaemonClient, DaemonClientError, segment};
use crate::skills::{Skill, SkillCatalog, SkillError, SkillSource, SkillsLoader};
use crate::store::{STORE_DIR, SledStore, StoreError};

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// List the skills the user can see: source, enabled state, archive hash.
    List,
    /// Enable a skill (public skills: for everyone).
    Enable { name: String },
    /// Disable a skill (public skills: for everyone).
    Disable { name: String },
    /// Install a .skill/.zip archive as one of the user's custom skills.
    Install { file: PathBuf },
    /// Delete one of the user's custom skills.
    Remove { name: String },
}

#[derive(Debug, thiserror::Error)]
pub enum SkillsCliError {
    #[error(transparent)]
    Skill(#[from] SkillError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error("cannot read {path}: {source}")]
    Archive {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the daemon's answer is not a skill list: {0}")]
    Protocol(String),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// A skill as the CLI prints it, from either backend.
#[derive(Debug, serde::Deserialize)]
struct Row {
    name: String,
    description: String,
    source: String,
    enabled: bool,
    sha256: Option<String>,
}

impl From<Skill> for Row {
    fn from(skill: Skill) -> Self {
        Row {
            name: skill.name,
            description: skill.description,
            source: match skill.source {
                SkillSource::Public => "public".into(),
                SkillSource::Custom => "custom".into(),
            },
            enabled: skill.enabled,
            sha256: skill.sha256,
        }
    }
}

/// Runs one command for `user`, through `daemon` when one owns the data dir.
pub async fn run(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    user: &str,
    command: SkillsCommand,
    out: &mut dyn Write,
) -> Result<(), SkillsCliError> {
    match daemon {
        Some(daemon) => via_daemon(&daemon.clone().acting_as(user), command, out).await,
        None => {
            let store = SledStore::open_with_cache(
                config.data_dir().join(STORE_DIR),
                config.store.cache_capacity_mb,
            )?;
            let catalog =
                SkillCatalog::from_config(config, Arc::new(store), Arc::new(SkillsLoader::new()));
            on_data_dir(&catalog, user, command, out)
        }
    }
}

/// The data-dir backend (also what tests drive directly).
pub fn on_data_dir(
    catalog: &SkillCatalog,
    user: &str,
    command: SkillsCommand,
    out: &mut dyn Write,
) -> Result<(), SkillsCliError> {
    match command {
        SkillsCommand::List => {
            let rows: Vec<Row> = catalog.list(user)?.into_iter().map(Row::from).collect();
            print_rows(&rows, out)
        }
        SkillsCommand::Enable { name } => {
            catalog.set_enabled(user, &name, true, true)?;
            writeln!(out, "Enabled {name}.")?;
            Ok(())
        }
        SkillsCommand::Disable { name } => {
            catalog.set_enabled(user, &name, false, true)?;
            writeln!(out, "Disabled {name}.")?;
            Ok(())
        }
        SkillsCommand::Install { file } => {
            let skill = catalog.install(user, &read_archive(&file)?)?;
            print_installed(&skill.name, skill.sha256.as_deref(), out)
        }
        SkillsCommand::Remove { name } => {
            catalog.remove(user, &name)?;
            writeln!(out, "Removed {name}.")?;
            Ok(())
        }
    }
}

async fn via_daemon(
    daemon: &DaemonClient,
    command: SkillsCommand,
    out: &mut dyn Write,
) -> Result<(), SkillsCliError> {
    match command {
        SkillsCommand::List => {
            let body = daemon.send(Method::GET, "/api/skills", None).await?;
            let rows: Vec<Row> = serde_json::from_value(body["skills"].clone())
                .map_err(|e| SkillsCliError::Protocol(e.to_string()))?;
            print_rows(&rows, out)
        }
        SkillsCommand::Enable { name } => toggle(daemon, &name, true, out).await,
        SkillsCommand::Disable { name } => toggle(daemon, &name, false, out).await,
        SkillsCommand::Install { file } => {
            let bytes = read_archive(&file)?;
            let file_name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "skill.zip".into());
            let body = daemon
                .send_file("/api/skills/install", &file_name, bytes)
                .await?;
            let name = body["name"].as_str().unwrap_or_default();
            print_installed(name, body["sha256"].as_str(), out)
        }
        SkillsCommand::Remove { name } => {
            let path = format!("/api/skills/{}", segment(&name));
            daemon.send(Method::DELETE, &path, None).await?;
            writeln!(out, "Removed {name}.")?;
            Ok(())
        }
    }
}

async fn toggle(
    daemon: &DaemonClient,
    name: &str,
    enabled: bool,
    out: &mut dyn Write,
) -> Result<(), SkillsCliError> {
    let path = format!("/api/skills/{}", segment(name));
    let body: Value = json!({ "enabled": enabled });
    daemon.send(Method::PUT, &path, Some(&body)).await?;
    writeln!(
        out,
        "{} {name}.",
        if enabled { "Enabled" } else { "Disabled" }
    )?;
    Ok(())
}

fn read_archive(file: &Path) -> Result<Vec<u8>, SkillsCliError> {
    std::fs::read(file).map_err(|source| SkillsCliError::Archive {
        path: file.display().to_string(),
        source,
    })
}

fn print_installed(
    name: &str,
    sha256: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), SkillsCliError> {
    writeln!(
        out,
        "Installed {name} (sha256 {}). Use it with /{name} <task>.",
        sha256.unwrap_or("unknown")
    )?;
    Ok(())
}

/// One line a skill: name, source, state, short hash, description.
fn print_rows(rows: &[Row], out: &mut dyn Write) -> Result<(), SkillsCliError> {
    if rows.is_empty() {
        writeln!(out, "No skills.")?;
        return Ok(());
    }
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for row in rows {
        let hash = row
            .sha256
            .as_deref()
            .map(|h| format!("sha256:{}", &h[..h.len().min(12)]))
            .unwrap_or_else(|| "-".into());
        let mut description: String = row.description.chars().take(60).collect();
        if row.description.chars().count() > 60 {
            description.push('…');
        }
        writeln!(
            out,
            "{:width$}  {:6}  {:8}  {:19}  {description}",
            row.name,
            row.source,
            if row.enabled { "enabled" } else { "disabled" },
            hash,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_list_disable_remove_on_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = crate::skills::catalog::tests::shipped_catalog(dir.path());
        let archive = dir.path().join("weekly.skill");
        std::fs::write(
            &archive,
            crate::skills::catalog::tests::skill_zip("weekly-report", None),
        )
        .unwrap();
        let run = |command| {
            let mut out = Vec::new();
            on_data_dir(&catalog, "local", command, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let installed = run(SkillsCommand::Install {
            file: archive.clone(),
        });
        assert!(
            installed.starts_with("Installed weekly-report (sha256 "),
            "{installed}"
        );
        run(SkillsCommand::Disable {
            name: "weekly-report".into(),
        });
        let listed = run(SkillsCommand::List);
        let line = listed
            .lines()
            .find(|l| l.starts_with("weekly-report"))
            .unwrap();
        assert!(
            line.contains("custom") && line.contains("disabled"),
            "{line}"
        );
        assert!(line.contains("sha256:"), "{line}");
        assert!(
            listed
                .lines()
                .any(|l| l.starts_with("bootstrap") && l.contains("public"))
        );
        run(SkillsCommand::Remove {
            name: "weekly-report".into(),
        });
        assert!(!run(SkillsCommand::List).contains("weekly-report"));
    }
}
