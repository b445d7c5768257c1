//! What the lead agent's system prompt is built from besides the agent itself: the skills the
//! run can use, and the facts about its tools, sandbox and surface that decide which rules the
//! prompt states (`agents::prompt`).

use crate::agent_api::{RunOptions, ToolRef};
use crate::config::AppConfig;
use crate::custom_agents::surface::ChatSurface;
use crate::custom_agents::{AgentConfig, SkillSummary};
use crate::lead_agent::{Branch, LeadAgentDeps};
use crate::sandbox::SandboxInfo;
use crate::skills::fit::missing_tools;
use crate::skills::{BOOTSTRAP_SKILL, Skill, SkillActivationMiddleware, SkillCatalog, skills_dir};

/// The skills of this run: what the prompt lists and the `/skill` activation middleware.
///
/// The default agent gets every enabled skill of the thread's owner (whose skills its sandbox
/// mounts), a custom agent its whitelist of them (`None` = all, `[]` = none), a bootstrap
/// conversation only `bootstrap` (enabled or not: the interview needs its guide). Of those, the
/// prompt lists only the skills whose `allowed-tools` are all among `tools` (`skills::fit`); a
/// user can still activate another one explicitly with `/name`.
pub(super) fn select_skills(
    deps: &LeadAgentDeps<'_>,
    (config, catalog): (&AppConfig, &SkillCatalog),
    (branch, agent_config): (Branch, Option<&AgentConfig>),
    tools: &[ToolRef],
    warnings: &mut Vec<String>,
) -> (Vec<SkillSummary>, SkillActivationMiddleware) {
    // The owner's: the thread's sandbox mounts them, so the prompt lists what the run can read.
    let owner = &deps.users.owner;
    let visible = catalog.list(owner).unwrap_or_else(|error| {
        tracing::warn!(%error, user = %owner, "Cannot list the user's skills; running without skills");
        Vec::new()
    });
    let allowed: Option<Vec<String>> = match branch {
        Branch::Bootstrap => Some(vec![BOOTSTRAP_SKILL.to_string()]),
        Branch::Custom => agent_config.and_then(|agent| agent.skills.clone()),
        Branch::Default => None,
    };
    let listed: Vec<&Skill> = visible
        .iter()
        .filter(|skill| skill.enabled || branch == Branch::Bootstrap)
        .filter(|skill| {
            allowed
                .as_ref()
                .is_none_or(|names| names.contains(&skill.name))
        })
        .collect();
    if branch == Branch::Bootstrap && listed.is_empty() {
        let dir = skills_dir(config);
        tracing::warn!(dir = %dir.display(), "The bootstrap skill is not installed; the interview runs without its guide");
        warnings.push(format!(
            "the bootstrap skill was not found in {}; set sandbox.skills_path to the directory holding bootstrap/SKILL.md",
            dir.display()
        ));
    }
    let has = |name: &str| {
        tools
            .iter()
            .any(|tool| tool.name().eq_ignore_ascii_case(name))
    };
    let summaries = listed
        .iter()
        .filter(|skill| {
            let missing = missing_tools(skill.allowed_tools.as_deref(), has);
            if !missing.is_empty() {
                tracing::debug!(skill = %skill.name, missing = ?missing, "Skill not listed: the agent lacks tools it needs");
            }
            missing.is_empty()
        })
        .map(|skill| SkillSummary {
            name: skill.name.clone(),
            description: skill.description.clone(),
            path: skill.location.clone(),
            allowed_tools: skill.allowed_tools.clone(),
        })
        .collect();
    (summaries, SkillActivationMiddleware::new(visible, allowed))
}

/// What the run's tools, sandbox and surface are, as far as the prompt's rules depend on them.
pub(super) struct PromptFacts {
    /// Tool names the prompt may refer to (`bash` only when the sandbox runs commands).
    pub(super) tools: Vec<String>,
    pub(super) sandbox_network: Option<bool>,
    pub(super) converted_uploads: bool,
    pub(super) chat: Option<ChatSurface>,
    /// Extra sandbox mounts: (virtual path, read-only).
    pub(super) mounts: Vec<(String, bool)>,
    /// A tool brings outside text (`Tool::untrusted_output`).
    pub(super) untrusted_tools: bool,
}

pub(super) fn prompt_facts(
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    options: &RunOptions,
    tools: &[ToolRef],
) -> PromptFacts {
    // The provider's own description: after a reload of `sandbox.*` the run may still hold the
    // provider built from the earlier settings, and the prompt must say what it really does.
    let info = deps.sandbox.as_ref().map(|provider| provider.info());
    let bash_runs = info.as_ref().is_none_or(|info| info.bash);
    let chat = ChatSurface::for_channel(options.channel_name.as_deref());
    PromptFacts {
        tools: tools
            .iter()
            .map(|tool| tool.name().to_string())
            .filter(|name| bash_runs || name != "bash")
            .collect(),
        sandbox_network: info.as_ref().and_then(|info| info.network),
        // HTTP uploads and chat platforms' attachments are converted alike.
        converted_uploads: config.uploads.auto_convert_documents,
        chat,
        mounts: match info {
            Some(info) => info.mounts,
            None => SandboxInfo::extra_mounts(&config.sandbox),
        },
        untrusted_tools: tools.iter().any(|tool| tool.untrusted_output().is_some()),
    }
}
