//! What each command does, against a [`CommandSurface`] and the harness. Replies are plain
//! text; `/bootstrap` becomes a turn the surface runs.

use crate::agent_api::approval::Decision;
use crate::commands::approve;
pub use crate::commands::context::{CommandContext, CommandOutcome};
use crate::commands::parse::Command;
use crate::commands::surface::{
    AgentChoice, BootstrapSession, CommandError, CommandSurface, SettingChange,
};
use crate::config::AppConfig;
use crate::custom_agents::bootstrap::opening_text;
use crate::custom_agents::store::RESERVED_AGENT_NAMES;
use crate::custom_agents::{DEFAULT_AGENT_KEYWORD, SetupTarget, normalize_agent_name};
use crate::lead_agent::access::{check_bootstrap, is_admin};
use crate::memory::MemoryScope;
use crate::memory::chat as memory_chat;
use crate::skills::chat::skills_reply;
use crate::usage::{UsageStore, usage_text};

pub const WELCOME_TEXT: &str = "Welcome to Antler! Send me a message to start a conversation.\nType /help for available commands.";
pub const NEW_CONVERSATION: &str = "New conversation started.";
const MEMORY_UNAVAILABLE: &str = "Long-term memory is not available in this process.";

/// Runs `command` for `surface`: the surface may refuse it first (a group's `/new` by someone
/// other than its starter); each command then has a step of its own below.
pub async fn execute(
    command: Command,
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
) -> Result<CommandOutcome, CommandError> {
    if let Some(refusal) = surface.refuse(&command).await? {
        return Ok(CommandOutcome::Reply(refusal));
    }
    let config = ctx.config;
    let user_id = surface.user_id().to_string();
    let text = match command {
        Command::Start => WELCOME_TEXT.into(),
        Command::Help => surface.help(),
        Command::New => {
            surface.new_conversation(AgentChoice::Keep).await?;
            NEW_CONVERSATION.into()
        }
        Command::Status => status(surface, ctx).await?,
        Command::Models => models(config),
        Command::Model(None) => current_model(surface).await?,
        Command::Model(Some(name)) => switch_model(surface, config, &name).await?,
        Command::Agent(None) => agents(ctx, &user_id),
        Command::Agent(Some(name)) => switch_agent(surface, ctx, &user_id, &name).await?,
        Command::AgentHistory(_) | Command::AgentDiff(_) | Command::AgentRevert(_) => {
            return crate::commands::agent_audit::run(command, surface, ctx).await;
        }
        Command::Bootstrap { name, purpose } => {
            return bootstrap(surface, ctx, &user_id, name.as_deref(), purpose.as_deref()).await;
        }
        Command::Plan(None) => {
            let on = surface.conversation().await?.is_some_and(|c| c.plan_mode);
            format!("Plan mode is {}.", on_off(on))
        }
        Command::Plan(Some(on)) => {
            surface.change(SettingChange::PlanMode(on)).await?;
            format!("Plan mode {}.", on_off(on))
        }
        Command::Cancel => cancel(surface, ctx).await?,
        Command::Memory { .. }
        | Command::MemoryHistory
        | Command::MemoryRevert(_)
        | Command::MemoryConfirm(_)
        | Command::MemoryDiff(_)
        | Command::Forget(_) => memory(command, surface, ctx, &user_id).await?,
        Command::Skills => skills(surface, ctx, &user_id).await?,
        Command::Link(code) => {
            crate::commands::link::link(surface, ctx.harness, config, code.as_deref())?
        }
        Command::Unlink => crate::commands::link::unlink(surface, ctx.harness, config)?,
        Command::Approve(id) => {
            return typed_decision(surface, ctx, &id, Decision::Approve, None).await;
        }
        Command::Deny { id, reason } => {
            return typed_decision(surface, ctx, &id, Decision::Deny, reason).await;
        }
        Command::Schedules => crate::commands::schedules::list(ctx.harness, config, &user_id)?,
        Command::Unschedule(id) => {
            crate::commands::schedules::unschedule(ctx.harness, config, &user_id, &id)?
        }
        Command::Voice(choice) => crate::commands::voice::voice(surface, config, choice).await?,
        Command::Usage => {
            let usage = UsageStore::new(ctx.harness.threads().store().clone());
            let admin = is_admin(config, &user_id);
            let threads = ctx.harness.threads();
            let title = |id: &str| threads.get(id).ok().flatten().and_then(|r| r.title);
            usage_text(&usage, config, &user_id, admin, &title)?
        }
    };
    Ok(CommandOutcome::Reply(text))
}

/// `/approve`, `/deny`: see [`approve::decide`].
async fn typed_decision(
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
    id: &str,
    decision: Decision,
    reason: Option<String>,
) -> Result<CommandOutcome, CommandError> {
    let typed = approve::decide(surface, ctx.harness, ctx.config, id, decision, reason).await?;
    Ok(match typed {
        approve::Typed::Reply(text) => CommandOutcome::Reply(text),
        approve::Typed::Resume { reply, request } => CommandOutcome::Resume { reply, request },
    })
}

/// `/status`: the chat's thread, its title, agent, model, whether a run is going on, and in a
/// shared conversation who has spoken in it.
async fn status(
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
) -> Result<String, CommandError> {
    let Some(conversation) = surface.conversation().await? else {
        return Ok("No active conversation.".into());
    };
    let Some(thread_id) = conversation.thread_id else {
        return Ok("No active conversation.".into());
    };
    let running = ctx.harness.active_run(&thread_id).is_some();
    let title = ctx
        .harness
        .threads()
        .get(&thread_id)?
        .and_then(|thread| thread.title)
        .unwrap_or_else(|| "(untitled)".into());
    let agent = match &conversation.bootstrap {
        Some(bootstrap) => format!(
            "{} (being set up: /bootstrap)",
            bootstrap.agent.as_deref().unwrap_or("a new agent")
        ),
        None => conversation.agent.unwrap_or_else(|| "default".into()),
    };
    let model = conversation
        .model
        .or_else(|| ctx.config.default_model().map(|m| m.name.clone()))
        .unwrap_or_else(|| "none configured".into());
    let mut text = format!(
        "Active thread: {thread_id}\nTitle: {title}\nAgent: {agent}\nModel: {model}\nPlan mode: {}\nRunning: {}",
        on_off(conversation.plan_mode),
        if running { "yes" } else { "no" },
    );
    text.push_str(&untrusted_line(ctx, &thread_id).await);
    let people = participants(ctx, &thread_id).await;
    if !people.is_empty() {
        text.push_str(&format!("\nPeople: {}", people.join(", ")));
    }
    Ok(text)
}

/// Sources named in `/status` at most; the rest are counted.
const LISTED_SOURCES: usize = 5;

/// What outside text the conversation's context holds (`agent_api::taint`), newest last: the
/// reason tools may ask for approval. `/new` starts without any.
async fn untrusted_line(ctx: &CommandContext<'_>, thread_id: &str) -> String {
    let sources = match ctx.harness.thread_state(thread_id).await {
        Ok(Some(state)) => crate::agent_api::taint::sources(&state),
        // A conversation that has not run yet holds nothing.
        Ok(None) => Vec::new(),
        Err(_) => return String::new(),
    };
    if sources.is_empty() {
        return "\nUntrusted content: none".into();
    }
    let skip = sources.len().saturating_sub(LISTED_SOURCES);
    let mut labels: Vec<String> = sources[skip..].iter().map(|s| s.label()).collect();
    if skip > 0 {
        labels.insert(0, format!("{skip} more"));
    }
    format!(
        "\nUntrusted content: {} (/new starts clean)",
        labels.join("; ")
    )
}

/// Who has spoken in a shared conversation, by the name they last spoke under, in the order
/// they joined; empty for a conversation of one person.
async fn participants(ctx: &CommandContext<'_>, thread_id: &str) -> Vec<String> {
    let Ok(Some(state)) = ctx.harness.thread_state(thread_id).await else {
        return Vec::new();
    };
    let mut people: Vec<(String, String)> = Vec::new();
    for sender in state
        .messages
        .iter()
        .filter_map(|message| message.as_human()?.shared_sender())
    {
        match people.iter_mut().find(|(id, _)| id == sender.user_id) {
            Some((_, name)) => *name = sender.name.to_string(),
            None => people.push((sender.user_id.to_string(), sender.name.to_string())),
        }
    }
    people.into_iter().map(|(_, name)| name).collect()
}

/// `/models`: the configured models, the first being the default.
fn models(config: &AppConfig) -> String {
    if config.models.is_empty() {
        return "No models configured.".into();
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
    format!("Available models:\n{}", lines.join("\n"))
}

/// `/model`: the model this chat uses.
async fn current_model(surface: &dyn CommandSurface) -> Result<String, CommandError> {
    let current = surface.conversation().await?.and_then(|c| c.model);
    Ok(match current {
        Some(model) => format!("This chat uses {model}."),
        None => "This chat uses the default model. Use /model NAME to change it.".into(),
    })
}

/// `/model NAME`: a configured model, or `default`; anything else is refused with the way to
/// list them.
async fn switch_model(
    surface: &dyn CommandSurface,
    config: &AppConfig,
    name: &str,
) -> Result<String, CommandError> {
    let model = if name.eq_ignore_ascii_case("default") {
        None
    } else if config.model(name).is_some() {
        Some(name.to_string())
    } else {
        return Ok(format!("Unknown model {name}. Use /models to list them."));
    };
    surface.change(SettingChange::Model(model.clone())).await?;
    Ok(match model {
        Some(model) => format!("This chat now uses {model}."),
        None => "This chat now uses the default model.".into(),
    })
}

/// `/agent`: the sender's custom agents.
fn agents(ctx: &CommandContext<'_>, user_id: &str) -> String {
    let agents = ctx.harness.agents().list(user_id).unwrap_or_default();
    if agents.is_empty() {
        return "You have no agents yet. Use /bootstrap to create one.".into();
    }
    let names: Vec<String> = agents.iter().map(|a| format!("• {}", a.name)).collect();
    format!(
        "Your agents:\n{}\nUse /agent NAME to switch.",
        names.join("\n")
    )
}

/// `/agent NAME`: one of the sender's agents, or `default`. A thread stays with the agent it
/// started with, so switching starts a new conversation.
async fn switch_agent(
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
    user_id: &str,
    name: &str,
) -> Result<String, CommandError> {
    let agent = if name.eq_ignore_ascii_case("default") {
        None
    } else {
        match ctx.harness.agents().get(user_id, name) {
            Ok(Some(agent)) => Some(agent.config.name),
            _ => {
                return Ok(format!(
                    "You have no agent named {name}. Use /agent to list yours."
                ));
            }
        }
    };
    surface
        .new_conversation(AgentChoice::Switch(agent.clone()))
        .await?;
    Ok(match agent {
        Some(agent) => format!("Switched to {agent}. New conversation started."),
        None => "Switched to the default agent. New conversation started.".into(),
    })
}

/// `/bootstrap [NAME [what it is for]]`: a setup conversation of its own, whose turns run the
/// bootstrap until the agent exists and then go on with it. A bad or taken name and a user who
/// may not set up that agent are answered at once instead of with a failed run.
async fn bootstrap(
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
    user_id: &str,
    name: Option<&str>,
    purpose: Option<&str>,
) -> Result<CommandOutcome, CommandError> {
    let reply = |text: String| Ok(CommandOutcome::Reply(text));
    let mut target = SetupTarget::of(name);
    if let SetupTarget::Named(name) = &target {
        let Ok(normalized) = normalize_agent_name(name) else {
            return reply(format!(
                "\"{name}\" cannot be an agent's name: use 1 to 64 letters, digits \
                 and '-', e.g. /bootstrap release-helper what it is for. Or send \
                 /bootstrap alone and choose the name in the conversation."
            ));
        };
        if RESERVED_AGENT_NAMES.contains(&normalized.as_str()) {
            return reply(format!(
                "\"{normalized}\" cannot be an agent's name: /agent {normalized} is a command. \
                 Choose another name."
            ));
        }
        if let Ok(Some(_)) = ctx.harness.agents().get(user_id, &normalized) {
            return reply(format!(
                "You already have an agent named {normalized}: /agent {normalized} \
                 talks to it. Choose another name to set up a new one."
            ));
        }
        target = SetupTarget::Named(normalized);
    }
    // The factory enforces the same rule; asking first gives the user a clear answer.
    if let Err(denied) = check_bootstrap(ctx.config, user_id, &target) {
        return reply(format!("Sorry, {denied}. Your user id is {user_id}."));
    }
    let agent = match &target {
        SetupTarget::Named(name) => Some(name.clone()),
        SetupTarget::Unnamed => None,
        SetupTarget::DefaultAgent => Some(DEFAULT_AGENT_KEYWORD.to_string()),
    };
    surface
        .new_conversation(AgentChoice::Bootstrap(BootstrapSession { agent }))
        .await?;
    Ok(CommandOutcome::Turn {
        text: opening_text(&target, purpose),
        bootstrap: true,
    })
}

/// `/cancel`: the chat's run in flight, if any.
async fn cancel(
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
) -> Result<String, CommandError> {
    let thread = surface.conversation().await?.and_then(|c| c.thread_id);
    let cancelled = thread.is_some_and(|thread_id| {
        ctx.harness
            .active_run(&thread_id)
            .is_some_and(|run_id| ctx.harness.cancel_run(&thread_id, &run_id))
    });
    Ok(if cancelled {
        "Cancelled.".into()
    } else {
        "Nothing is running in this chat.".into()
    })
}

/// `/memory [facts]`, `/memory history`, `/memory revert`, `/forget`: the sender's memory with
/// the chat's agent.
async fn memory(
    command: Command,
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
    user_id: &str,
) -> Result<String, CommandError> {
    if !ctx.config.memory.enabled {
        return Ok("Long-term memory is turned off (memory.enabled).".into());
    }
    let Some(memory) = ctx.harness.memory() else {
        return Ok(MEMORY_UNAVAILABLE.into());
    };
    let agent = surface.conversation().await?.and_then(|c| c.agent);
    let scope = MemoryScope::new(user_id.to_string(), agent.as_deref());
    let repo = &memory.repo;
    Ok(match command {
        Command::Memory { facts: true } => memory_chat::facts_reply(&repo.load(&scope)?),
        Command::Memory { facts: false } => memory_chat::summary_reply(&repo.load(&scope)?),
        Command::Forget(argument) => memory_chat::forget_reply(repo, &scope, &argument),
        Command::MemoryRevert(argument) => memory_chat::revert_reply(repo, &scope, &argument),
        Command::MemoryConfirm(argument) => memory_chat::confirm_reply(repo, &scope, &argument),
        Command::MemoryDiff(argument) => crate::memory::diff::diff_reply(repo, &scope, &argument),
        _ => memory_chat::history_reply(repo, &scope),
    })
}

/// `/skills`: the skills the chat's agent may use, with their state.
async fn skills(
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
    user_id: &str,
) -> Result<String, CommandError> {
    let agent = surface.conversation().await?.and_then(|c| c.agent);
    let allowed = match &agent {
        Some(name) => ctx
            .harness
            .agents()
            .get(user_id, name)
            .ok()
            .flatten()
            .and_then(|agent| agent.config.skills),
        None => None,
    };
    let owner = surface.owner().await?;
    let catalog = ctx.harness.skills(ctx.config);
    Ok(match skills_reply(&catalog, &owner, allowed.as_deref()) {
        Ok(text) => text,
        Err(error) => {
            tracing::warn!(%error, "Cannot list skills for /skills");
            format!("Cannot list the skills right now: {error}")
        }
    })
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::commands::Conversation;

    /// A surface that refuses `/new` (as a shared chat may for someone who did not start it)
    /// and counts the new conversations it was asked for.
    #[derive(Default)]
    struct Refusing {
        started: AtomicUsize,
    }

    #[async_trait]
    impl CommandSurface for Refusing {
        fn user_id(&self) -> &str {
            "alice"
        }

        async fn conversation(&self) -> Result<Option<Conversation>, CommandError> {
            Ok(None)
        }

        async fn new_conversation(&self, _: AgentChoice) -> Result<Conversation, CommandError> {
            self.started.fetch_add(1, Ordering::SeqCst);
            Ok(Conversation::default())
        }

        async fn change(&self, _: SettingChange) -> Result<(), CommandError> {
            Ok(())
        }

        async fn refuse(&self, command: &Command) -> Result<Option<String>, CommandError> {
            Ok((*command == Command::New)
                .then(|| "Only the person who started it may.".to_string()))
        }
    }

    #[tokio::test]
    async fn a_surface_can_refuse_a_command_before_it_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let config = AppConfig {
            data_dir: Some(tmp.path().to_path_buf()),
            ..Default::default()
        };
        let client = crate::client::Client::new(config.clone()).unwrap();
        let ctx = CommandContext {
            harness: client.harness(),
            config: &config,
        };
        let surface = Refusing::default();
        let outcome = execute(Command::New, &surface, &ctx).await.unwrap();
        assert_eq!(
            outcome,
            CommandOutcome::Reply("Only the person who started it may.".into())
        );
        assert_eq!(surface.started.load(Ordering::SeqCst), 0);
        let outcome = execute(Command::Status, &surface, &ctx).await.unwrap();
        assert_eq!(
            outcome,
            CommandOutcome::Reply("No active conversation.".into())
        );
        client
            .shutdown(std::time::Duration::from_secs(1))
            .await
            .unwrap();
    }
}
