//! The lead agent: the app-level factory every run of the daemon and the embedded client uses
//! (DeerFlow's `make_lead_agent`).
//!
//! One factory, three branches chosen from the run options: a bootstrap conversation (only the
//! `bootstrap` skill, plus `setup_agent`), a custom agent of the calling user (its SOUL.md, tool
//! groups, skills and model preferences, plus `update_agent`), or the default agent. The model is
//! resolved request → agent → `models[0]`; what the model cannot do is downgraded with a warning.
//! The system prompt is static per agent and options (prefix-cacheable); the date reaches the
//! model through `DynamicContextMiddleware`. Built per run, so everything reusable is cached in
//! a [`LeadAgentCache`].

pub mod access;
mod cache;
mod chain;
mod model_settings;
mod prompt_inputs;
mod resolve;

use std::sync::Arc;

use crate::agent::{Agent, AgentBuildError, AgentOptions, create_agent};
use crate::agent_api::MiddlewareRef;
use crate::agent_api::RunOptions;
use crate::agent_api::RunUsers;
use crate::agent_api::ToolRef;
use crate::approvals::{ApprovalGate, ApprovalMiddleware};
use crate::config::AppConfig;
use crate::config::subagents::clamp_total;
use crate::custom_agents::prompt::DEFAULT_MAX_CONCURRENT_SUBAGENTS;
use crate::custom_agents::{
    AgentConfig, AgentNameError, AgentStore, AgentStoreError, PromptOptions, SetupAgentTool,
    SetupTarget, SkillSummary, StoredAgent, UpdateAgentTool, apply_prompt_template,
    normalize_agent_name,
};
use crate::lead_agent::chain::ChainParts;
use crate::lead_agent::resolve::ResolvedModel;
use crate::mcp::DeferredCatalog;
use crate::memory::MemoryService;
use crate::middleware::subagent_limit::clamp_concurrency;
use crate::model::ModelRegistry;
use crate::sandbox::SandboxProvider;
use crate::scheduler::Scheduler;
use crate::scheduler::tool::{SCHEDULE_TASK, ScheduleTaskTool, offered as schedule_offered};
use crate::skills::SkillCatalog;
use crate::subagents::{SubagentRegistry, SubagentRunner, SubagentTasks, TaskTool};
use crate::tools::registry::ToolRegistry;
use antler_store::Checkpointer;

pub use access::AccessDenied;
pub use cache::LeadAgentCache;
pub use model_settings::AGENT_MODEL_SETTINGS;

pub const LEAD_AGENT_NAME: &str = "lead_agent";

#[derive(Debug, thiserror::Error)]
pub enum LeadAgentError {
    #[error("no model is configured; add an entry under `models:` in config.yaml")]
    NoModel,
    #[error("could not assemble the lead agent: {0}")]
    Build(#[from] AgentBuildError),
    #[error(transparent)]
    InvalidAgentName(#[from] AgentNameError),
    #[error(
        "no agent named '{name}' for you; create one with /bootstrap or list yours with GET /api/agents"
    )]
    AgentNotFound { name: String },
    #[error(transparent)]
    Forbidden(#[from] AccessDenied),
    #[error("could not load agent '{name}': {source}")]
    Store {
        name: String,
        #[source]
        source: AgentStoreError,
    },
}

/// Which of the three agents a run gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Branch {
    Default,
    Custom,
    Bootstrap,
}

/// A built lead agent and the options the run must use (model resolved, thinking downgraded,
/// agent name normalised).
pub struct LeadAgent {
    pub agent: Agent,
    pub options: RunOptions,
    pub branch: Branch,
    /// The (lower-cased) agent the run is for: the custom agent, or the one being bootstrapped.
    pub agent_name: Option<String>,
    /// Names of the skills listed in the prompt, sorted.
    pub skill_names: Vec<String>,
    /// Why requested options were changed; surfaces may show these to the user.
    pub warnings: Vec<String>,
    /// The run's sub-agents (with `subagent_enabled`): its owner waits for them after the run.
    pub subagent_tasks: Option<SubagentTasks>,
}

/// What the factory builds from, besides the request and the config.
#[derive(Clone)]
pub struct LeadAgentDeps<'a> {
    pub models: &'a ModelRegistry,
    /// The configured tools; `None` builds an agent without configured tools.
    pub tools: Option<&'a ToolRegistry>,
    pub sandbox: Option<Arc<dyn SandboxProvider>>,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    /// Who the run is for: the speaker's custom agents are visible and decide what it may do
    /// (bootstrap, agent tools), the owner's skills are what the thread's sandbox mounts; a
    /// shared conversation gets sender names and no persisted personal memory.
    pub users: RunUsers,
    /// Custom agents; `None` reads them from the config's data dir.
    pub agents: Option<Arc<AgentStore>>,
    /// Skill scans and prompts reused across runs; `None` builds everything afresh.
    pub cache: Option<&'a LeadAgentCache>,
    /// Long-term memory: injected on a thread's first turn and updated after runs while
    /// `memory.enabled`; `None` runs without memory.
    pub memory: Option<&'a MemoryService>,
    /// Public and custom skills with their enable state; `None` shows every public skill as
    /// enabled (no store to read the state from).
    pub skills: Option<SkillCatalog>,
    /// Where gated tool calls park (`approvals:`); `None` runs without the approval gate.
    pub approvals: Option<ApprovalGate>,
    /// Schedules (`schedule_task`, while `scheduler.enabled`); `None` runs without the tool.
    pub scheduler: Option<Scheduler>,
}

impl<'a> LeadAgentDeps<'a> {
    /// Just a model registry, for the local operator: no tools, sandbox or checkpoints.
    pub fn models_only(models: &'a ModelRegistry) -> Self {
        Self {
            models,
            tools: None,
            sandbox: None,
            checkpointer: None,
            users: RunUsers::alone(access::LOCAL_OPERATOR),
            agents: None,
            cache: None,
            memory: None,
            skills: None,
            approvals: None,
            scheduler: None,
        }
    }
}

/// Builds the lead agent for one run of `deps.users`.
///
/// Bootstrap needs [`access::check_bootstrap`]; a custom agent must exist among the user's own
/// agents. See the module docs for the rest.
pub fn make_lead_agent(
    options: &RunOptions,
    config: &Arc<AppConfig>,
    deps: LeadAgentDeps<'_>,
) -> Result<LeadAgent, LeadAgentError> {
    let store = deps
        .agents
        .clone()
        .unwrap_or_else(|| Arc::new(AgentStore::new(config.data_dir())));
    let mut warnings = Vec::new();
    let mut run = resolve_branch(options, config, &deps, &store)?;
    let agent_config = run.custom.as_ref().map(|agent| &agent.config);
    let model = resolve_run_model(&mut run.options, config, &deps, agent_config, &mut warnings)?;

    let RunTools {
        tools,
        deferred,
        skills,
        skill_activation,
        facts,
        subagent_tasks,
        approvals,
    } = run_tools(&deps, config, &run, &store, &model, &mut warnings);
    let system_prompt = system_prompt(
        &deps,
        config,
        &run,
        &store,
        PromptParts {
            skills: &skills,
            deferred: deferred.as_deref(),
            facts: &facts,
            subagents: subagent_tasks.is_some(),
        },
    );
    let chain = chain::chain_options(
        &deps,
        config,
        ChainParts {
            model: &model,
            agent_config,
            deferred,
            skill_activation,
            subagents: subagent_tasks.is_some(),
            approvals,
            tools: &tools,
        },
    );
    let agent = create_agent(
        model.model,
        tools,
        AgentOptions {
            system_prompt: Some(system_prompt),
            plan_mode: run.options.is_plan_mode,
            checkpointer: deps.checkpointer,
            sandbox_provider: deps.sandbox,
            name: Some(LEAD_AGENT_NAME.to_string()),
            recursion_limit: Some(config.recursion_limit_for(run.options.recursion_limit)),
            config: Some(config.clone()),
            ..chain
        },
    )?;
    Ok(LeadAgent {
        agent,
        options: run.options,
        branch: run.branch,
        agent_name: run.agent_name,
        skill_names: skills.iter().map(|s| s.name.clone()).collect(),
        warnings,
        subagent_tasks,
    })
}

/// The run's tools and what depends on them: the deferred MCP tools, the skills the prompt
/// lists (and the `/skill` activation over them), the prompt's facts, and the sub-agents.
struct RunTools {
    tools: Vec<ToolRef>,
    deferred: Option<Arc<DeferredCatalog>>,
    skills: Vec<SkillSummary>,
    skill_activation: MiddlewareRef,
    facts: prompt_inputs::PromptFacts,
    subagent_tasks: Option<SubagentTasks>,
    /// The approval gate over these tools (its sub-agent form went to the `task` tool).
    approvals: Option<MiddlewareRef>,
}

/// The branch's tools (the configured ones its agent may use, plus its own agent tool), then
/// what is chosen from them; the lead's `task` tool joins last, after the prompt's facts were
/// taken from the configured tools.
fn run_tools(
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    run: &RunBranch,
    store: &Arc<AgentStore>,
    model: &ResolvedModel,
    warnings: &mut Vec<String>,
) -> RunTools {
    let agent_config = run.custom.as_ref().map(|agent| &agent.config);
    let catalog = skill_catalog(deps, config);
    let mut tools = select_tools(
        deps,
        run.branch,
        agent_config,
        (&run.options, run.setup_target.as_ref()),
        (store, &catalog),
        model.supports_vision,
    );
    let groups = agent_config.and_then(|agent| agent.tool_groups.as_deref());
    if let Some(scheduler) = &deps.scheduler
        && schedule_offered(config, groups)
    {
        tools.push(Arc::new(ScheduleTaskTool::new(scheduler.clone())));
    }
    let deferred = deferred_catalog(deps, config, &tools);
    let (skills, skill_activation) = prompt_inputs::select_skills(
        deps,
        (config, &catalog),
        (run.branch, agent_config),
        &tools,
        warnings,
    );
    let facts = prompt_inputs::prompt_facts(deps, config, &run.options, &tools);
    let approvals = deps.approvals.clone().map(|gate| {
        let additions = agent_config
            .map(|agent| agent.approvals.clone())
            .unwrap_or_default();
        ApprovalMiddleware::new(gate, &tools, additions)
    });
    let subagent_gate = approvals
        .as_ref()
        .map(|gate| Arc::new(gate.for_subagent()) as MiddlewareRef);
    let subagent_tasks = run
        .options
        .subagent_enabled
        .then(|| add_task_tool(&mut tools, deps, config, model, &skills, subagent_gate));
    RunTools {
        tools,
        deferred,
        skills,
        skill_activation: Arc::new(skill_activation),
        facts,
        subagent_tasks,
        approvals: approvals.map(|gate| Arc::new(gate) as MiddlewareRef),
    }
}

/// Which agent a run is for, as the request and the user's agents decide.
struct RunBranch {
    /// The request's options with the agent name normalised (none for the default agent).
    options: RunOptions,
    branch: Branch,
    agent_name: Option<String>,
    setup_target: Option<SetupTarget>,
    custom: Option<StoredAgent>,
}

/// Picks the branch: a bootstrap (checked against who may set up what), one of the speaker's
/// custom agents (it must exist), or the default agent. The agent name is validated first, so
/// a malformed one is refused before anything is read.
fn resolve_branch(
    options: &RunOptions,
    config: &AppConfig,
    deps: &LeadAgentDeps<'_>,
    store: &AgentStore,
) -> Result<RunBranch, LeadAgentError> {
    let mut options = options.clone();
    let mut agent_name = options
        .agent_name
        .as_deref()
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(normalize_agent_name)
        .transpose()?;
    let setup_target = options
        .is_bootstrap
        .then(|| SetupTarget::of(agent_name.as_deref()));
    if setup_target == Some(SetupTarget::DefaultAgent) {
        // The default agent's own memory, thread record and prompt.
        agent_name = None;
    }
    options.agent_name = agent_name.clone();
    let (branch, custom) = if let Some(target) = &setup_target {
        access::check_bootstrap(config, &deps.users.speaker, target)?;
        (Branch::Bootstrap, None)
    } else if let Some(name) = &agent_name {
        let agent = store
            .get(agent_owner(&options, deps), name)
            .map_err(|source| LeadAgentError::Store {
                name: name.clone(),
                source,
            })?
            .ok_or_else(|| LeadAgentError::AgentNotFound { name: name.clone() })?;
        (Branch::Custom, Some(agent))
    } else {
        (Branch::Default, None)
    };
    Ok(RunBranch {
        options,
        branch,
        agent_name,
        setup_target,
        custom,
    })
}

/// Whose agents a run's custom agent is one of: the speaker's, except in a shared conversation
/// whose agent a member chose (`RunOptions::agent_owner`): every member's turn runs that
/// member's agent (its soul, tools and skills; memory, usage and budget stay the speaker's,
/// and only its owner's turns may change it).
fn agent_owner<'a>(options: &'a RunOptions, deps: &'a LeadAgentDeps<'_>) -> &'a str {
    match &options.agent_owner {
        Some(owner) if deps.users.shared => owner,
        _ => &deps.users.speaker,
    }
}

/// The run's model: the request's options win, the agent's preferences fill what the request
/// left open, and what the model cannot do is downgraded with a warning.
fn resolve_run_model(
    options: &mut RunOptions,
    config: &AppConfig,
    deps: &LeadAgentDeps<'_>,
    agent_config: Option<&AgentConfig>,
    warnings: &mut Vec<String>,
) -> Result<ResolvedModel, LeadAgentError> {
    if let Some(agent) = agent_config {
        options.thinking_enabled = options.thinking_enabled.or(agent.thinking_enabled);
        if options.reasoning_effort.is_none() {
            options.reasoning_effort = agent.reasoning_effort.map(|e| e.as_str().to_string());
        }
    }
    let model = resolve::resolve_model(
        deps.models,
        config,
        options.model_name.as_deref(),
        agent_config.and_then(|agent| agent.model.as_deref()),
        warnings,
    )?;
    resolve::downgrade_thinking(options, &model, warnings);
    options.model_name = Some(model.name.clone());
    Ok(model)
}

/// Adds the `task` tool; its sub-agents get the lead's tools, not the tool of its branch
/// (creating or updating an agent, or a schedule, is the lead conversation's business). The tasks are the
/// run's to wait for.
fn add_task_tool(
    tools: &mut Vec<ToolRef>,
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    model: &ResolvedModel,
    skills: &[SkillSummary],
    approvals: Option<MiddlewareRef>,
) -> SubagentTasks {
    let inheritable: Vec<ToolRef> = tools
        .iter()
        .filter(|t| !matches!(t.name(), "setup_agent" | "update_agent" | SCHEDULE_TASK))
        .cloned()
        .collect();
    let mut runner = SubagentRunner::new(
        SubagentRegistry::from_config(&config.subagents),
        model.model.clone(),
        deps.models.clone(),
        inheritable,
        skills.to_vec(),
        deps.sandbox.clone(),
    );
    if let Some(gate) = approvals {
        runner = runner.with_approvals(gate);
    }
    let runner = Arc::new(runner);
    let tasks = runner.tasks();
    tools.push(Arc::new(TaskTool::new(runner)));
    tasks
}

/// What the system prompt states besides the agent and the config.
struct PromptParts<'a> {
    skills: &'a [SkillSummary],
    deferred: Option<&'a DeferredCatalog>,
    facts: &'a prompt_inputs::PromptFacts,
    subagents: bool,
}

/// The run's system prompt, from the cache when there is one (it depends only on its inputs,
/// so every run of one agent with the same options shares it).
fn system_prompt(
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    run: &RunBranch,
    store: &AgentStore,
    parts: PromptParts<'_>,
) -> Arc<str> {
    let options = &run.options;
    let soul = match &run.custom {
        Some(agent) => Some(agent.soul.clone()),
        None => default_soul(store),
    };
    let deferred_names = parts.deferred.map(|c| c.names()).unwrap_or_default();
    let facts = parts.facts;
    let prompt_options = PromptOptions {
        // Bootstrap speaks as the default agent: the new agent does not exist yet.
        agent_name: run.custom.as_ref().map(|agent| agent.config.name.as_str()),
        soul: soul.as_deref(),
        // The `<self_update>` section goes with `update_agent` (see `select_tools`).
        is_custom_agent: run.branch == Branch::Custom
            && agent_owner(options, deps) == deps.users.speaker,
        subagent_enabled: parts.subagents,
        max_concurrent_subagents: clamp_concurrency(
            options
                .max_concurrent_subagents
                .unwrap_or(DEFAULT_MAX_CONCURRENT_SUBAGENTS),
        ),
        max_total_subagents: options
            .max_total_subagents
            .map(clamp_total)
            .unwrap_or_else(|| config.subagents.max_total()),
        plan_mode: options.is_plan_mode,
        skills: parts.skills,
        deferred_tools: &deferred_names,
        mounts: &facts.mounts,
        tools: &facts.tools,
        sandbox_network: facts.sandbox_network,
        converted_uploads: facts.converted_uploads,
        chat: facts.chat,
        bootstrap: run.setup_target.as_ref(),
        memory: deps.memory.is_some() && config.memory.enabled,
        participants: deps.users.shared,
        // Other people's words and uploads in a shared conversation, documents converted from
        // uploads, and tools that read outside text all arrive marked.
        untrusted_content: facts.untrusted_tools || deps.users.shared || facts.converted_uploads,
    };
    match deps.cache {
        Some(cache) => cache.prompt(&prompt_options),
        None => apply_prompt_template(&prompt_options).into(),
    }
}

/// Configured tools (filtered by the agent's groups), minus vision tools for a model without
/// vision, plus the agent tool of the branch.
fn select_tools(
    deps: &LeadAgentDeps<'_>,
    branch: Branch,
    agent_config: Option<&AgentConfig>,
    (options, setup_target): (&RunOptions, Option<&SetupTarget>),
    (store, catalog): (&Arc<AgentStore>, &SkillCatalog),
    supports_vision: bool,
) -> Vec<ToolRef> {
    let groups = agent_config.and_then(|agent| agent.tool_groups.as_deref());
    // Vision tools (view_image) only reach models that can see.
    let mut tools = deps
        .tools
        .map(|registry| registry.tools_for_model(groups, supports_vision))
        .unwrap_or_default();
    let agent_tool: Option<ToolRef> = match branch {
        Branch::Bootstrap => Some(Arc::new(SetupAgentTool::for_target(
            store.clone(),
            Some(catalog.clone()),
            setup_target.cloned().unwrap_or(SetupTarget::Unnamed),
        ))),
        // A webhook has no conversation partner to agree a change of persona with.
        // Nor may a member change the agent another member chose for a shared conversation.
        Branch::Custom
            if options.channel_name.as_deref() != Some("webhook")
                && agent_owner(options, deps) == deps.users.speaker =>
        {
            Some(Arc::new(UpdateAgentTool::new(
                store.clone(),
                Some(catalog.clone()),
            )))
        }
        _ => None,
    };
    if let Some(tool) = agent_tool {
        // The agent tool is the one this branch exists for; a configured namesake gives way.
        tools.retain(|existing| existing.name() != tool.name());
        tools.push(tool);
    }
    tools
}

/// With `tool_search.enabled`, the external (MCP) tools among `tools` are deferred: listed by
/// name in the prompt, their schemas loaded by `tool_search`.
fn deferred_catalog(
    deps: &LeadAgentDeps<'_>,
    config: &AppConfig,
    tools: &[ToolRef],
) -> Option<Arc<DeferredCatalog>> {
    let registry = deps.tools.filter(|_| config.tool_search.enabled)?;
    let external: Vec<ToolRef> = tools
        .iter()
        .filter(|tool| registry.is_external(tool.name()))
        .cloned()
        .collect();
    (!external.is_empty()).then(|| DeferredCatalog::new(&external))
}

/// The harness's skill catalog, or one on the config's skills directory (without the enable
/// states of a store) when the factory runs without a harness.
fn skill_catalog(deps: &LeadAgentDeps<'_>, config: &AppConfig) -> SkillCatalog {
    match &deps.skills {
        Some(catalog) => catalog.clone(),
        None => SkillCatalog::from_config(
            config,
            Arc::new(antler_store::MemoryStore::new()),
            deps.cache
                .map(LeadAgentCache::skills_loader)
                .unwrap_or_default(),
        ),
    }
}

/// `{data_dir}/SOUL.md`; an unreadable file is logged and treated as absent so runs go on.
fn default_soul(store: &AgentStore) -> Option<String> {
    match store.default_soul() {
        Ok(soul) => soul,
        Err(error) => {
            tracing::warn!(%error, "Cannot read the default agent's SOUL.md; running without it");
            None
        }
    }
}

#[cfg(test)]
mod tests;

/// Sub-agents end to end: they need the lead agent, which `subagents` must not depend on.
#[cfg(test)]
mod subagent_tests;

/// What the models read, as snapshots (`tests/prompts/`).
#[cfg(test)]
mod snapshots;
