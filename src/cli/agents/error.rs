//! What can go wrong in `antler agents`, and how it ends the process (a usage mistake exits 2).

use crate::cli::daemon_client::DaemonClientError;
use crate::custom_agents::{AgentStoreError, UnknownCapabilities};

#[derive(Debug, thiserror::Error)]
pub enum AgentsCliError {
    #[error(transparent)]
    Store(#[from] AgentStoreError),
    #[error(
        "no agent named '{name}' for user '{user}'; list them with `antler agents list --user {user}`"
    )]
    NotFound { name: String, user: String },
    #[error(
        "--user is required because gateway.api_tokens is configured: say whose agents to work on, e.g. --user {example} (users with tokens: {users})"
    )]
    UserRequired { example: String, users: String },
    #[error(
        "nothing to update; give at least one of --description, --soul-file, --model, --tool-groups, --skills"
    )]
    NothingToUpdate,
    #[error("cannot read the soul file {path}: {source}")]
    SoulFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("model '{model}' is not configured; use one of: {available}")]
    UnknownModel { model: String, available: String },
    #[error(transparent)]
    UnknownCapabilities(#[from] UnknownCapabilities),
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl AgentsCliError {
    /// A mistake in the command line (exit 2, like clap's own usage errors).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            AgentsCliError::UserRequired { .. }
                | AgentsCliError::NothingToUpdate
                | AgentsCliError::UnknownCapabilities(_)
        )
    }
}
