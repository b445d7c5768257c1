//! Explicit activation: a message starting `/<skill-name> task` gets that skill's whole
//! SKILL.md for the turn, and the skill's `allowed-tools` limit the tools for the turn.
//!
//! The turn is the run: only the run's own human message is looked at, so the next message
//! runs without the skill. The injection is request-only (never stored). A disabled skill, or
//! one the agent may not use, is answered with the reference's message without calling the
//! model. Chat command names are reserved: `/new` is never a skill.

use async_trait::async_trait;

use crate::agent_api::{Middleware, ModelNext, RunContext, RunEvent, ToolContext, ToolError};
use crate::agent_api::{ToolNext, ToolResult};
use crate::model::{ModelError, ModelRequest};
use crate::skills::catalog::Skill;
use crate::skills::is_reserved_name;
use antler_store::messages::{AiMessage, Message, ToolCall, ToolMessage, new_id};
use antler_store::state::ThreadState;

/// The middleware's name in the chain.
pub const SKILL_ACTIVATION: &str = "SkillActivationMiddleware";

/// What a `/name` message means for this run.
#[derive(Clone, Debug, PartialEq)]
pub enum Activation {
    /// Not a skill: ordinary chat (also for reserved names and unknown skills).
    None,
    Active(Box<Skill>),
    /// Answered with this text instead of calling the model.
    Refused(String),
}

/// The skill name a message activates, if it starts with `/<hyphen-case name>` followed by
/// whitespace or the end (DeerFlow's `^/([a-z0-9]+(?:-[a-z0-9]+)*)(?:\s+|$)`).
pub fn slash_skill_name(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    let valid = !name.is_empty()
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    valid.then_some(name)
}

/// Decides what `text` activates among `visible` skills (enabled or not) when the agent may
/// use `allowed` (`None` = every enabled skill).
pub fn resolve(text: &str, visible: &[Skill], allowed: Option<&[String]>) -> Activation {
    let Some(name) = slash_skill_name(text) else {
        return Activation::None;
    };
    if is_reserved_name(name) {
        return Activation::None;
    }
    let Some(skill) = visible.iter().find(|s| s.name == name) else {
        return Activation::None;
    };
    if !skill.enabled {
        return Activation::Refused(format!(
            "Skill `/{name}` is installed but disabled. Enable it before using slash activation."
        ));
    }
    if allowed.is_some_and(|names| !names.iter().any(|n| n == name)) {
        return Activation::Refused(format!("Skill `/{name}` is not available for this agent."));
    }
    Activation::Active(Box::new(skill.clone()))
}

/// The run's own human message: the last one the person typed (harness-authored and hidden
/// messages are skipped).
fn turn_message(messages: &[Message]) -> Option<&antler_store::messages::HumanMessage> {
    messages.iter().rev().find_map(|m| match m {
        Message::Human(h) if h.name.is_none() && !h.meta.hide_from_ui => Some(h),
        _ => None,
    })
}

/// Applies `/skill` activation to each model and tool call of a run.
#[derive(Debug)]
pub struct SkillActivationMiddleware {
    visible: Vec<Skill>,
    allowed: Option<Vec<String>>,
}

impl SkillActivationMiddleware {
    /// `visible`: every skill the user can see (disabled ones too, to say so); `allowed`: the
    /// names the agent may use (`None` = all enabled).
    pub fn new(visible: Vec<Skill>, allowed: Option<Vec<String>>) -> Self {
        Self { visible, allowed }
    }

    fn activation(&self, state: &ThreadState) -> (Activation, Option<String>) {
        match turn_message(&state.messages) {
            Some(human) => (
                resolve(&human.content, &self.visible, self.allowed.as_deref()),
                Some(human.id.to_string()),
            ),
            None => (Activation::None, None),
        }
    }
}

/// Claude Code's tool names, for skills written for it, mapped to Antler's.
fn tool_allowed(allowed: &[String], tool: &str) -> bool {
    allowed
        .iter()
        .any(|name| tool_name(name).eq_ignore_ascii_case(tool))
}

/// The Antler tool an `allowed-tools` entry names: Claude Code's names (`Read`, `Edit`, …) are
/// mapped, others are taken as they are (compared case-insensitively).
pub(crate) fn tool_name(entry: &str) -> &str {
    match entry {
        "Read" => "read_file",
        "Write" => "write_file",
        "Edit" | "MultiEdit" => "str_replace",
        "Bash" => "bash",
        "Glob" => "glob",
        "Grep" => "grep",
        "LS" => "ls",
        "WebFetch" => "web_fetch",
        "WebSearch" => "web_search",
        other => other,
    }
}

#[async_trait]
impl Middleware for SkillActivationMiddleware {
    fn name(&self) -> &str {
        SKILL_ACTIVATION
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        state: &ThreadState,
        ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        let (activation, human_id) = self.activation(state);
        match activation {
            Activation::None => next.call(request).await,
            Activation::Refused(text) => {
                let id = new_id("ai");
                ctx.events.emit(RunEvent::TextDelta {
                    message_id: id.clone(),
                    delta: text.clone(),
                });
                Ok(AiMessage {
                    id: id.into(),
                    content: text.into(),
                    ..Default::default()
                })
            }
            Activation::Active(skill) => {
                let body = skill.read_skill_md().map_err(|e| {
                    ModelError::Config(format!(
                        "{e}; reinstall the skill or send the message without /{}",
                        skill.name
                    ))
                })?;
                let block = format!(
                    "<activated_skill name=\"{}\" location=\"{}\">\nThe user activated this skill for this message: follow its instructions. Its resources are under the same directory.\n\n{}\n</activated_skill>\n\n",
                    skill.name,
                    skill.location,
                    body.trim_end()
                );
                for message in request.messages.iter_mut() {
                    if let Message::Human(human) = message
                        && Some(human.id.as_str()) == human_id.as_deref()
                    {
                        human.content.insert_str(0, &block);
                    }
                }
                if let Some(allowed) = &skill.allowed_tools {
                    let kept: Vec<_> = request
                        .tools
                        .iter()
                        .filter(|spec| tool_allowed(allowed, &spec.name))
                        .cloned()
                        .collect();
                    request.tools = kept.into();
                }
                next.call(request).await
            }
        }
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        if let (Activation::Active(skill), _) = self.activation(ctx.state)
            && let Some(allowed) = &skill.allowed_tools
            && !tool_allowed(allowed, &call.name)
        {
            let content = format!(
                "Error: tool '{}' is not allowed while skill '{}' is active (allowed-tools: {}); use one of those tools",
                call.name,
                skill.name,
                allowed.join(", ")
            );
            return Ok(ToolResult::message(ToolMessage::error(call, content)));
        }
        next.call(call, ctx).await
    }
}

#[cfg(test)]
#[path = "activation_tests.rs"]
mod tests;
