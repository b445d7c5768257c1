//! `DroppedMessagesSink`: who hears about messages context management is about to drop.
//!
//! The summarization middleware calls it with the older messages before it replaces them by a
//! summary, so long-term memory can take in what would otherwise be lost (DeerFlow's
//! "emergency flush"). Memory implements it; the lead agent passes it to the factory
//! (`AgentOptions::dropped_messages`).

use async_trait::async_trait;

use crate::agent_api::RunContext;
use antler_store::messages::Message;

#[async_trait]
pub trait DroppedMessagesSink: Send + Sync {
    /// `messages` (oldest first) leave the thread's context right after this returns. Called
    /// inside the run: queue work rather than doing it here, and never fail the run.
    async fn dropped(&self, ctx: &RunContext, messages: &[Message]);
}
