//! `antler skills list|enable|disable|install|remove`: through the running daemon's local
//! socket (`/api/skills`, as the operator acting for `--user`), or on the data dir when no
//! daemon owns it. The CLI is the operator's tool, so it may toggle public skills.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::daemon_client::{DaemonClient, DaemonClientError, segment};
use crate::cli::locate::Target;
use crate::config::AppConfig;
use crate::skills::{Skill, SkillCatalog, SkillError, SkillSource, SkillsLoader};
use antler_store::StoreError;

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
    /// `reason` is text, not a source: the CLI prints the error chain, and would say it twice.
    #[error("cannot read the archive {path}: {reason}; check the path")]
    Archive { path: String, reason: String },
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
            crate::skills::bundled::install_for(config);
            let store = crate::storage::open_store(config)?;
            let catalog = SkillCatalog::from_config(config, store, Arc::new(SkillsLoader::new()));
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
            let looked_in = LookedIn {
                public: catalog.public_dir().display().to_string(),
                custom: catalog.custom_dir(user)?.display().to_string(),
            };
            print_rows(&rows, Some(&looked_in), user, out)
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
            // The daemon names its directories to the operator (older daemons do not).
            let looked_in = match (body["public_dir"].as_str(), body["custom_dir"].as_str()) {
                (Some(public), Some(custom)) => Some(LookedIn {
                    public: public.to_string(),
                    custom: custom.to_string(),
                }),
                _ => None,
            };
            let user = body["user"].as_str().unwrap_or("local").to_string();
            print_rows(&rows, looked_in.as_ref(), &user, out)
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
    std::fs::read(file).map_err(|error| SkillsCliError::Archive {
        path: file.display().to_string(),
        reason: error.to_string(),
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

/// The directories a listing came from.
struct LookedIn {
    public: String,
    custom: String,
}

/// One line a skill: name, source, state, short hash, description; then where they came from.
fn print_rows(
    rows: &[Row],
    looked_in: Option<&LookedIn>,
    user: &str,
    out: &mut dyn Write,
) -> Result<(), SkillsCliError> {
    if rows.is_empty() {
        match looked_in {
            Some(dirs) => writeln!(
                out,
                "No skills in {} (public) nor in {} (custom skills of {user}).",
                dirs.public, dirs.custom
            )?,
            None => writeln!(out, "No skills.")?,
        }
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
    if let Some(dirs) = looked_in {
        writeln!(
            out,
            "(public skills from {}; custom skills of {user} from {})",
            dirs.public, dirs.custom
        )?;
    }
    Ok(())
}

/// `antler skills`: resolves whose skills (a bad `--user` is a usage error, exit 2), then runs
/// `command` through the daemon of `target` or on its data dir.
pub async fn execute(
    target: &Target,
    user: Option<String>,
    command: SkillsCommand,
) -> anyhow::Result<ExitCode> {
    let config = &target.loaded.config;
    let user = match crate::cli::agents::resolve_user(config, user.as_deref()) {
        Ok(user) => user,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut stdout = std::io::stdout();
    run(config, target.daemon.as_ref(), &user, command, &mut stdout).await?;
    Ok(ExitCode::SUCCESS)
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
