//! `/agent history [NAME]`, `/agent diff N [M]`, `/agent revert N`: who changed an agent's
//! persona and what, from the chat where bootstrap and `update_agent` change it.
//!
//! The agent is the conversation's (in a shared conversation, the member's who chose it) or,
//! for `history NAME`, the sender's own of that name. Its versions are numbered as the store
//! keeps them; the files in place count as the next number, "current". Reading needs the
//! owner or an admin (`check_read`), reverting the right to change it (`check_manage`), the
//! same rules the HTTP API applies.

use crate::commands::context::{CommandContext, CommandOutcome};
use crate::commands::parse::Command;
use crate::commands::surface::{CommandError, CommandSurface};
use crate::custom_agents::authorship::{author_label, display_id};
use crate::custom_agents::changes::unified_diff;
use crate::custom_agents::{
    AgentStoreError, VersionAuthor, VersionContent, VersionInfo, normalize_agent_name,
};
use crate::lead_agent::AccessDenied;
use crate::lead_agent::access::{check_manage, check_read};

const DIFF_USAGE: &str = "Usage: /agent diff N [M] compares version N with version M, or with \
     the current files. /agent history lists the versions.";
const REVERT_USAGE: &str = "Usage: /agent revert N puts version N back (as a new version, so \
     it can be undone). /agent history lists the versions.";

/// Runs one of the three commands for the sender.
pub(crate) async fn run(
    command: Command,
    surface: &dyn CommandSurface,
    ctx: &CommandContext<'_>,
) -> Result<CommandOutcome, CommandError> {
    let named = match &command {
        Command::AgentHistory(name) => name.clone(),
        _ => None,
    };
    let agent = match target(surface, named.as_deref()).await? {
        Ok(agent) => agent,
        Err(reply) => return Ok(CommandOutcome::Reply(reply)),
    };
    let caller = surface.user_id();
    let denied = match command {
        Command::AgentRevert(_) => check_manage(ctx.config, caller, &agent.owner),
        _ => check_read(ctx.config, caller, &agent.owner),
    };
    if let Err(denied) = denied {
        let what = match command {
            Command::AgentRevert(_) => "revert it",
            Command::AgentDiff(_) => "see its changes",
            _ => "see its history",
        };
        return Ok(CommandOutcome::Reply(refusal(
            &agent, caller, &denied, what,
        )));
    }
    let outcome = match command {
        Command::AgentDiff(argument) => diff(ctx, &agent, &argument, surface.max_message_chars()),
        Command::AgentRevert(argument) => {
            let by = VersionAuthor::Person {
                user_id: caller.to_string(),
                name: surface.display_name(),
            };
            revert(ctx, &agent, &argument, by).map(CommandOutcome::Reply)
        }
        _ => history(ctx, &agent).map(CommandOutcome::Reply),
    };
    Ok(outcome.unwrap_or_else(|error| CommandOutcome::Reply(store_reply(&agent, caller, &error))))
}

/// An agent and whose it is.
struct Agent {
    owner: String,
    name: String,
}

/// The agent a command is about, or the reply saying why there is none.
async fn target(
    surface: &dyn CommandSurface,
    named: Option<&str>,
) -> Result<Result<Agent, String>, CommandError> {
    let current = surface.conversation().await?.and_then(|c| c.agent);
    let sender = surface.user_id().to_string();
    let name = match (named, &current) {
        (Some(name), _) => match normalize_agent_name(name) {
            Ok(name) => name,
            Err(_) => {
                return Ok(Err(format!(
                    "\"{name}\" is not an agent's name. Use /agent to list yours."
                )));
            }
        },
        (None, Some(current)) => current.clone(),
        (None, None) => {
            return Ok(Err(
                "This chat talks to the default agent. Name one of yours: \
                 /agent history NAME (/agent lists them)."
                    .into(),
            ));
        }
    };
    // The conversation's own agent is the chooser's; any other name is the sender's.
    let owner = match &current {
        Some(current) if current.eq_ignore_ascii_case(&name) => {
            surface.agent_owner().await?.unwrap_or(sender)
        }
        _ => sender,
    };
    Ok(Ok(Agent { owner, name }))
}

fn refusal(agent: &Agent, caller: &str, denied: &AccessDenied, what: &str) -> String {
    if agent.owner != caller {
        format!(
            "Sorry, {} is the agent of {}: only they or an admin can {what}.",
            agent.name, agent.owner
        )
    } else {
        format!("Sorry, {denied}.")
    }
}

/// An error of the store as a reply: a missing agent or version says where to look.
fn store_reply(agent: &Agent, caller: &str, error: &AgentStoreError) -> String {
    match error {
        AgentStoreError::NotFound { .. } if agent.owner == caller => format!(
            "You have no agent named {}. Use /agent to list yours.",
            agent.name
        ),
        AgentStoreError::NotFound { .. } => format!(
            "The agent {} of this conversation no longer exists.",
            agent.name
        ),
        AgentStoreError::VersionNotFound { id, .. } => format!(
            "{} has no version {}. /agent history lists its versions.",
            agent.name,
            display_id(id)
        ),
        other => format!("Could not read the versions of {}: {other}", agent.name),
    }
}

/// `/agent history`: the current files and the kept versions, newest first.
fn history(ctx: &CommandContext<'_>, agent: &Agent) -> Result<String, AgentStoreError> {
    let store = ctx.harness.agents();
    let current = store.current_version(&agent.owner, &agent.name)?;
    let versions = store.history(&agent.owner, &agent.name)?;
    let mut text = format!("Versions of {}, newest first:\n", agent.name);
    text.push_str(&history_line(&current, true));
    for version in versions.iter().rev() {
        text.push('\n');
        text.push_str(&history_line(version, false));
    }
    text.push_str(if versions.is_empty() {
        "\nNo earlier versions yet: every change keeps the files it replaces."
    } else {
        "\n/agent diff N shows what changed since version N; /agent revert N puts it back."
    });
    Ok(text)
}

/// `#2 (current) · 2026-12-06 10:31 UTC · update_agent in run … · SOUL.md +1/−1 lines`
pub(crate) fn history_line(version: &VersionInfo, current: bool) -> String {
    let when = match version.written_at {
        Some(at) => at.format("%Y-%m-%d %H:%M UTC").to_string(),
        None if current => "time unknown".to_string(),
        None => format!(
            "replaced {}",
            version.created_at.format("%Y-%m-%d %H:%M UTC")
        ),
    };
    format!(
        "#{}{} · {when} · {} · {}",
        display_id(&version.id),
        if current { " (current)" } else { "" },
        author_label(version.author.as_ref()),
        version.summary.as_deref().unwrap_or("change not known"),
    )
}

/// A version number as typed (`3`, `#3`, `000003`) as the store's id.
pub(crate) fn version_id(text: &str) -> Option<String> {
    let digits = text.trim().trim_start_matches('#');
    let number: u64 = digits.parse().ok()?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("{number:06}"))
}

/// `/agent diff N [M]`.
fn diff(
    ctx: &CommandContext<'_>,
    agent: &Agent,
    argument: &str,
    max_chars: Option<usize>,
) -> Result<CommandOutcome, AgentStoreError> {
    let ids: Vec<Option<String>> = argument.split_whitespace().map(version_id).collect();
    let (from, to) = match ids.as_slice() {
        [Some(from)] => (from.clone(), None),
        [Some(from), Some(to)] => (from.clone(), Some(to.clone())),
        _ => return Ok(CommandOutcome::Reply(DIFF_USAGE.into())),
    };
    let store = ctx.harness.agents();
    let current = store.current_version(&agent.owner, &agent.name)?;
    let side = |id: &str| -> Result<(VersionContent, String), AgentStoreError> {
        if id == current.id {
            let files = store.current_files(&agent.owner, &agent.name)?;
            Ok((files, format!("current, #{}", display_id(id))))
        } else {
            let files = store.read_version(&agent.owner, &agent.name, id)?;
            Ok((files, format!("version {}", display_id(id))))
        }
    };
    let (old, old_label) = side(&from)?;
    let (new, new_label) = side(to.as_deref().unwrap_or(&current.id))?;
    let text = unified_diff(old.files(), new.files(), &old_label, &new_label);
    if text.is_empty() {
        return Ok(CommandOutcome::Reply(format!(
            "{} is the same in {old_label} and {new_label}.",
            agent.name
        )));
    }
    let title = format!("{}: {old_label} → {new_label}", agent.name);
    Ok(CommandOutcome::Replies(chunk_diff(
        &title, &text, max_chars,
    )))
}

/// What a message's code block adds around its lines.
const FENCE_OPEN: &str = "```diff\n";
const FENCE_CLOSE: &str = "\n```";
/// Room kept for the part counter (" (12/34)").
const COUNTER_RESERVE: usize = 12;
/// The fewest characters of diff a message carries, however small the platform's limit.
const MIN_BODY: usize = 200;

/// The diff as messages of at most `max_chars` characters (`None`: one message), each a whole
/// code block after the title, numbered when there are several. Lines are never split unless
/// one alone is longer than a message. Triple backticks inside the files are broken with a
/// zero-width space, so a fence in SOUL.md cannot end the block.
pub(crate) fn chunk_diff(title: &str, diff: &str, max_chars: Option<usize>) -> Vec<String> {
    let diff = diff.replace("```", "``\u{200B}`");
    let overhead = title.chars().count()
        + COUNTER_RESERVE
        + 1
        + FENCE_OPEN.chars().count()
        + FENCE_CLOSE.chars().count();
    let budget = max_chars.map_or(usize::MAX, |max| max.saturating_sub(overhead).max(MIN_BODY));
    let mut bodies: Vec<String> = Vec::new();
    let mut body = String::new();
    let mut body_chars = 0;
    for line in diff.lines() {
        for piece in pieces(line, budget) {
            let piece_chars = piece.chars().count();
            let needed = piece_chars + usize::from(!body.is_empty());
            if !body.is_empty() && body_chars + needed > budget {
                bodies.push(std::mem::take(&mut body));
                body_chars = 0;
            }
            if !body.is_empty() {
                body.push('\n');
                body_chars += 1;
            }
            body.push_str(&piece);
            body_chars += piece_chars;
        }
    }
    if !body.is_empty() {
        bodies.push(body);
    }
    let count = bodies.len();
    bodies
        .into_iter()
        .enumerate()
        .map(|(idx, body)| {
            let counter = if count > 1 {
                format!(" ({}/{count})", idx + 1)
            } else {
                String::new()
            };
            format!("{title}{counter}\n{FENCE_OPEN}{body}{FENCE_CLOSE}")
        })
        .collect()
}

/// A line cut into pieces of at most `budget` characters.
fn pieces(line: &str, budget: usize) -> Vec<String> {
    if line.chars().count() <= budget {
        return vec![line.to_string()];
    }
    let chars: Vec<char> = line.chars().collect();
    chars.chunks(budget).map(|c| c.iter().collect()).collect()
}

/// `/agent revert N`: version N's files become a new version, recorded as a revert by `by`.
fn revert(
    ctx: &CommandContext<'_>,
    agent: &Agent,
    argument: &str,
    by: VersionAuthor,
) -> Result<String, AgentStoreError> {
    let Some(id) = version_id(argument).filter(|_| !argument.contains(char::is_whitespace)) else {
        return Ok(REVERT_USAGE.into());
    };
    let store = ctx.harness.agents();
    let current = store.current_version(&agent.owner, &agent.name)?;
    if id == current.id {
        return Ok(format!(
            "Version {} is already the current version of {}.",
            display_id(&id),
            agent.name
        ));
    }
    let archived = store.revert_by(&agent.owner, &agent.name, &id, by)?;
    tracing::info!(owner = %agent.owner, agent = %agent.name, version = %id, "Agent reverted from a chat");
    let now = store.current_version(&agent.owner, &agent.name)?;
    let mut text = format!(
        "Reverted {} to version {}: its files are now the current version #{} ({}).",
        agent.name,
        display_id(&id),
        display_id(&now.id),
        now.summary.as_deref().unwrap_or("change not known"),
    );
    if let Some(archived) = archived {
        let archived = display_id(&archived);
        text.push_str(&format!(
            " The files it replaced are kept as version {archived}: /agent revert {archived} undoes this."
        ));
    }
    text.push_str(" The change takes effect on the next message.");
    Ok(text)
}

#[cfg(test)]
#[path = "agent_audit_tests.rs"]
mod tests;
