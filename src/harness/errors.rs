//! Why the harness could not open, or could not start a run.

use crate::lead_agent::LeadAgentError;
use crate::model::ModelError;
use crate::sandbox::SandboxError;
use antler_store::StoreError;
use antler_store::threads::ThreadError;

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error(
        "could not create the data directory {path}: {detail}; set data_dir to a writable path"
    )]
    DataDir { path: String, detail: String },
    /// `ANTLER_CLOCK_START` (tests only) is set but unreadable; the message says what to write.
    #[error("{0}")]
    Clock(String),
}

/// Why a run could not start. Callers branch on the variant (HTTP 409, 404, 503, …).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("thread {thread_id} already has a run in progress; wait for it to finish or cancel it")]
    Busy { thread_id: String },
    #[error("thread {thread_id} not found; list your threads or start a new one")]
    NotFound { thread_id: String },
    #[error("antler is shutting down and accepts no new runs; retry after it restarts")]
    ShuttingDown,
    #[error("could not load the configured models: {0}")]
    Models(#[from] ModelError),
    #[error(transparent)]
    Agent(#[from] LeadAgentError),
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error("the sandbox is unavailable: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("the tools configuration is invalid: {0}")]
    Tools(String),
    /// The user's daily token budget (`budgets`) is spent; the notice says until when.
    #[error("{notice}")]
    BudgetSpent { notice: String },
    /// The daemon's memory is past `gateway.max_rss_mb`: no new run until it falls back.
    #[error(
        "Antler is short of memory right now ({rss_mb} MiB in use, limit {limit_mb} MiB) and is not starting new requests; please try again in a few minutes"
    )]
    Overloaded { rss_mb: u64, limit_mb: u64 },
}
