//! `apply_prompt_template`: assembles the lead agent's static system prompt.
//!
//! The output depends only on the agent and the options passed in — never on the user, the thread
//! or the clock — so it is byte-identical across users and turns and provider prefix caches hit.
//! The date and memory reach the model as messages (see `middleware::dynamic_context`).

use std::fmt::Write as _;

use crate::agents::bootstrap::SetupTarget;
use crate::agents::prompt_sections as s;

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
    pub skills: &'a [SkillSummary],
    /// Names of tools whose schemas are loaded on demand.
    pub deferred_tools: &'a [String],
    /// Extra sandbox mounts: (container path, read-only).
    pub mounts: &'a [(String, bool)],
    /// A bootstrap conversation: the agent it sets up (the `<bootstrap>` section).
    pub bootstrap: Option<&'a SetupTarget>,
    /// Memory is on: one sentence says what the `<memory>` block is.
    pub memory: bool,
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
            skills: &[],
            deferred_tools: &[],
            mounts: &[],
            bootstrap: None,
            memory: false,
        }
    }
}

/// Builds the system prompt. Sections, in order: role, soul, self_update (custom agents),
/// bootstrap (the agent a bootstrap sets up), thinking style, clarification, skills, deferred
/// tools, sub-agents (when enabled), working directory, response style, citations, critical
/// reminders, and the memory note (memory on).
pub fn apply_prompt_template(options: &PromptOptions<'_>) -> String {
    let mut sections: Vec<String> = Vec::with_capacity(12);
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
    sections.push(s::CLARIFICATION_SYSTEM.to_string());
    if !options.skills.is_empty() {
        sections.push(skills_section(options.skills));
    }
    if !options.deferred_tools.is_empty() {
        sections.push(deferred_tools_section(options.deferred_tools));
    }
    if options.subagent_enabled {
        sections.push(subagent_section(options));
    }
    sections.push(working_directory(options.mounts));
    sections.push(s::RESPONSE_STYLE.to_string());
    sections.push(s::CITATIONS.to_string());
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

fn subagent_section(options: &PromptOptions<'_>) -> String {
    let per_response = options.max_concurrent_subagents.max(1);
    let per_run = options.max_total_subagents.max(per_response);
    format!(
        "<subagent_system>
You can delegate work to sub-agents with the `task` tool. Each sub-agent works in its own context and reports back a result.
- Use it for independent parts of a larger job (separate research questions, separate files, separate analyses), not for trivial steps or for steps that depend on each other.
- HARD LIMIT: at most {per_response} `task` calls in one response; extra calls are dropped. If there are more parts, run them in batches over several responses.
- At most {per_run} `task` calls in one run in total.
- Give each sub-agent a self-contained brief: the goal, the inputs and where to find them, and the form of the result you want.
- Combine the results yourself and check them before you answer.
</subagent_system>"
    )
}

fn working_directory(mounts: &[(String, bool)]) -> String {
    let mut out = String::from(s::WORKING_DIRECTORY_HEAD);
    out.push('\n');
    if !mounts.is_empty() {
        let mut sorted: Vec<&(String, bool)> = mounts.iter().collect();
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
    out.push_str(s::WORKING_DIRECTORY_TAIL);
    out
}

fn critical_reminders(options: &PromptOptions<'_>) -> String {
    let mut out = String::from(s::CRITICAL_REMINDERS_HEAD);
    out.push('\n');
    if options.subagent_enabled {
        let _ = writeln!(
            out,
            "- Sub-agents: at most {} `task` calls per response.",
            options.max_concurrent_subagents.max(1)
        );
    }
    out.push_str(s::CRITICAL_REMINDERS_TAIL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str) -> SkillSummary {
        SkillSummary {
            name: name.into(),
            description: format!("does {name}"),
            path: format!("/mnt/skills/public/{name}/SKILL.md"),
        }
    }

    #[test]
    fn default_agent_has_the_core_sections_only() {
        let prompt = apply_prompt_template(&PromptOptions::default());
        assert!(prompt.starts_with("<role>\nYou are Antler,"));
        for tag in [
            "<thinking_style>",
            "<clarification_system>",
            "CLARIFY → PLAN → ACT",
            "<working_directory>",
            "/mnt/user-data/outputs",
            "present_files",
            "<response_style>",
            "<citations>",
            "<critical_reminders>",
        ] {
            assert!(prompt.contains(tag), "{tag}");
        }
        for absent in [
            "<soul>",
            "<self_update>",
            "<skill_system>",
            "<available-deferred-tools>",
            "<subagent_system>",
            "`task`",
        ] {
            assert!(!prompt.contains(absent), "{absent}");
        }
    }

    #[test]
    fn optional_sections_appear_when_asked_and_lists_are_sorted() {
        let skills = [skill("zeta"), skill("alpha")];
        let deferred = ["web_fetch".to_string(), "github_search".to_string()];
        let mounts = [("/mnt/data".to_string(), true)];
        let prompt = apply_prompt_template(&PromptOptions {
            agent_name: Some("reviewer"),
            soul: Some("Be <kind> & brief"),
            is_custom_agent: true,
            subagent_enabled: true,
            max_concurrent_subagents: 4,
            skills: &skills,
            deferred_tools: &deferred,
            mounts: &mounts,
            ..Default::default()
        });
        assert!(prompt.contains("You are reviewer,"));
        assert!(prompt.contains("<soul>\nBe &lt;kind&gt; &amp; brief\n</soul>"));
        assert!(prompt.contains("<self_update>"));
        assert!(prompt.contains("at most 4 `task` calls in one response"));
        assert!(prompt.contains("Decomposition check"));
        assert!(prompt.find("<name>alpha</name>") < prompt.find("<name>zeta</name>"));
        assert!(prompt.find("- github_search") < prompt.find("- web_fetch"));
        assert!(prompt.contains("- /mnt/data (read-only)"));
        let reordered = apply_prompt_template(&PromptOptions {
            agent_name: Some("reviewer"),
            soul: Some("Be <kind> & brief"),
            is_custom_agent: true,
            subagent_enabled: true,
            max_concurrent_subagents: 4,
            skills: &[skill("alpha"), skill("zeta")],
            deferred_tools: &["github_search".to_string(), "web_fetch".to_string()],
            mounts: &mounts,
            ..Default::default()
        });
        assert_eq!(prompt, reordered);
    }

    #[test]
    fn escape_touches_only_angle_brackets_and_ampersands() {
        assert_eq!(escape_html("a<b>&\"c'"), "a&lt;b&gt;&amp;\"c'");
    }
}
