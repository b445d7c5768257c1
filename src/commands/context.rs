//! What a command reads and what becomes of it: the types both `execute` and the commands it
//! hands off to (`agent_audit`) use, kept in a leaf so neither depends on the other for them.

use crate::config::AppConfig;
use crate::harness::Harness;

/// What the commands read besides the surface: the harness and the config in force.
pub struct CommandContext<'a> {
    pub harness: &'a Harness,
    pub config: &'a AppConfig,
}

/// What became of a command.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandOutcome {
    Reply(String),
    /// Run `text` as a turn (a bootstrap run when `bootstrap`).
    Turn {
        text: String,
        bootstrap: bool,
    },
    /// A reply the command split itself into messages the surface shows whole (each within
    /// its `max_message_chars`): `/agent diff`'s code blocks.
    Replies(Vec<String>),
    /// `/approve` or `/deny` decided a request made outside any chat: say `reply`, then run
    /// `Harness::resume_request(request)` (its run settles the parked call and goes on).
    Resume {
        reply: String,
        request: Box<crate::agent_api::approval::ApprovalRequest>,
    },
}
