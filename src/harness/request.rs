//! What a caller asks of the harness (a run on a thread, as whom) and what it gets back.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::RunOutcome;
use crate::agent_api::{RunEvents, RunOptions, RunUsers};
use antler_store::messages::Message;

/// What to run: `input` is appended to the thread's state.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The thread's owner: a new thread is created for them, an existing one must be theirs.
    pub user_id: String,
    /// Whose turn it is (see [`RunUsers`]).
    pub speaker: Speaker,
    pub thread_id: String,
    pub input: Vec<Message>,
    pub options: RunOptions,
    /// Emit `RunEvent::Values` after every step (costs a state clone per step).
    pub want_values: bool,
}

/// Who sends a run's input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Speaker {
    /// The owner, in a thread of their own: the HTTP API, the web chat, the console, a direct
    /// chat.
    #[default]
    Owner,
    /// A member of a shared conversation (a group chat's thread), possibly the owner: the run
    /// acts as `user_id` (memory, usage, budget, custom agents) on the owner's thread.
    Member { user_id: String },
}

impl RunRequest {
    /// The run's owner and speaker.
    pub fn users(&self) -> RunUsers {
        match &self.speaker {
            Speaker::Owner => RunUsers::alone(self.user_id.clone()),
            Speaker::Member { user_id } => RunUsers {
                owner: self.user_id.clone(),
                speaker: user_id.clone(),
                shared: true,
            },
        }
    }
}

/// A started run: its events, its cancel switch and its final outcome.
pub struct RunHandle {
    pub run_id: String,
    pub thread_id: String,
    pub events: RunEvents,
    pub cancel: CancellationToken,
    pub outcome: JoinHandle<RunOutcome>,
}
