//! `ThreadDataMiddleware`: records the thread's directories in the state before a run.
//!
//! The state is served to clients and streamed in events, so it records the virtual paths
//! (`/mnt/user-data/*`), never the host ones. Lazy by default: the ids are validated but nothing
//! is created (the tools that write files create the directories), so a chat that never touches
//! a file costs no filesystem work; `sandbox.eager` creates them up front.

use std::path::PathBuf;

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{HookResult, Middleware, MiddlewareError};
use crate::paths::ThreadPaths;
use antler_store::state::{StateUpdate, ThreadData, ThreadState};

pub struct ThreadDataMiddleware {
    data_dir: PathBuf,
    /// Create the directories up front instead of on first use.
    eager: bool,
}

impl ThreadDataMiddleware {
    /// Lazy: computes paths only.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            eager: false,
        }
    }

    /// Eager: also creates the directories in `before_agent`.
    pub fn eager(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            eager: true,
            ..Self::new(data_dir)
        }
    }

    fn failed(&self, detail: String) -> MiddlewareError {
        MiddlewareError::Failed {
            middleware: self.name().to_string(),
            detail,
        }
    }
}

#[async_trait]
impl Middleware for ThreadDataMiddleware {
    fn name(&self) -> &str {
        "ThreadDataMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn before_agent(
        &self,
        state: &ThreadState,
        ctx: &RunContext,
    ) -> Result<HookResult, MiddlewareError> {
        let paths = ThreadPaths::new(&self.data_dir, &ctx.users.owner, &ctx.thread_id)
            .map_err(|e| self.failed(e.to_string()))?;
        if self.eager {
            let dirs = paths.clone();
            tokio::task::spawn_blocking(move || dirs.ensure_dirs())
                .await
                .map_err(|e| self.failed(e.to_string()))?
                .map_err(|e| {
                    // The host path stays in the log; the error reaches clients and the model.
                    tracing::warn!(dir = %paths.user_data().display(), error = %e, "Could not create a thread's directories");
                    self.failed(format!(
                        "could not create the thread's directories ({e}); check that data_dir is \
                         writable and has free space"
                    ))
                })?;
        }
        let thread_data = ThreadData::virtual_paths();
        if state.thread_data.as_ref() == Some(&thread_data) {
            return Ok(HookResult::proceed());
        }
        Ok(HookResult::update(StateUpdate {
            thread_data: Some(thread_data),
            ..Default::default()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::config::AppConfig;

    #[tokio::test]
    async fn lazy_sets_paths_without_creating_them() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = RunContext::new("thread-1", "alice", Arc::new(AppConfig::default()));
        let mw = ThreadDataMiddleware::new(tmp.path());
        let result = mw
            .before_agent(&ThreadState::default(), &ctx)
            .await
            .unwrap();
        let data = result.update.thread_data.unwrap();
        assert_eq!(data.uploads_path, "/mnt/user-data/uploads");
        assert!(!tmp.path().join("users").exists(), "lazy creates nothing");
    }

    #[tokio::test]
    async fn eager_creates_dirs_and_bad_ids_fail() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = RunContext::new("t1", "bob", Arc::new(AppConfig::default()));
        let result = ThreadDataMiddleware::eager(tmp.path())
            .before_agent(&ThreadState::default(), &ctx)
            .await
            .unwrap();
        assert_eq!(
            result.update.thread_data.unwrap().outputs_path,
            "/mnt/user-data/outputs"
        );
        let paths = ThreadPaths::new(tmp.path(), "bob", "t1").unwrap();
        assert!(paths.outputs().is_dir() && paths.workspace().is_dir());
        let bad = RunContext::new("../etc", "bob", Arc::new(AppConfig::default()));
        let err = ThreadDataMiddleware::new(tmp.path())
            .before_agent(&ThreadState::default(), &bad)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid thread id"));
    }
}
