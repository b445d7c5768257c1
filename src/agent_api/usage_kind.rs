//! What a metered model call was for: each usage row keeps it, so a report can say what the
//! tokens went to besides answers (titles, memory, summaries, sub-agents, schedules).

use serde::{Deserialize, Serialize};

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum UsageKind {
    /// The lead agent answering a person (chat, web chat, API).
    #[default]
    Lead,
    /// A sub-agent the lead agent delegated to (`task`).
    Subagent,
    /// A thread's title.
    Title,
    /// The memory updater after a conversation.
    Memory,
    /// Condensing a long thread (`summarization`).
    Summarization,
    /// Finding deferred MCP tools (`tool_search`).
    ToolSearch,
    /// The lead agent of a scheduled task's run.
    Scheduled,
    /// The lead agent of a webhook delivery's run.
    Webhook,
    /// Speech to text of a voice note (seconds, not tokens).
    Transcription,
}

impl UsageKind {
    pub const ALL: [UsageKind; 9] = [
        UsageKind::Lead,
        UsageKind::Subagent,
        UsageKind::Title,
        UsageKind::Memory,
        UsageKind::Summarization,
        UsageKind::ToolSearch,
        UsageKind::Scheduled,
        UsageKind::Webhook,
        UsageKind::Transcription,
    ];

    /// The snake_case name in usage rows, reports, `GET /api/usage` and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageKind::Lead => "lead",
            UsageKind::Subagent => "subagent",
            UsageKind::Title => "title",
            UsageKind::Memory => "memory",
            UsageKind::Summarization => "summarization",
            UsageKind::ToolSearch => "tool_search",
            UsageKind::Scheduled => "scheduled",
            UsageKind::Webhook => "webhook",
            UsageKind::Transcription => "transcription",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl std::fmt::Display for UsageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
