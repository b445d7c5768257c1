//! What the manager keeps per chat while this daemon works on it, and the job a freshly
//! journalled message becomes: shared by the manager (which admits) and its workers.

use std::sync::{Arc, Mutex};

use antler_channel::{ChatKey, InboundMessage};
use tokio::sync::mpsc;

use crate::channels::runtime::ChannelRuntime;

/// A freshly journalled message for its chat's worker.
pub(crate) struct Job {
    pub(crate) chat: ChatKey,
    pub(crate) journal_key: String,
    pub(crate) runtime: Arc<ChannelRuntime>,
    pub(crate) message: InboundMessage,
}

/// What this daemon is doing with a chat.
pub(crate) enum Slot {
    /// Its worker holds the chat's claim.
    Working(ChatQueue),
    /// Taking or giving up the claim: a message arriving now stays pending and is found by the
    /// worker starting, or by the look the releasing worker takes after the release.
    Changing,
}

pub(crate) struct ChatQueue {
    pub(crate) sender: mpsc::Sender<String>,
    /// The journal key the worker is answering now.
    pub(crate) current: Arc<Mutex<Option<String>>>,
}
