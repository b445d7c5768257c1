//! Chat commands (`/new`, `/plan on`, `/model NAME`, `/memory`, `/usage`, …), one
//! implementation for every surface: the platform chats, `antler chat` (in-process, or through
//! the daemon's `POST /api/commands`) and the web chat.
//!
//! [`parse`] reads a command; [`execute`] runs it against what a surface provides
//! ([`CommandSurface`]: who is asking, the conversation's settings and how to start a new
//! one, and a hook to refuse a command) and the harness. Surfaces keep the settings where they
//! belong: a platform chat in its chat record, `antler chat` in its session, the web chat in
//! the browser (they travel with each request, as a run's `context` does).

mod agent_audit;
pub mod approve;
mod context;
mod execute;
mod link;
pub mod parse;
mod schedules;
mod session;
mod surface;
mod voice;

pub use execute::{CommandContext, CommandOutcome, NEW_CONVERSATION, WELCOME_TEXT, execute};
pub use link::joined_reply as link_reply;
pub use parse::{Command, HELP_TEXT, parse_command};
pub use session::run_for_session;
pub use surface::{
    AgentChoice, BootstrapSession, CommandError, CommandSurface, Conversation, SettingChange,
    VoiceChoice,
};

use serde::{Deserialize, Serialize};

/// What `POST /api/commands` answers, and what `antler chat` shows of a command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandAnswer {
    /// What to show the person (empty when the command only starts a turn).
    pub reply: String,
    /// The conversation after the command: a new thread after `/new` or `/agent NAME`, the
    /// settings `/model` and `/plan` changed.
    pub conversation: Conversation,
    /// A turn the surface runs next (`/bootstrap`): this text, as a bootstrap run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<CommandTurn>,
    /// The request `/approve` or `/deny` decided, as recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Box<crate::agent_api::approval::ApprovalRequest>>,
    /// The decision was fresh and no chat continues its run: the surface runs
    /// `Harness::resume_request(approval)` next (`POST /api/commands` does, before answering).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
}

/// A turn a command asks the surface to run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandTurn {
    pub text: String,
    /// Run with `is_bootstrap` (the agent-setup conversation).
    pub bootstrap: bool,
}
