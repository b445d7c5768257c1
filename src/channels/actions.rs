//! What each chat command does. Replies are plain text; `/bootstrap` becomes a chat turn.

use std::sync::Arc;

use antler_channel::ChatKey;
use serde_json::Map;

use crate::agents::AgentStore;
use crate::channels::access::antler_user_id;
use crate::channels::commands::{Command, HELP_TEXT};
use crate::channels::journal::JournalEntry;
use crate::channels::manager::{ChannelRuntime, ManagerInner};
use crate::channels::mapping::ChatRecord;
use crate::channels::turn::TurnError;
use crate::lead_agent::access::check_bootstrap;

pub const WELCOME_TEXT: &str = "Welcome to Antler! Send me a message to start a conversation.\nType /help for available commands.";
pub const NEW_CONVERSATION: &str = "New conversation started.";

pub(crate) enum CommandOutcome {
    Reply(String),
    Turn { text: String, bootstrap: bool },
}

pub(crate) async fn run_command(
    inner: &Arc<ManagerInner>,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    command: Command,
) -> Result<CommandOutcome, TurnError> {
    let message = &entry.message;
    let user_id = antler_user_id(&message.channel, &message.user_id);
    let config = inner.config.current();
    let reply = |text: String| Ok(CommandOutcome::Reply(text));
    match command {
        Command::Start => reply(WELCOME_TEXT.into()),
        Command::Help => reply(HELP_TEXT.into()),
        Command::New => {
            new_thread(inner, key, &user_id, |_| {})?;
            reply(NEW_CONVERSATION.into())
        }
        Command::Status => {
            let Some(record) = inner.chats.get(key)? else {
                return reply("No active conversation.".into());
            };
            let running = inner.harness.active_run(&record.thread_id).is_some();
            let agent = record
                .agent
                .clone()
                .or_else(|| runtime.session_agent.clone())
                .or_else(|| config.channels.session.agent.clone())
                .unwrap_or_else(|| "default".into());
            let model = record
                .model
                .clone()
                .or_else(|| config.default_model().map(|m| m.name.clone()))
                .unwrap_or_else(|| "none configured".into());
            reply(format!(
                "Active thread: {}\nAgent: {agent}\nModel: {model}\nPlan mode: {}\nRunning: {}",
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
            let current = inner.chats.get(key)?.and_then(|r| r.model);
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
            ensure_record(inner, key, &user_id).await?;
            inner.chats.update(key, |r| r.model = model.clone())?;
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
            new_thread(inner, key, &user_id, |r| r.agent = agent.clone())?;
            reply(match agent {
                Some(agent) => format!("Switched to {agent}. New conversation started."),
                None => "Switched to the default agent. New conversation started.".into(),
            })
        }
        Command::Bootstrap(text) => {
            // The factory enforces the same rule; asking first gives the user a clear answer
            // instead of a failed run.
            let agent = inner
                .chats
                .get(key)?
                .and_then(|r| r.agent)
                .or_else(|| runtime.session_agent.clone())
                .or_else(|| config.channels.session.agent.clone());
            if let Err(denied) = check_bootstrap(&config, &user_id, agent.as_deref()) {
                return reply(format!("Sorry, {denied}. Your user id is {user_id}."));
            }
            Ok(CommandOutcome::Turn {
                text,
                bootstrap: true,
            })
        }
        Command::Plan(None) => {
            let on = inner.chats.get(key)?.is_some_and(|r| r.plan_mode);
            reply(format!("Plan mode is {}.", if on { "on" } else { "off" }))
        }
        Command::Plan(Some(on)) => {
            ensure_record(inner, key, &user_id).await?;
            inner.chats.update(key, |r| r.plan_mode = on)?;
            reply(format!("Plan mode {}.", if on { "on" } else { "off" }))
        }
        Command::Cancel => reply("Nothing is running in this chat.".into()),
    }
}

async fn ensure_record(
    inner: &Arc<ManagerInner>,
    key: &ChatKey,
    user_id: &str,
) -> Result<ChatRecord, TurnError> {
    let harness = inner.harness.clone();
    inner
        .chats
        .get_or_create(key, user_id, move |user| {
            harness
                .create_thread(user, None, Map::new())
                .map(|r| r.thread_id)
                .map_err(TurnError::from)
        })
        .await
}

/// Points the chat at a fresh thread, keeping its settings (model, plan mode) unless changed.
fn new_thread(
    inner: &Arc<ManagerInner>,
    key: &ChatKey,
    user_id: &str,
    change: impl FnOnce(&mut ChatRecord),
) -> Result<ChatRecord, TurnError> {
    let existing = inner.chats.get(key)?;
    // In a group the thread keeps the owner the conversation started with.
    let owner = existing
        .as_ref()
        .map_or_else(|| user_id.to_string(), |r| r.user_id.clone());
    let thread = inner.harness.create_thread(&owner, None, Map::new())?;
    let now = chrono::Utc::now();
    let mut record = existing.unwrap_or(ChatRecord {
        thread_id: String::new(),
        user_id: owner,
        model: None,
        agent: None,
        plan_mode: false,
        created_at: now,
        updated_at: now,
    });
    record.thread_id = thread.thread_id;
    record.updated_at = now;
    change(&mut record);
    inner.chats.put(key, &record)?;
    Ok(record)
}
