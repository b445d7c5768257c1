//! The command line's types: clap reads the subcommands, flags and help text from here.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cli::bench::command::BenchCommand;
use crate::cli::config::ConfigCommand;

#[derive(Parser)]
#[command(
    name = "antler",
    version,
    about = "Self-hosted AI agent daemon for team chats"
)]
pub struct Cli {
    /// Config file (else $ANTLER_CONFIG, ./config.yaml, $ANTLER_HOME/config.yaml, embedded default).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the daemon (the default when no command is given).
    Run,
    /// Ask the running daemon (its socket in the data dir, else gateway.listen) whether it is
    /// ready, and how its model, sandbox and channels are.
    Status,
    /// Chat with the agent on the console (through the daemon when one owns the data dir).
    Chat {
        /// Resume this thread (an id that does not exist yet starts a new thread under it).
        #[arg(long, value_name = "ID", value_parser = parse_thread_id)]
        thread: Option<String>,
    },
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Manage custom agents (through the daemon when one owns the data dir).
    Agents {
        /// Whose agents to work on; required when gateway.api_tokens is set (else: local).
        #[arg(long, global = true, value_name = "ID", value_parser = parse_user_id)]
        user: Option<String>,
        #[command(subcommand)]
        command: crate::cli::agents::AgentsCommand,
    },
    /// Manage skills: list, enable, disable, install archives, remove (through the daemon when
    /// one owns the data dir).
    Skills {
        /// Whose skills to work on; required when gateway.api_tokens is set (else: local).
        #[arg(long, global = true, value_name = "ID", value_parser = parse_user_id)]
        user: Option<String>,
        #[command(subcommand)]
        command: crate::cli::skills::SkillsCommand,
    },
    /// MCP servers of extensions_config.json (through the daemon when one owns the data dir).
    Mcp {
        #[command(subcommand)]
        command: crate::cli::mcp::McpCommand,
    },
    /// Token usage by user, day and model (admins: through the daemon, or on the data dir).
    Usage(crate::cli::usage::UsageArgs),
    /// Approval requests of gated tool calls and their decisions (through the daemon when one
    /// owns the data dir).
    Approvals {
        #[command(subcommand)]
        command: crate::cli::approvals::ApprovalsCommand,
    },
    /// Scheduled tasks: list, show, pause, resume, remove, run now (through the daemon when one
    /// owns the data dir).
    Schedules {
        #[command(subcommand)]
        command: crate::cli::schedules::SchedulesCommand,
    },
    /// Which accounts (Telegram, Slack, Discord, Feishu, API) act as which user: list, show,
    /// link, unlink (through the daemon when one owns the data dir).
    Users {
        #[command(subcommand)]
        command: crate::cli::users::UsersCommand,
    },
    /// Inspect, compact or copy the store (on sled, the daemon must be stopped).
    Store {
        #[command(subcommand)]
        command: crate::cli::store::StoreCommand,
    },
    /// Measure the harness (figures are printed, nothing is asserted).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Hidden: the children this binary starts itself as (`crate::cli::internal`).
    #[command(flatten)]
    Internal(crate::cli::internal::InternalCommand),
}

impl Command {
    /// Commands that talk to a running daemon when there is one (see [`crate::cli::locate`]):
    /// they find their daemon first and read the whole config only if there is none.
    pub fn is_client(&self) -> bool {
        use Command::*;
        match self {
            Status
            | Chat { .. }
            | Agents { .. }
            | Skills { .. }
            | Mcp { .. }
            | Usage(_)
            | Approvals { .. }
            | Schedules { .. }
            | Users { .. } => true,
            Run | Config { .. } | Store { .. } | Bench { .. } | Internal(_) => false,
        }
    }
}

/// Ids are checked here so a bad one is a usage error (exit 2) before anything starts.
fn parse_thread_id(value: &str) -> Result<String, String> {
    crate::paths::validate_id("thread", value)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}

fn parse_user_id(value: &str) -> Result<String, String> {
    crate::paths::validate_id("user", value)
        .map(|()| value.to_string())
        .map_err(|e| e.to_string())
}
