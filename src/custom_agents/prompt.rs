//! `apply_prompt_template`: assembles the lead agent's static system prompt.
//!
//! The output depends only on the agent and the options passed in — never on the user, the thread
//! or the clock — so it is byte-identical across users and turns and provider prefix caches hit.
//! The date and memory reach the model as messages (see `middleware::dynamic_context`). A rule
//! about a tool is sent only to an agent that has the tool.

use std::fmt::Write as _;

use crate::custom_agents::bootstrap::SetupTarget;
use crate::custom_agents::prompt_sections as s;
use crate::custom_agents::surface::ChatSurface;

/// The name the default agent introduces itself with.
pub const DEFAULT_AGENT_NAME: &str = "Antler";
/// Default cap on `task` calls in one model response.
pub const DEFAULT_MAX_CONCURRENT_SUBAGENTS: u32 = 3;
/// Default cap on `task` calls in one run.
pub const DEFAULT_MAX_TOTAL_SUBAGENTS: u32 = 6;

/// A skill as listed in the prompt; `path` is where the model reads its SKILL.md.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SkillSummary {
    pub name: String,
    pub description: String,
    pub path: String,
    /// Its SKILL.md's `allowed-tools`: an agent lacking one of them is not shown the skill
    /// (`skills::fit`). Not part of the prompt's text.
    pub allowed_tools: Option<Vec<String>>,
}

/// Everything the prompt depends on. Lists may come in any order: they are sorted here.
/// `Hash` is the prompt cache's key (`lead_agent::cache`).
#[derive(Clone, Debug, Hash)]
pub struct PromptOptions<'a> {
    /// `None` for the default agent (introduced as [`DEFAULT_AGENT_NAME`]).
    pub agent_name: Option<&'a str>,
    /// The agent's SOUL.md text; blank or `None` ⇒ no `<soul>` block.
    pub soul: Option<&'a str>,
    /// Adds the `<self_update>` section (custom agents hold `update_agent`).
    pub is_custom_agent: bool,
    pub subagent_enabled: bool,
    pub max_concurrent_subagents: u32,
    pub max_total_subagents: u32,
    /// Plan mode: the agent has `write_todos`, and the prompt its `<todo_list_system>`.
    pub plan_mode: bool,
    pub skills: &'a [SkillSummary],
    /// Names of tools whose schemas are loaded on demand.
    pub deferred_tools: &'a [String],
    /// Extra sandbox mounts: (container path, read-only).
    pub mounts: &'a [(String, bool)],
    /// Names of the tools the model is given besides the chain's own (`ask_clarification`,
    /// `write_todos`): rules about bash, editing and the web are sent only with their tools.
    pub tools: &'a [String],
    /// Whether bash commands reach the network; `None` (unknown) says nothing.
    pub sandbox_network: Option<bool>,
    /// Uploaded documents get a Markdown copy (`uploads.auto_convert_documents`, HTTP uploads and
    /// chat attachments).
    pub converted_uploads: bool,
    /// The chat platform of the conversation; `None` for the web chat, console and API.
    pub chat: Option<ChatSurface>,
    /// A bootstrap conversation: the agent it sets up (the `<bootstrap>` section).
    pub bootstrap: Option<&'a SetupTarget>,
    /// Memory is on: one sentence says what the `<memory>` block is.
    pub memory: bool,
    /// A conversation of several people (a group chat's thread): the `<participants>`
    /// section says that each message names its sender.
    pub participants: bool,
    /// Outside text can reach the context (a tool with untrusted output, other people's
    /// words, converted uploads): the `<untrusted_content>` rule says what its marker means.
    pub untrusted_content: bool,
}

impl Default for PromptOptions<'_> {
    fn default() -> Self {
        Self {
            agent_name: None,
            soul: None,
            is_custom_agent: false,
            subagent_enabled: false,
            max_concurrent_subagents: DEFAULT_MAX_CONCURRENT_SUBAGENTS,
            max_total_subagents: DEFAULT_MAX_TOTAL_SUBAGENTS,
            plan_mode: false,
            skills: &[],
            deferred_tools: &[],
            mounts: &[],
            tools: &[],
            sandbox_network: None,
            converted_uploads: false,
            chat: None,
            bootstrap: None,
            memory: false,
            participants: false,
            untrusted_content: false,
        }
    }
}

impl PromptOptions<'_> {
    fn has_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|tool| tool == name)
    }

    fn has_web_tools(&self) -> bool {
        self.has_tool("web_search") || self.has_tool("web_fetch")
    }

    /// The `task` limits as the prompt states them: per response at least 1, per run at least
    /// the per-response cap.
    fn subagent_limits(&self) -> (u32, u32) {
        let per_response = self.max_concurrent_subagents.max(1);
        (per_response, self.max_total_subagents.max(per_response))
    }
}

/// Builds the system prompt. Sections, in order: role, soul, self_update (custom agents),
/// bootstrap (the agent a bootstrap sets up), thinking style, clarification, participants (a
/// shared conversation), todo list (plan mode), skills, deferred tools, sub-agents (when
/// enabled), working directory, response style, citations (with web tools), untrusted content
/// (when outside text can reach the context), critical reminders, and the memory note (memory
/// on).
pub fn apply_prompt_template(options: &PromptOptions<'_>) -> String {
    let mut sections: Vec<String> = Vec::with_capacity(13);
    sections.push(role(options.agent_name));
    if let Some(soul) = options.soul.map(str::trim).filter(|s| !s.is_empty()) {
        sections.push(format!("<soul>\n{}\n</soul>", escape_html(soul)));
    }
    if options.is_custom_agent {
        sections.push(s::SELF_UPDATE.to_string());
    }
    if let Some(target) = options.bootstrap {
        sections.push(bootstrap_section(target));
    }
    sections.push(thinking_style(options));
    sections.push(clarification(options));
    if options.participants {
        sections.push(s::PARTICIPANTS.to_string());
    }
    if options.plan_mode {
        sections.push(s::TODO_LIST_SYSTEM.to_string());
    }
    if !options.skills.is_empty() {
        sections.push(skills_section(options.skills));
    }
    if !options.deferred_tools.is_empty() {
        sections.push(deferred_tools_section(options.deferred_tools));
    }
    if options.subagent_enabled {
        let (per_response, per_run) = options.subagent_limits();
        sections.push(
            s::SUBAGENT_SYSTEM
                .replace("{per_response}", &per_response.to_string())
                .replace("{per_run}", &per_run.to_string()),
        );
    }
    sections.push(working_directory(options));
    sections.push(response_style(options.chat));
    if options.has_web_tools() {
        sections.push(s::CITATIONS.to_string());
    }
    if options.untrusted_content {
        sections.push(s::UNTRUSTED_CONTENT.to_string());
    }
    sections.push(critical_reminders(options));
    if options.memory {
        sections.push(s::MEMORY_NOTE.to_string());
    }
    let mut prompt = sections.join("\n\n");
    prompt.push('\n');
    prompt
}

/// Escapes `&`, `<` and `>` so untrusted text cannot close or open prompt sections.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

fn role(agent_name: Option<&str>) -> String {
    let name = agent_name
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_AGENT_NAME);
    format!(
        "<role>\nYou are {}, a self-hosted AI agent that helps a team get real work done — \
         research, writing, analysis and code — with the tools and files of this workspace.\n</role>",
        escape_html(name)
    )
}

/// Which agent a bootstrap conversation creates: the name it started with, or a name to ask for.
fn bootstrap_section(target: &SetupTarget) -> String {
    let body = match target {
        SetupTarget::Named(name) => format!(
            "This conversation sets up a new agent named \"{}\". The name is fixed: do not \
             ask for another one (you may ask how the agent should introduce itself). \
             `setup_agent` creates it under this name.",
            escape_html(name)
        ),
        SetupTarget::Unnamed => s::BOOTSTRAP_UNNAMED.to_string(),
        SetupTarget::DefaultAgent => s::BOOTSTRAP_DEFAULT_AGENT.to_string(),
    };
    format!("<bootstrap>\n{body}\n</bootstrap>")
}

fn thinking_style(options: &PromptOptions<'_>) -> String {
    let mut out = String::from(s::THINKING_STYLE_HEAD);
    out.push('\n');
    if options.subagent_enabled {
        out.push_str(s::THINKING_STYLE_SUBAGENTS);
        out.push('\n');
    }
    out.push_str(s::THINKING_STYLE_TAIL);
    out
}

fn clarification(options: &PromptOptions<'_>) -> String {
    let mut out = String::from(s::CLARIFICATION_HEAD);
    out.push('\n');
    if options.plan_mode {
        out.push_str(s::CLARIFICATION_PLAN);
        out.push('\n');
    }
    out.push_str(s::CLARIFICATION_TAIL);
    out
}

fn skills_section(skills: &[SkillSummary]) -> String {
    let mut sorted: Vec<&SkillSummary> = skills.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.path.cmp(&b.path)));
    sorted.dedup_by(|a, b| a.name == b.name);
    let mut out = String::from(s::SKILLS_HEAD);
    out.push('\n');
    for skill in sorted {
        let _ = write!(
            out,
            "<skill>\n<name>{}</name>\n<description>{}</description>\n<location>{}</location>\n</skill>\n",
            escape_html(&skill.name),
            escape_html(skill.description.trim()),
            escape_html(&skill.path)
        );
    }
    out.push_str(s::SKILLS_TAIL);
    out
}

fn deferred_tools_section(names: &[String]) -> String {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut out = String::from(s::DEFERRED_TOOLS_HEAD);
    out.push('\n');
    for name in sorted {
        let _ = writeln!(out, "- {}", escape_html(name));
    }
    out.push_str(s::DEFERRED_TOOLS_TAIL);
    out
}

fn working_directory(options: &PromptOptions<'_>) -> String {
    let bash = options.has_tool("bash");
    let mut out = String::from("<working_directory>\n");
    out.push_str(s::UPLOADS);
    if options.converted_uploads {
        out.push_str(s::UPLOADS_CONVERTED);
    }
    out.push('\n');
    out.push_str(s::WORKSPACE);
    if bash {
        out.push_str(s::WORKSPACE_BASH);
    }
    out.push('\n');
    out.push_str(s::OUTPUTS);
    out.push('\n');
    if !options.mounts.is_empty() {
        let mut sorted: Vec<&(String, bool)> = options.mounts.iter().collect();
        sorted.sort();
        sorted.dedup_by(|a, b| a.0 == b.0);
        out.push_str("Additional mounted directories:\n");
        for (path, read_only) in sorted {
            let mode = if *read_only {
                "read-only"
            } else {
                "read-write"
            };
            let _ = writeln!(out, "- {} ({mode})", escape_html(path));
        }
    }
    let network = match options.sandbox_network.filter(|_| bash) {
        Some(true) => Some(s::BASH_ONLINE),
        Some(false) if options.has_web_tools() => Some(s::BASH_OFFLINE_WEB),
        Some(false) => Some(s::BASH_OFFLINE),
        None => None,
    };
    if let Some(line) = network {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("</working_directory>");
    out
}

fn response_style(chat: Option<ChatSurface>) -> String {
    let mut out = String::from(s::RESPONSE_STYLE_HEAD);
    out.push('\n');
    if let Some(chat) = chat {
        out.push_str(
            &s::RESPONSE_STYLE_CHAT
                .replace("{platform}", chat.platform)
                .replace("{max_chars}", &chat.max_chars.to_string()),
        );
        out.push('\n');
    }
    out.push_str(s::RESPONSE_STYLE_TAIL);
    out
}

fn critical_reminders(options: &PromptOptions<'_>) -> String {
    let mut out = String::from(s::CRITICAL_REMINDERS_HEAD);
    out.push('\n');
    if !options.skills.is_empty() {
        out.push_str(s::REMINDER_SKILLS);
        out.push('\n');
    }
    if options.subagent_enabled {
        let (per_response, per_run) = options.subagent_limits();
        let _ = writeln!(
            out,
            "- Sub-agents: only for a clear gain; at most {per_response} `task` calls per response and {per_run} per run."
        );
    }
    out.push_str(s::REMINDER_OUTPUTS);
    out.push('\n');
    if options.has_tool("write_file") && options.has_tool("str_replace") {
        out.push_str(s::REMINDER_EDITING);
        out.push('\n');
    }
    out.push_str(s::CRITICAL_REMINDERS_TAIL);
    out
}

#[cfg(test)]
#[path = "prompt_tests.rs"]
mod tests;
