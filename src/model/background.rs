//! The calls antler makes to a model besides a run: a thread's title and a memory update. With
//! the defaults both go to the run's own model, in the background; their prompts start with
//! fixed words so the test doubles can tell them from run turns and answer them neutrally
//! unless a test scripts them.

use crate::model::ModelRequest;
use antler_store::messages::Message;

/// How the title prompt starts (`TitleMiddleware`).
pub const TITLE_PROMPT_START: &str = "Generate a concise title";
/// How the memory updater's system prompt starts.
pub const MEMORY_PROMPT_START: &str = "You are a memory management system.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackgroundCall {
    Title,
    MemoryUpdate,
}

impl BackgroundCall {
    /// What a double answers when the test did not script the call: an empty title (the thread
    /// keeps its first-message title) and an update that changes nothing.
    pub fn neutral_answer(self) -> &'static str {
        match self {
            Self::Title => "",
            Self::MemoryUpdate => "{}",
        }
    }
}

/// Which background call `request` is, if any.
pub fn background_call(request: &ModelRequest) -> Option<BackgroundCall> {
    if request
        .system
        .as_deref()
        .is_some_and(|s| s.starts_with(MEMORY_PROMPT_START))
    {
        return Some(BackgroundCall::MemoryUpdate);
    }
    match request.messages.as_slice() {
        [Message::Human(_)]
            if request.messages[0]
                .content()
                .starts_with(TITLE_PROMPT_START) =>
        {
            Some(BackgroundCall::Title)
        }
        _ => None,
    }
}
