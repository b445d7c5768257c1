//! What a surface provides to the commands: who is asking, the conversation's settings, a
//! new conversation, and a hook to refuse a command.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::commands::parse::{Command, HELP_TEXT};

/// A conversation as the commands see it: its thread and the settings its turns run with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Conversation {
    /// `None` until the conversation has a thread (a chat's first message creates it).
    pub thread_id: Option<String>,
    /// The model the turns use (`None`: the default model).
    pub model: Option<String>,
    /// The custom agent the turns run (`None`: the default agent).
    pub agent: Option<String>,
    pub plan_mode: bool,
    /// A bootstrap in progress (`/bootstrap`): every turn runs it until the agent exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<BootstrapSession>,
}

/// The agent a conversation's bootstrap sets up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BootstrapSession {
    /// The name it was started with (`default`: the default agent); `None`: the person names
    /// the agent during the conversation.
    pub agent: Option<String>,
}

impl Conversation {
    /// The agent the next turn runs: the one being set up while a bootstrap lasts.
    pub fn run_agent(&self) -> Option<String> {
        match &self.bootstrap {
            Some(bootstrap) => bootstrap.agent.clone(),
            None => self.agent.clone(),
        }
    }

    /// Ends the bootstrap once `setup_agent` created `created` (the thread's
    /// `created_agent_name`): the conversation goes on with the new agent. `true` if it ended.
    pub fn settle_bootstrap(&mut self, created: Option<&str>) -> bool {
        let Some(created) = created.filter(|_| self.bootstrap.is_some()) else {
            return false;
        };
        self.bootstrap = None;
        self.agent = (!created.eq_ignore_ascii_case(crate::custom_agents::DEFAULT_AGENT_KEYWORD))
            .then(|| created.to_string());
        true
    }
}

/// Which agent a new conversation runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentChoice {
    /// The one the current conversation runs (`/new`).
    Keep,
    /// This one (`/agent NAME`; `None`: the default agent).
    Switch(Option<String>),
    /// A bootstrap (`/bootstrap`): the new conversation sets this agent up.
    Bootstrap(BootstrapSession),
}

/// A setting a command changes on the current conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettingChange {
    /// `None`: back to the default model.
    Model(Option<String>),
    PlanMode(bool),
    /// `/voice on|off`: answers spoken too (a chat platform's conversation only).
    Voice(bool),
}

/// What decides whether a chat conversation's answers are also spoken (`/voice`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoiceChoice {
    /// The conversation's own `/voice on|off`; `None`: the channel's setting decides.
    pub chosen: Option<bool>,
    /// The channel's `reply_with_voice`.
    pub channel: antler_channel::ReplyWithVoice,
    /// The channel's config section (`telegram`), for naming the key.
    pub channel_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Store(#[from] antler_store::StoreError),
    #[error(transparent)]
    Thread(#[from] antler_store::threads::ThreadError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// The surface could not do what the command needs; the text says why.
    #[error("{0}")]
    Surface(String),
}

/// One surface's side of the commands.
#[async_trait]
pub trait CommandSurface: Send + Sync {
    /// The Antler user the command acts for (whose memory, usage, agents and skills).
    fn user_id(&self) -> &str;

    /// The conversation as it is now; `None` when it has no thread yet.
    async fn conversation(&self) -> Result<Option<Conversation>, CommandError>;

    /// Points the surface at a new thread, keeping the model and plan mode; a bootstrap in
    /// progress ends unless `agent` starts one.
    async fn new_conversation(&self, agent: AgentChoice) -> Result<Conversation, CommandError>;

    /// Changes a setting of the conversation (a surface may create it first).
    async fn change(&self, change: SettingChange) -> Result<(), CommandError>;

    /// Why this surface does not allow `command` here (a reply for the person), or `None`.
    async fn refuse(&self, _command: &Command) -> Result<Option<String>, CommandError> {
        Ok(None)
    }

    /// Whose skills the conversation runs with: its owner's, which is the sender unless the
    /// conversation is shared and someone else started it.
    async fn owner(&self) -> Result<String, CommandError> {
        Ok(self.user_id().to_string())
    }

    /// The account the command comes from (`/link`, `/unlink`); `None` where there is no
    /// account to link (the embedded console chat, which is the operator).
    fn account(&self) -> Option<crate::identity::Account> {
        None
    }

    /// Whether others read this conversation (a group chat): a link code is not shown there.
    fn shared(&self) -> bool {
        false
    }

    /// Whether answers here may be spoken and what decides it; `None` where they never are
    /// (the web chat and the console show text).
    async fn voice(&self) -> Result<Option<VoiceChoice>, CommandError> {
        Ok(None)
    }

    /// The help text: every command, plus the surface's own lines.
    fn help(&self) -> String {
        HELP_TEXT.to_string()
    }

    /// Whose custom agent the conversation runs when it is not the sender's: the member who
    /// chose it for a shared conversation (`/agent history` asks); `None`: the sender's own.
    async fn agent_owner(&self) -> Result<Option<String>, CommandError> {
        Ok(None)
    }

    /// The sender's name as the platform gave it, for recording who changed an agent.
    fn display_name(&self) -> Option<String> {
        None
    }

    /// The longest message this surface shows (a chat platform's), for replies a command
    /// splits itself (`/agent diff`); `None`: any length.
    fn max_message_chars(&self) -> Option<usize> {
        None
    }
}
