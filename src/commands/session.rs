//! A conversation whose settings its client keeps (`antler chat`, the web chat through
//! `POST /api/commands`): a command changes them in memory and the client takes them back
//! with the answer; a new conversation is a new thread of the user's.

use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Map;

use crate::commands::execute::{CommandContext, CommandOutcome, execute};
use crate::commands::parse::parse_command;
use crate::commands::surface::{
    AgentChoice, CommandError, CommandSurface, Conversation, SettingChange,
};
use crate::commands::{CommandAnswer, CommandTurn};
use crate::config::AppConfig;
use crate::harness::Harness;
use crate::identity::Account;

/// Parses `text` and runs it for `user_id`'s `conversation`, coming as `account` (`None`: the
/// operator's embedded chat); `Ok(None)` when `text` is not a command (send it as a message
/// then).
pub async fn run_for_session(
    harness: &Harness,
    config: &AppConfig,
    user_id: &str,
    account: Option<&Account>,
    conversation: Conversation,
    text: &str,
) -> Result<Option<CommandAnswer>, CommandError> {
    let Some(command) = parse_command(text.trim(), None) else {
        return Ok(None);
    };
    let surface = SessionSurface {
        harness,
        user_id: user_id.to_string(),
        account: account.cloned(),
        conversation: Mutex::new(conversation),
    };
    let ctx = CommandContext { harness, config };
    let outcome = execute(command, &surface, &ctx).await?;
    let conversation = surface.current();
    Ok(Some(match outcome {
        CommandOutcome::Reply(reply) => CommandAnswer {
            reply,
            conversation,
            ..CommandAnswer::default()
        },
        CommandOutcome::Replies(parts) => CommandAnswer {
            reply: parts.join("\n\n"),
            conversation,
            ..CommandAnswer::default()
        },
        CommandOutcome::Turn { text, bootstrap } => CommandAnswer {
            conversation,
            turn: Some(CommandTurn { text, bootstrap }),
            ..CommandAnswer::default()
        },
        CommandOutcome::Resume { reply, request } => CommandAnswer {
            reply,
            conversation,
            approval: Some(request),
            resume: true,
            ..CommandAnswer::default()
        },
    }))
}

struct SessionSurface<'a> {
    harness: &'a Harness,
    user_id: String,
    /// The API account the caller came as (`/link`, `/unlink`).
    account: Option<Account>,
    conversation: Mutex<Conversation>,
}

impl SessionSurface<'_> {
    fn current(&self) -> Conversation {
        self.conversation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn update(&self, change: impl FnOnce(&mut Conversation)) {
        change(&mut self.conversation.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

#[async_trait]
impl CommandSurface for SessionSurface<'_> {
    fn user_id(&self) -> &str {
        &self.user_id
    }

    fn account(&self) -> Option<Account> {
        self.account.clone()
    }

    async fn conversation(&self) -> Result<Option<Conversation>, CommandError> {
        Ok(Some(self.current()))
    }

    async fn new_conversation(&self, agent: AgentChoice) -> Result<Conversation, CommandError> {
        let thread = self
            .harness
            .create_thread(&self.user_id, None, Map::new())?;
        self.update(|conversation| {
            conversation.thread_id = Some(thread.thread_id);
            conversation.bootstrap = None;
            match agent {
                AgentChoice::Keep => {}
                AgentChoice::Switch(agent) => conversation.agent = agent,
                AgentChoice::Bootstrap(bootstrap) => conversation.bootstrap = Some(bootstrap),
            }
        });
        Ok(self.current())
    }

    async fn change(&self, change: SettingChange) -> Result<(), CommandError> {
        self.update(|conversation| match change {
            SettingChange::Model(model) => conversation.model = model,
            SettingChange::PlanMode(on) => conversation.plan_mode = on,
            // Answers here are text: `/voice` answers so before it changes anything.
            SettingChange::Voice(_) => {}
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_console_and_the_web_chat_say_where_spoken_answers_are() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut config = AppConfig {
            data_dir: Some(tmp.path().to_path_buf()),
            ..Default::default()
        };
        config.voice.speech.enabled = true;
        let client = crate::client::Client::new(config.clone()).expect("client");
        for text in ["/voice on", "/voice"] {
            let answer = run_for_session(
                client.harness(),
                &config,
                "local",
                None,
                Default::default(),
                text,
            )
            .await
            .expect("command")
            .expect("a command");
            assert_eq!(answer.reply, crate::commands::voice::TEXT_ONLY);
        }
        client
            .shutdown(std::time::Duration::from_secs(1))
            .await
            .expect("shutdown");
    }
}
