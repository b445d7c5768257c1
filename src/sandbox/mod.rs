//! The `Sandbox` / `SandboxProvider` seam: where tool commands and file operations run.
//!
//! Only the lifecycle lives here so far (acquire lazily per thread, release, shutdown); the
//! execution and file methods and the providers (`local`, `bwrap`, `docker`) arrive with the
//! sandbox work.

use std::sync::Arc;

use async_trait::async_trait;

/// An isolated environment bound to one (user, thread).
pub trait Sandbox: Send + Sync {
    fn id(&self) -> &str;
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("no sandbox with id {0}; it may have been released")]
    NotFound(String),
    #[error("could not start a sandbox: {0}")]
    Unavailable(String),
}

/// Hands out sandboxes. `acquire` is idempotent per (user, thread).
#[async_trait]
pub trait SandboxProvider: Send + Sync {
    async fn acquire(&self, user_id: &str, thread_id: &str) -> Result<String, SandboxError>;
    fn get(&self, sandbox_id: &str) -> Option<Arc<dyn Sandbox>>;
    async fn release(&self, sandbox_id: &str) -> Result<(), SandboxError>;
    async fn shutdown(&self);
}
