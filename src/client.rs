//! The embedded client: the harness in-process behind a small API (DeerFlow's embedded client).
//!
//! ```no_run
//! # async fn demo() -> Result<(), antler::client::ClientError> {
//! use futures::StreamExt;
//! let client = antler::client::Client::new(antler::config::AppConfig::default())?;
//! let thread_id = client.new_thread()?;
//! let mut events = client.stream(&thread_id, "hello", Default::default()).await?;
//! while let Some(event) = events.next().await {
//!     println!("{event:?}");
//! }
//! # Ok(()) }
//! ```

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use serde_json::Map;
use tokio_util::sync::DropGuard;

use crate::agent_api::{RunEvent, RunEvents, RunOptions};
use crate::config::{AppConfig, ConfigHandle};
use crate::harness::{Harness, HarnessError, RunError, RunRequest, Speaker};
use antler_store::ThreadRecord;
use antler_store::messages::Message;
use antler_store::state::ThreadState;
use antler_store::threads::ThreadError;

/// The user id of the embedded client.
pub const LOCAL_USER_ID: &str = "local";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Thread(#[from] ThreadError),
}

/// An in-process Antler. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    harness: Harness,
    user_id: String,
}

impl Client {
    /// Opens the store in the config's `data_dir`; models are built from `config.models`.
    pub fn new(config: AppConfig) -> Result<Self, ClientError> {
        Ok(Self::from_harness(Harness::open(ConfigHandle::fixed(
            config,
        ))?))
    }

    /// A client over an existing harness (shared with a daemon, or built from parts in tests).
    pub fn from_harness(harness: Harness) -> Self {
        Self {
            harness,
            user_id: LOCAL_USER_ID.to_string(),
        }
    }

    pub fn harness(&self) -> &Harness {
        &self.harness
    }

    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// Sends `message` on `thread_id` (created if new) and streams the run's events, ending
    /// with `RunEvent::Finished`. Dropping the stream early cancels the run.
    pub async fn stream(
        &self,
        thread_id: &str,
        message: &str,
        options: RunOptions,
    ) -> Result<RunStream, ClientError> {
        let handle = self
            .harness
            .start_run(RunRequest {
                user_id: self.user_id.clone(),
                speaker: Speaker::Owner,
                thread_id: thread_id.to_string(),
                input: vec![Message::human(message)],
                options,
                want_values: false,
            })
            .await?;
        Ok(RunStream {
            events: handle.events,
            _cancel_on_drop: handle.cancel.drop_guard(),
        })
    }

    /// Runs the continuation of a decided approval request (`Harness::resume_request`) and
    /// streams it as [`Client::stream`] does.
    pub async fn resume(
        &self,
        request: &crate::agent_api::approval::ApprovalRequest,
    ) -> Result<RunStream, ClientError> {
        let handle = self
            .harness
            .start_run(self.harness.resume_request(request))
            .await?;
        Ok(RunStream {
            events: handle.events,
            _cancel_on_drop: handle.cancel.drop_guard(),
        })
    }

    /// The thread's state as of its last completed step; `None` for unknown or foreign threads.
    pub async fn state(&self, thread_id: &str) -> Result<Option<ThreadState>, ClientError> {
        if self.harness.get_thread(&self.user_id, thread_id)?.is_none() {
            return Ok(None);
        }
        Ok(self.harness.thread_state(thread_id).await?)
    }

    /// Creates an empty thread and returns its id.
    pub fn new_thread(&self) -> Result<String, ClientError> {
        Ok(self
            .harness
            .create_thread(&self.user_id, None, Map::new())?
            .thread_id)
    }

    /// This client's threads, most recently updated first.
    pub fn threads(&self) -> Result<Vec<ThreadRecord>, ClientError> {
        Ok(self.harness.list_threads(&self.user_id)?)
    }

    /// Lets runs in flight finish (up to `grace`) and flushes the store.
    pub async fn shutdown(&self, grace: Duration) -> Result<(), ClientError> {
        Ok(self.harness.shutdown(grace).await?)
    }
}

/// The events of one run. Ends after `RunEvent::Finished`; dropping it cancels the run.
pub struct RunStream {
    events: RunEvents,
    _cancel_on_drop: DropGuard,
}

impl Stream for RunStream {
    type Item = RunEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RunEvent>> {
        self.events.poll_recv(cx)
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
