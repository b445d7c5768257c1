//! The platform chats' side of the chat commands ([`crate::commands`]): the settings live in the
//! chat's record (`channel_chats`), a new conversation points the chat at a new thread.

use antler_channel::ChatKey;
use async_trait::async_trait;

use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::mapping::{ChatRecord, chosen_agent};
use crate::commands::{
    AgentChoice, Command, CommandContext, CommandError, CommandOutcome, CommandSurface,
    Conversation, SettingChange, VoiceChoice, execute,
};
use crate::lead_agent::access::is_admin;

pub(crate) async fn run_command(
    deps: &TurnDeps,
    key: &ChatKey,
    entry: &JournalEntry,
    command: Command,
) -> Result<CommandOutcome, TurnError> {
    let message = &entry.message;
    let chat = ChatSurface {
        deps,
        key,
        entry,
        user_id: deps.sender(message)?,
    };
    let config = deps.config.current();
    let ctx = CommandContext {
        harness: &deps.harness,
        config: &config,
    };
    execute(command, &chat, &ctx)
        .await
        .map_err(|error| match error {
            CommandError::Store(error) => TurnError::Store(error),
            CommandError::Thread(error) => TurnError::Thread(error),
            CommandError::Memory(error) => TurnError::Memory(error),
            CommandError::Surface(text) => TurnError::Command(text),
        })
}

/// One chat message's view of its chat: the sender, the chat's record.
struct ChatSurface<'a> {
    deps: &'a TurnDeps,
    key: &'a ChatKey,
    entry: &'a JournalEntry,
    /// The sender as an Antler user.
    user_id: String,
}

impl ChatSurface<'_> {
    fn conversation_of(&self, record: &ChatRecord) -> Conversation {
        let config = self.deps.config.current();
        Conversation {
            thread_id: Some(record.thread_id.clone()),
            model: record.model.clone(),
            agent: chosen_agent(Some(record), &config.channels, &self.entry.message.channel),
            plan_mode: record.plan_mode,
            bootstrap: record.bootstrap.clone(),
        }
    }
}

fn surface_error(error: TurnError) -> CommandError {
    match error {
        TurnError::Store(error) => CommandError::Store(error),
        TurnError::Thread(error) => CommandError::Thread(error),
        TurnError::Memory(error) => CommandError::Memory(error),
        other => CommandError::Surface(other.to_string()),
    }
}

#[async_trait]
impl CommandSurface for ChatSurface<'_> {
    fn user_id(&self) -> &str {
        &self.user_id
    }

    fn account(&self) -> Option<crate::identity::Account> {
        let message = &self.entry.message;
        Some(crate::identity::Account::chat(
            &message.channel,
            &message.user_id,
        ))
    }

    fn shared(&self) -> bool {
        !self.entry.message.is_direct
    }

    async fn conversation(&self) -> Result<Option<Conversation>, CommandError> {
        let record = self.deps.chats.get(self.key)?;
        Ok(record.map(|record| self.conversation_of(&record)))
    }

    async fn new_conversation(&self, agent: AgentChoice) -> Result<Conversation, CommandError> {
        let (user, shared) = (&self.user_id, !self.entry.message.is_direct);
        let record = match agent {
            // `/new`: a fresh thread, the chat's settings kept.
            AgentChoice::Keep => self.deps.new_thread(self.key, user, shared, |_| {}),
            // In a shared conversation the agent is the conversation's, chosen by this member.
            AgentChoice::Switch(agent) => self.deps.new_thread(self.key, user, shared, |r| {
                r.agent = agent;
                r.agent_set_by = r.shared.then(|| user.clone());
            }),
            AgentChoice::Bootstrap(bootstrap) => {
                self.deps
                    .new_thread(self.key, user, shared, |r| r.bootstrap = Some(bootstrap))
            }
        }
        .map_err(surface_error)?;
        Ok(self.conversation_of(&record))
    }

    /// A group's conversation is everyone's: only whoever started it or an admin may start it
    /// over for all, and only whoever chose its agent (until someone did: whoever started it)
    /// or an admin may change the agent. An agent is set up in a direct chat: a group would be
    /// left talking to one member's new agent, which nobody else may run.
    async fn refuse(&self, command: &Command) -> Result<Option<String>, CommandError> {
        if self.entry.message.is_direct {
            return Ok(None);
        }
        if matches!(command, Command::Bootstrap { .. }) {
            return Ok(Some(
                "Set up a new agent in a direct message with me: send /bootstrap there.".into(),
            ));
        }
        if !matches!(command, Command::New | Command::Agent(Some(_))) {
            return Ok(None);
        }
        let Some(record) = self.deps.chats.get(self.key)? else {
            return Ok(None);
        };
        let allowed = match command {
            Command::New => record.starter(),
            _ => record.agent_chooser(),
        };
        if allowed == self.user_id || is_admin(&self.deps.config.current(), &self.user_id) {
            return Ok(None);
        }
        let name = member_name(self.deps, &record, allowed).await;
        Ok(Some(match command {
            Command::New => format!(
                "Only {name}, who started this conversation, or an admin can start a new one here."
            ),
            _ if record.agent_set_by.is_some() => format!(
                "Only {name}, who chose this conversation's agent, or an admin can change it here."
            ),
            _ => format!(
                "Only {name}, who started this conversation, or an admin can choose its agent here."
            ),
        }))
    }

    /// A conversation's skills are its owner's (the thread's sandbox mounts them); in a direct
    /// chat, or before the first message, that is the sender.
    async fn owner(&self) -> Result<String, CommandError> {
        let record = self.deps.chats.get(self.key)?;
        Ok(record.map_or_else(|| self.user_id.clone(), |r| r.user_id))
    }

    async fn change(&self, change: SettingChange) -> Result<(), CommandError> {
        self.deps
            .chat_record(self.key, &self.entry.message, &self.user_id)
            .await
            .map_err(surface_error)?;
        self.deps
            .chats
            .update(self.key, |record| match change.clone() {
                SettingChange::Model(model) => record.model = model,
                SettingChange::PlanMode(on) => record.plan_mode = on,
                SettingChange::Voice(on) => record.voice = Some(on),
            })?;
        Ok(())
    }

    async fn agent_owner(&self) -> Result<Option<String>, CommandError> {
        Ok(self
            .deps
            .chats
            .get(self.key)?
            .and_then(|record| record.agent_owner()))
    }

    fn display_name(&self) -> Option<String> {
        self.entry.message.display_name.clone()
    }

    fn max_message_chars(&self) -> Option<usize> {
        crate::custom_agents::surface::ChatSurface::for_channel(Some(&self.entry.message.channel))
            .map(|surface| surface.max_chars)
    }

    async fn voice(&self) -> Result<Option<VoiceChoice>, CommandError> {
        let chosen = self
            .deps
            .chats
            .get(self.key)?
            .and_then(|record| record.voice);
        let channel_name = self.entry.message.channel.clone();
        let channel = self
            .deps
            .config
            .current()
            .channels
            .section(&channel_name)
            .map(|section| section.reply_with_voice())
            .unwrap_or_default();
        Ok(Some(VoiceChoice {
            chosen,
            channel,
            channel_name,
        }))
    }
}

/// What the people in a group call one of its members (`user_id`): the name their messages
/// carry, else their user id.
async fn member_name(deps: &TurnDeps, record: &ChatRecord, user_id: &str) -> String {
    let state = deps.harness.thread_state(&record.thread_id).await;
    let named = state.ok().flatten().and_then(|state| {
        state.messages.iter().find_map(|message| {
            let sender = message.as_human()?.shared_sender()?;
            (sender.user_id == user_id).then(|| sender.name.to_string())
        })
    });
    named.unwrap_or_else(|| user_id.to_string())
}
