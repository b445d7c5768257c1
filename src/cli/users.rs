//! `antler users list|show|link|unlink`: which accounts act as which user, through the running
//! daemon's socket (`/api/users…`) or on the data dir. The operator's tool: no admin rules, and
//! links made here need no code.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;
use reqwest::Method;
use serde_json::json;

use crate::cli::daemon_client::{DaemonClient, DaemonClientError, segment};
use crate::cli::locate::Target;
use crate::config::AppConfig;
use crate::custom_agents::AgentStore;
use crate::identity::{Account, AccountError, AccountView, Identities, IdentityError, UserSummary};
use crate::users::{Holdings, HoldingsView, UserReport, UsersError};

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// List the users that accounts were joined to (by `identities:` or links), with them.
    List,
    /// Show a user's accounts, what the user holds, and what its linked accounts left under
    /// their own ids.
    Show {
        #[arg(value_parser = parse_user_id)]
        user: String,
    },
    /// Join an account (APP:ID, e.g. slack:U0123ABCD or telegram:42) to a user.
    Link {
        account: String,
        #[arg(value_parser = parse_user_id)]
        user: String,
    },
    /// Make an account its own user again (what it did while linked stays with that user).
    Unlink { account: String },
}

#[derive(Debug, thiserror::Error)]
pub enum UsersCliError {
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Users(#[from] UsersError),
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error(transparent)]
    Account(#[from] AccountError),
    #[error("the daemon's answer was not understood: {0}")]
    Protocol(#[from] serde_json::Error),
    #[error("could not write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// `antler users`: a refusal (already linked, not linked, a bad account) exits 1 with its
/// reason, like every error.
pub async fn execute(target: &Target, command: UsersCommand) -> anyhow::Result<ExitCode> {
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

pub async fn run(
    config: &AppConfig,
    daemon: Option<&DaemonClient>,
    command: UsersCommand,
    out: &mut dyn Write,
) -> Result<(), UsersCliError> {
    match daemon {
        Some(daemon) => through_daemon(daemon, command, out).await,
        None => on_data_dir(config, command, out),
    }
}

async fn through_daemon(
    daemon: &DaemonClient,
    command: UsersCommand,
    out: &mut dyn Write,
) -> Result<(), UsersCliError> {
    match command {
        UsersCommand::List => {
            let body = daemon.send(Method::GET, "/api/users", None).await?;
            let users: Vec<UserSummary> = serde_json::from_value(body["users"].clone())?;
            print_list(&users, out)
        }
        UsersCommand::Show { user } => {
            let path = format!("/api/users/{}", segment(&user));
            let body = daemon.send(Method::GET, &path, None).await?;
            print_report(&serde_json::from_value(body)?, out)
        }
        UsersCommand::Link { account, user } => {
            let account = Account::parse(&account)?;
            let body = json!({"account": account.key(), "user": user});
            let answer = daemon
                .send(Method::POST, "/api/users/link", Some(&body))
                .await?;
            let previous = answer["previous_user_id"].as_str().unwrap_or_default();
            let left: HoldingsView = serde_json::from_value(answer["previous_user_holds"].clone())?;
            print_linked(&account, &user, previous, left.into(), out)
        }
        UsersCommand::Unlink { account } => {
            let account = Account::parse(&account)?;
            let body = json!({"account": account.key()});
            let answer = daemon
                .send(Method::POST, "/api/users/unlink", Some(&body))
                .await?;
            let text = |key: &str| answer[key].as_str().unwrap_or_default().to_string();
            print_unlinked(&account, &text("user_id"), &text("from_user_id"), out)
        }
    }
}

fn on_data_dir(
    config: &AppConfig,
    command: UsersCommand,
    out: &mut dyn Write,
) -> Result<(), UsersCliError> {
    let store = crate::storage::open_store(config)?;
    let identities = Identities::new(store.clone());
    let agents = AgentStore::new(config.data_dir());
    let result = match command {
        UsersCommand::List => print_list(&identities.summaries(config)?, out),
        UsersCommand::Show { user } => {
            let report = crate::users::report(&identities, config, &store, &agents, &user)?;
            print_report(&report, out)
        }
        UsersCommand::Link { account, user } => {
            let account = Account::parse(&account)?;
            let joined = identities.link_by_admin(config, &account, &user, now_ms())?;
            let left = Holdings::of(&store, &agents, &joined.previous_user)?;
            print_linked(&account, &user, &joined.previous_user, left, out)
        }
        UsersCommand::Unlink { account } => {
            let account = Account::parse(&account)?;
            let unlinked = identities.unlink(config, &account)?;
            print_unlinked(&account, &unlinked.user_id, &unlinked.from_user, out)
        }
    };
    store.flush()?;
    result
}

fn print_list(users: &[UserSummary], out: &mut dyn Write) -> Result<(), UsersCliError> {
    if users.is_empty() {
        writeln!(
            out,
            "No accounts are joined to another user: each account is its own user \
             ({{app}}-{{id}}, or the API user). Join them with /link in a chat, or \
             `antler users link APP:ID USER`."
        )?;
        return Ok(());
    }
    for user in users {
        let accounts: Vec<String> = user.accounts.iter().map(account_text).collect();
        writeln!(out, "{}\t{}", user.user_id, accounts.join(", "))?;
    }
    Ok(())
}

fn print_report(report: &UserReport, out: &mut dyn Write) -> Result<(), UsersCliError> {
    writeln!(out, "User {}", report.user_id)?;
    if report.accounts.is_empty() {
        writeln!(out, "Accounts: none (an API user or a conversation)")?;
    } else {
        writeln!(out, "Accounts:")?;
        for account in &report.accounts {
            writeln!(out, "  {}", account_text(account))?;
        }
    }
    writeln!(out, "Holds: {}", Holdings::from(report.holds))?;
    if !report.left_behind.is_empty() {
        writeln!(
            out,
            "Earlier data of linked accounts, not merged (still under their own ids):"
        )?;
        for left in &report.left_behind {
            writeln!(
                out,
                "  {} -> {}: {}",
                left.account,
                left.user_id,
                Holdings::from(left.holds)
            )?;
        }
    }
    Ok(())
}

fn print_linked(
    account: &Account,
    user: &str,
    previous: &str,
    left: Holdings,
    out: &mut dyn Write,
) -> Result<(), UsersCliError> {
    write!(out, "{account} is now {user} (it was {previous}")?;
    if left.is_empty() {
        writeln!(out, ").")?;
    } else {
        writeln!(
            out,
            ", which keeps {left}, not merged: `antler users show {previous}`)."
        )?;
    }
    Ok(())
}

fn print_unlinked(
    account: &Account,
    user: &str,
    from: &str,
    out: &mut dyn Write,
) -> Result<(), UsersCliError> {
    writeln!(
        out,
        "{account} is its own user again ({user}); what it did while linked stays with {from}."
    )?;
    Ok(())
}

fn account_text(account: &AccountView) -> String {
    let source = match (account.source.as_str(), &account.linked_at, &account.via) {
        ("linked", Some(at), Some(via)) => format!("linked {at} by {via}"),
        (source, _, _) => source.to_string(),
    };
    format!("{}:{} ({source})", account.channel, account.id)
}

fn now_ms() -> u64 {
    use crate::cluster::WallClock;
    crate::cluster::SystemWallClock.now_ms()
}

fn parse_user_id(value: &str) -> Result<String, String> {
    crate::paths::validate_id("user", value)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}
