//! What each chat command does. Replies are plain text; `/bootstrap` becomes a chat turn.

use antler_channel::ChatKey;

use crate::agents::AgentStore;
use crate::channels::commands::{Command, HELP_TEXT};
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::mapping::{ChatRecord, chosen_agent};
use crate::identity::channel_user_id;
use crate::lead_agent::access::{check_bootstrap, is_admin};
use crate::memory::MemoryScope;
use crate::memory::chat as memory_chat;
use crate::skills::chat::skills_reply;
use crate::usage::{UsageStore, usage_text};

pub const WELCOME_TEXT: &str = "Welcome to Antler! Send me a message to start a conversation.\nType /help for available commands.";
const MEMORY_UNAVAILABLE: &str = "Long-term memory is not available in this process.";
pub const NEW_CONVERSATION: &str = "New conversation started.";

pub(crate) enum CommandOutcome {
    Reply(String),
    Turn { text: String, bootstrap: bool },
}

pub(crate) async fn run_command(
    deps: &TurnDeps,
    key: &ChatKey,
    entry: &JournalEntry,
    command: Command,
) -> Result<CommandOutcome, TurnError> {
    let message = &entry.message;
    let user_id = channel_user_id(&message.channel, &message.user_id);
    let config = deps.config.current();
    let reply = |text: String| Ok(CommandOutcome::Reply(text));
    match command {
        Command::Start => reply(WELCOME_TEXT.into()),
        Command::Help => reply(HELP_TEXT.into()),
        Command::New => {
            // A group's conversation is everyone's: only whoever started it or an admin may
            // start it over for all.
            if !message.is_direct
                && let Some(record) = deps.chats.get(key)?
                && record.user_id != user_id
                && !is_admin(&config, &user_id)
            {
                let starter = starter_name(deps, &record).await;
                return reply(format!(
                    "Only {starter}, who started this conversation, or an admin can start a new one here."
                ));
            }
            deps.new_thread(key, &user_id, |_| {})?;
            reply(NEW_CONVERSATION.into())
        }
        Command::Status => {
            let Some(record) = deps.chats.get(key)? else {
                return reply("No active conversation.".into());
            };
            let running = deps.harness.active_run(&record.thread_id).is_some();
            let title = deps
                .harness
                .threads()
                .get(&record.thread_id)?
                .and_then(|thread| thread.title)
                .unwrap_or_else(|| "(untitled)".into());
            let agent = chosen_agent(Some(&record), &config.channels, &message.channel)
                .unwrap_or_else(|| "default".into());
            let model = record
                .model
                .clone()
                .or_else(|| config.default_model().map(|m| m.name.clone()))
                .unwrap_or_else(|| "none configured".into());
            reply(format!(
                "Active thread: {}\nTitle: {title}\nAgent: {agent}\nModel: {model}\nPlan mode: {}\nRunning: {}",
                record.thread_id,
                if record.plan_mode { "on" } else { "off" },
                if running { "yes" } else { "no" },
            ))
        }
        Command::Models => {
            if config.models.is_empty() {
                return reply("No models configured.".into());
            }
            let lines: Vec<String> = config
                .models
                .iter()
                .enumerate()
                .map(|(idx, m)| {
                    let default = if idx == 0 { " (default)" } else { "" };
                    format!("• {}{default}", m.name)
                })
                .collect();
            reply(format!("Available models:\n{}", lines.join("\n")))
        }
        Command::Model(None) => {
            let current = deps.chats.get(key)?.and_then(|r| r.model);
            reply(match current {
                Some(model) => format!("This chat uses {model}."),
                None => "This chat uses the default model. Use /model NAME to change it.".into(),
            })
        }
        Command::Model(Some(name)) => {
            let model = if name.eq_ignore_ascii_case("default") {
                None
            } else if config.model(&name).is_some() {
                Some(name.clone())
            } else {
                return reply(format!("Unknown model {name}. Use /models to list them."));
            };
            deps.chat_record(key, message).await?;
            deps.chats.update(key, |r| r.model = model.clone())?;
            reply(match model {
                Some(model) => format!("This chat now uses {model}."),
                None => "This chat now uses the default model.".into(),
            })
        }
        Command::Agent(None) => {
            let store = AgentStore::new(config.data_dir());
            let agents = store.list(&user_id).unwrap_or_default();
            if agents.is_empty() {
                return reply("You have no agents yet. Use /bootstrap to create one.".into());
            }
            let names: Vec<String> = agents.iter().map(|a| format!("• {}", a.name)).collect();
            reply(format!(
                "Your agents:\n{}\nUse /agent NAME to switch.",
                names.join("\n")
            ))
        }
        Command::Agent(Some(name)) => {
            let agent = if name.eq_ignore_ascii_case("default") {
                None
            } else {
                let store = AgentStore::new(config.data_dir());
                match store.get(&user_id, &name) {
                    Ok(Some(_)) => Some(name.clone()),
                    _ => {
                        return reply(format!(
                            "You have no agent named {name}. Use /agent to list yours."
                        ));
                    }
                }
            };
            // A thread stays with the agent it started with, so switching starts a new one.
            deps.new_thread(key, &user_id, |r| r.agent = agent.clone())?;
            reply(match agent {
                Some(agent) => format!("Switched to {agent}. New conversation started."),
                None => "Switched to the default agent. New conversation started.".into(),
            })
        }
        Command::Bootstrap(text) => {
            // The factory enforces the same rule; asking first gives the user a clear answer
            // instead of a failed run.
            let record = deps.chats.get(key)?;
            let agent = chosen_agent(record.as_ref(), &config.channels, &message.channel);
            if let Err(denied) = check_bootstrap(&config, &user_id, agent.as_deref()) {
                return reply(format!("Sorry, {denied}. Your user id is {user_id}."));
            }
            Ok(CommandOutcome::Turn {
                text,
                bootstrap: true,
            })
        }
        Command::Plan(None) => {
            let on = deps.chats.get(key)?.is_some_and(|r| r.plan_mode);
            reply(format!("Plan mode is {}.", if on { "on" } else { "off" }))
        }
        Command::Plan(Some(on)) => {
            deps.chat_record(key, message).await?;
            deps.chats.update(key, |r| r.plan_mode = on)?;
            reply(format!("Plan mode {}.", if on { "on" } else { "off" }))
        }
        Command::Cancel => reply("Nothing is running in this chat.".into()),
        Command::Memory { .. }
        | Command::MemoryHistory
        | Command::MemoryRevert(_)
        | Command::Forget(_)
            if !config.memory.enabled =>
        {
            reply("Long-term memory is turned off (memory.enabled).".into())
        }
        Command::Memory { facts } => {
            let Some(memory) = deps.harness.memory() else {
                return reply(MEMORY_UNAVAILABLE.into());
            };
            let record = deps.chats.get(key)?;
            let agent = chosen_agent(record.as_ref(), &config.channels, &message.channel);
            let scope = MemoryScope::new(user_id.clone(), agent.as_deref());
            let doc = memory.repo.load(&scope)?;
            reply(if facts {
                memory_chat::facts_reply(&doc)
            } else {
                memory_chat::summary_reply(&doc)
            })
        }
        Command::Forget(_) | Command::MemoryHistory | Command::MemoryRevert(_) => {
            let Some(memory) = deps.harness.memory() else {
                return reply(MEMORY_UNAVAILABLE.into());
            };
            let record = deps.chats.get(key)?;
            let agent = chosen_agent(record.as_ref(), &config.channels, &message.channel);
            let scope = MemoryScope::new(user_id.clone(), agent.as_deref());
            let repo = &memory.repo;
            reply(match command {
                Command::Forget(argument) => memory_chat::forget_reply(repo, &scope, &argument),
                Command::MemoryRevert(argument) => {
                    memory_chat::revert_reply(repo, &scope, &argument)
                }
                _ => memory_chat::history_reply(repo, &scope),
            })
        }
        Command::Skills => {
            let record = deps.chats.get(key)?;
            let agent = chosen_agent(record.as_ref(), &config.channels, &message.channel);
            let allowed = match &agent {
                Some(name) => deps
                    .harness
                    .agents()
                    .get(&user_id, name)
                    .ok()
                    .flatten()
                    .and_then(|agent| agent.config.skills),
                None => None,
            };
            // A conversation's skills are its owner's (the thread's sandbox mounts them); in a
            // direct chat that is the sender.
            let owner = record.map_or_else(|| user_id.clone(), |r| r.user_id);
            let catalog = deps.harness.skills(&config);
            match skills_reply(&catalog, &owner, allowed.as_deref()) {
                Ok(text) => reply(text),
                Err(error) => {
                    tracing::warn!(%error, "Cannot list skills for /skills");
                    reply(format!("Cannot list the skills right now: {error}"))
                }
            }
        }
        Command::Usage => {
            let usage = UsageStore::new(deps.harness.threads().store().clone());
            let admin = is_admin(&config, &user_id);
            reply(usage_text(&usage, &config, &user_id, admin)?)
        }
    }
}

/// What the people in a group call whoever started its conversation: the name their messages
/// carry, else their user id.
async fn starter_name(deps: &TurnDeps, record: &ChatRecord) -> String {
    let state = deps.harness.thread_state(&record.thread_id).await;
    let named = state.ok().flatten().and_then(|state| {
        state.messages.iter().find_map(|message| {
            let sender = message.as_human()?.shared_sender()?;
            (sender.user_id == record.user_id).then(|| sender.name.to_string())
        })
    });
    named.unwrap_or_else(|| record.user_id.clone())
}
