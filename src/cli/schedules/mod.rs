//! `antler schedules list|show|pause|resume|remove|run`: the agent's scheduled tasks, through
//! the running daemon's socket (`/api/schedules…`, as the operator) or on the data dir.
//!
//! The operator's tool: it sees and changes every user's schedules, as the local socket and the
//! data dir allow anyway. `run` fires a slot, which only a daemon can run, so it refuses
//! without one instead of writing a claim nobody would finish.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::daemon_client::{DaemonClient, DaemonClientError, segment};
use crate::cli::locate::Target;
use crate::cluster::SystemWallClock;
use crate::config::AppConfig;
use crate::scheduler::{
    Caller, Fire, Schedule, SchedulePatch, ScheduleStatus, Scheduler, SchedulerError,
};

mod print;

/// The user `list` shows on an install without API tokens: the local operator.
const DEFAULT_CLI_USER: &str = "local";
/// Recent fires `show` prints.
const RECENT_FIRES: usize = 20;

#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// List schedules: id, owner, name, when, next fire, status, last outcome.
    List {
        /// Only this user's schedules (required with API tokens, unless --all).
        #[arg(long, value_name = "ID", value_parser = parse_user_id, conflicts_with = "all")]
        user: Option<String>,
        /// Every user's schedules.
        #[arg(long)]
        all: bool,
    },
    /// Show a schedule, its next fire times and its recent fires.
    Show { id: String },
    /// Pause a schedule: nothing fires until it is resumed.
    Pause { id: String },
    /// Resume a paused schedule: its next fire is the next slot from now.
    Resume { id: String },
    /// Remove a schedule (the records of its fires stay).
    Remove { id: String },
    /// Fire a schedule now, once (needs the running daemon).
    Run { id: String },
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulesCliError {
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error("the daemon's answer was not understood: {0}")]
    Protocol(#[from] serde_json::Error),
    #[error("could not write the output: {0}")]
    Output(#[from] std::io::Error),
    #[error(
        "running a schedule needs the daemon: start it (`antler run`, or its service), then run `antler schedules run {id}` again"
    )]
    NeedsDaemon { id: String },
    #[error("no schedule {id}; `antler schedules list --all` lists them with their ids")]
    NotFound { id: String },
    #[error(
        "whose schedules? gateway.api_tokens names several users ({users}); say --user ID (e.g. --user {example}) or --all"
    )]
    UserRequired { users: String, example: String },
}

/// `antler schedules`: errors exit 1 with their reason.
pub async fn execute(target: &Target, command: SchedulesCommand) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout();
    run(
        &target.loaded.config,
        target.daemon.as_ref(),
        command,
        &mut stdout,
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `command` through `daemon` when one runs, else on `config`'s data dir.
pub async fn run(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    command: SchedulesCommand,
    out: &mut dyn Write,
) -> Result<(), SchedulesCliError> {
    let id = match &command {
        SchedulesCommand::List { .. } => None,
        SchedulesCommand::Show { id }
        | SchedulesCommand::Pause { id }
        | SchedulesCommand::Resume { id }
        | SchedulesCommand::Remove { id }
        | SchedulesCommand::Run { id } => Some(id.clone()),
    };
    let result = match daemon {
        Some(daemon) => through_daemon(config, daemon, command, out).await,
        None => on_data_dir(config, command, out),
    };
    // One message for a missing schedule, whichever backend noticed it, in the CLI's words.
    result.map_err(|error| match (error, id) {
        (SchedulesCliError::Scheduler(SchedulerError::NotFound { .. }), Some(id)) => {
            SchedulesCliError::NotFound { id }
        }
        (SchedulesCliError::Daemon(DaemonClientError::Api { code, .. }), Some(id))
            if code == "schedule_not_found" =>
        {
            SchedulesCliError::NotFound { id }
        }
        (error, _) => error,
    })
}

async fn through_daemon(
    config: &AppConfig,
    daemon: &DaemonClient,
    command: SchedulesCommand,
    out: &mut dyn Write,
) -> Result<(), SchedulesCliError> {
    let one = |id: &str| format!("/api/schedules/{}", segment(id));
    match command {
        SchedulesCommand::List { user, all } => {
            let path = match list_user(config, user, all)? {
                Some(user) => format!("/api/schedules?user={}", segment(&user)),
                None => "/api/schedules".to_string(),
            };
            let body = daemon.send(Method::GET, &path, None).await?;
            let schedules: Vec<Schedule> = serde_json::from_value(body["schedules"].clone())?;
            out.write_all(print::table(&schedules).as_bytes())?;
        }
        SchedulesCommand::Show { id } => {
            let body = daemon.send(Method::GET, &one(&id), None).await?;
            let schedule: Schedule = serde_json::from_value(body["schedule"].clone())?;
            let fires: Vec<Fire> = serde_json::from_value(body["fires"].clone())?;
            let upcoming = upcoming_of(&body);
            out.write_all(print::details(&schedule, &upcoming, &fires).as_bytes())?;
        }
        SchedulesCommand::Pause { id } => {
            let body = json!({"status": "paused"});
            daemon.send(Method::PATCH, &one(&id), Some(&body)).await?;
            writeln!(out, "Paused schedule {id}.")?;
        }
        SchedulesCommand::Resume { id } => {
            let body = json!({"status": "active"});
            let answer = daemon.send(Method::PATCH, &one(&id), Some(&body)).await?;
            let schedule: Schedule = serde_json::from_value(answer["schedule"].clone())?;
            writeln!(
                out,
                "Resumed schedule {id}{}.",
                print::next_clause(&schedule)
            )?;
        }
        SchedulesCommand::Remove { id } => {
            daemon.send(Method::DELETE, &one(&id), None).await?;
            writeln!(out, "Removed schedule {id}.")?;
        }
        SchedulesCommand::Run { id } => {
            let path = format!("{}/run", one(&id));
            let body = daemon.send(Method::POST, &path, None).await?;
            let fire: Fire = serde_json::from_value(body["fire"].clone())?;
            writeln!(
                out,
                "Fired schedule {id} now (fire {}); its run goes on in the daemon.",
                fire.key()
            )?;
        }
    }
    Ok(())
}

fn on_data_dir(
    config: &AppConfig,
    command: SchedulesCommand,
    out: &mut dyn Write,
) -> Result<(), SchedulesCliError> {
    let scheduler = Scheduler::new(
        crate::storage::open_store(config)?,
        Arc::new(SystemWallClock),
    );
    let operator = Caller {
        user_id: DEFAULT_CLI_USER.to_string(),
        is_admin: true,
    };
    match command {
        SchedulesCommand::List { user, all } => {
            let user = list_user(config, user, all)?;
            let schedules: Vec<Schedule> = scheduler
                .list(&operator)?
                .into_iter()
                .filter(|s| user.as_ref().is_none_or(|user| &s.owner == user))
                .collect();
            out.write_all(print::table(&schedules).as_bytes())?;
        }
        SchedulesCommand::Show { id } => {
            let schedule = scheduler.get(&operator, &id)?;
            let fires = scheduler.store().fires(&schedule.id, RECENT_FIRES)?;
            let upcoming = print::upcoming(&schedule, scheduler.now());
            out.write_all(print::details(&schedule, &upcoming, &fires).as_bytes())?;
        }
        SchedulesCommand::Pause { id } => {
            let patch = SchedulePatch {
                status: Some(ScheduleStatus::Paused),
                ..SchedulePatch::default()
            };
            scheduler.change(&config.scheduler, &operator, &id, patch)?;
            writeln!(out, "Paused schedule {id}.")?;
        }
        SchedulesCommand::Resume { id } => {
            let patch = SchedulePatch {
                status: Some(ScheduleStatus::Active),
                ..SchedulePatch::default()
            };
            let schedule = scheduler.change(&config.scheduler, &operator, &id, patch)?;
            writeln!(
                out,
                "Resumed schedule {id}{}.",
                print::next_clause(&schedule)
            )?;
        }
        SchedulesCommand::Remove { id } => {
            scheduler.remove(&operator, &id)?;
            writeln!(out, "Removed schedule {id}.")?;
        }
        SchedulesCommand::Run { id } => return Err(SchedulesCliError::NeedsDaemon { id }),
    }
    Ok(())
}

/// Whose schedules `list` shows: `--user`, everyone's with `--all`, else the local operator's
/// on a token-less install. With tokens there is no obvious owner, so guessing is refused.
fn list_user(
    config: &AppConfig,
    user: Option<String>,
    all: bool,
) -> Result<Option<String>, SchedulesCliError> {
    if all {
        return Ok(None);
    }
    if let Some(user) = user {
        return Ok(Some(user));
    }
    let mut users: Vec<&str> = config
        .gateway
        .api_tokens
        .iter()
        .map(|t| t.user.as_str())
        .collect();
    users.sort_unstable();
    users.dedup();
    if users.is_empty() || users == [DEFAULT_CLI_USER] {
        return Ok(Some(DEFAULT_CLI_USER.to_string()));
    }
    Err(SchedulesCliError::UserRequired {
        example: users[0].to_string(),
        users: users.join(", "),
    })
}

/// The `upcoming` list of an answer, as `(RFC 3339, local label)`.
fn upcoming_of(body: &Value) -> Vec<(String, String)> {
    body["upcoming"]
        .as_array()
        .map(|slots| {
            slots
                .iter()
                .map(|slot| {
                    let text = |key: &str| slot[key].as_str().unwrap_or_default().to_string();
                    (text("at"), text("local"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parse_user_id(value: &str) -> Result<String, String> {
    crate::paths::validate_id("user", value)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
