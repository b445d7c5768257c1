//! Long-term memory: what antler remembers about a user (per custom agent) across threads.
//!
//! [`document`] is the seed's JSON structure, [`repo`] keeps it in the `Store` with
//! transactional writes, [`updater`] asks a model what to change and applies it strictly,
//! [`inject`] renders the `<memory>` block within a token budget, and [`queue`] debounces
//! updates per conversation on an owned background task. [`history`] keeps the last versions of
//! each document, attributed, for `/memory history` and reverts.

pub mod chat;
pub mod conversation;
pub mod diff;
pub mod document;
pub mod history;
pub mod inject;
pub mod middleware;
pub mod queue;
pub mod repo;
pub mod settings;
pub mod updater;

pub use document::{Fact, FactCategory, MemoryDocument, Section};

pub use history::{ChangeSummary, MemoryVersion, WriteSource};
pub use middleware::{DroppedToMemory, MemoryMiddleware};
pub use queue::{MemoryQueue, PendingConversation};
pub use repo::{MemoryRepo, MemoryScope, Reverted};
pub use settings::MemorySettings;
pub use updater::{MemoryUpdate, MemoryUpdater};

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error("no fact with id {id}; list facts with /memory facts or GET /api/memory")]
    FactNotFound { id: String },
    #[error(
        "no memory version {version}; list the kept versions with /memory history or GET /api/memory/history"
    )]
    VersionNotFound { version: u64 },
    #[error(
        "the memory document is invalid: {0}; send the JSON that GET /api/memory/export returns"
    )]
    InvalidDocument(String),
    #[error("the memory model failed: {0}; memory is unchanged, the next turn tries again")]
    Model(#[from] crate::model::ModelError),
    #[error("the memory model answered with malformed JSON ({0}); memory is unchanged")]
    MalformedUpdate(String),
}

/// The memory parts a daemon shares: the repo (reads, chat and API edits) and the queue.
#[derive(Clone)]
pub struct MemoryService {
    pub repo: MemoryRepo,
    pub queue: MemoryQueue,
}
