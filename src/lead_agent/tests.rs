use std::path::Path;

use super::*;
use crate::config::ModelConfig;
use crate::custom_agents::{AgentUpdate, ModelSettings, ReasoningEffort};
use crate::model::ScriptedModel;
use crate::sandbox::{ExecMode, HostSandboxProvider, ProviderSettings, SandboxProvider};

struct Fixture {
    _dir: tempfile::TempDir,
    config: Arc<AppConfig>,
    models: ModelRegistry,
    tools: ToolRegistry,
    store: Arc<AgentStore>,
    cache: LeadAgentCache,
    scheduler: crate::scheduler::Scheduler,
}

fn write_skill(root: &Path, name: &str) {
    std::fs::create_dir_all(root.join(name)).unwrap();
    std::fs::write(
        root.join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: the {name} skill\n---\n"),
    )
    .unwrap();
}

fn fixture(edit: impl FnOnce(&mut AppConfig)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    for name in ["bootstrap", "pdf", "research"] {
        write_skill(&skills, name);
    }
    let mut config = AppConfig {
        data_dir: Some(dir.path().join("data")),
        admins: vec!["root".into()],
        ..Default::default()
    };
    config.sandbox.skills_path = Some(skills);
    // A token makes "local" an ordinary user, so the rules under test are the configured ones.
    config.gateway.api_tokens = vec![crate::config::ApiToken {
        token: crate::config::Secret::new("x".repeat(24)),
        user: "alice".into(),
    }];
    edit(&mut config);
    let config = Arc::new(config);
    let model =
        |name: &str| Arc::new(ScriptedModel::new(name, [])) as Arc<dyn crate::model::ChatModel>;
    let models = ModelRegistry::new()
        .with_model("plain", model("plain"), ModelConfig::default())
        .with_model(
            "thinker",
            model("thinker"),
            ModelConfig {
                supports_thinking: true,
                ..ModelConfig::default()
            },
        )
        .with_model(
            "seer",
            model("seer"),
            ModelConfig {
                supports_vision: true,
                ..ModelConfig::default()
            },
        );
    let provider = Arc::new(HostSandboxProvider::new(
        ProviderSettings::from_config(&config, None),
        ExecMode::Local { allow_bash: false },
    ));
    let tools = ToolRegistry::from_config(&config, provider).unwrap();
    let store = Arc::new(AgentStore::new(config.data_dir()));
    Fixture {
        _dir: dir,
        config,
        models,
        tools,
        store,
        cache: LeadAgentCache::new(),
        scheduler: crate::scheduler::Scheduler::new(
            Arc::new(antler_store::MemoryStore::new()),
            Arc::new(crate::cluster::SystemWallClock),
        ),
    }
}

impl Fixture {
    fn build(&self, user: &str, options: RunOptions) -> Result<LeadAgent, LeadAgentError> {
        make_lead_agent(
            &options,
            &self.config,
            LeadAgentDeps {
                models: &self.models,
                tools: Some(&self.tools),
                sandbox: None,
                checkpointer: None,
                users: RunUsers::alone(user),
                agents: Some(self.store.clone()),
                cache: Some(&self.cache),
                memory: None,
                skills: None,
                approvals: None,
                scheduler: Some(self.scheduler.clone()),
            },
        )
    }

    fn create(&self, user: &str, name: &str, edit: impl FnOnce(&mut AgentConfig)) {
        let mut config = AgentConfig::new(name, "test agent");
        edit(&mut config);
        self.store
            .create(user, name, &config, &format!("I am {name} of {user}."))
            .unwrap();
    }
}

fn tool_names(lead: &LeadAgent) -> Vec<String> {
    lead.agent
        .tools
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

fn custom(name: &str) -> RunOptions {
    RunOptions {
        agent_name: Some(name.into()),
        ..Default::default()
    }
}

#[test]
fn each_branch_builds_its_own_tool_and_skill_set() {
    let f = fixture(|_| {});
    f.create("root", "reviewer", |c| {
        c.tool_groups = Some(vec!["file:read".into()])
    });

    let default = f.build("root", RunOptions::default()).unwrap();
    assert_eq!(default.branch, Branch::Default);
    let names = tool_names(&default);
    assert!(names.contains(&"bash".to_string()) && names.contains(&"write_file".to_string()));
    assert!(
        !names
            .iter()
            .any(|n| n == SETUP_AGENT_NAME || n == UPDATE_AGENT_NAME)
    );
    assert_eq!(default.skill_names, ["bootstrap", "pdf", "research"]);

    let bootstrap = f
        .build(
            "root",
            RunOptions {
                is_bootstrap: true,
                agent_name: Some("New-Bot".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(bootstrap.branch, Branch::Bootstrap);
    assert_eq!(bootstrap.agent_name.as_deref(), Some("new-bot"));
    assert_eq!(bootstrap.options.agent_name.as_deref(), Some("new-bot"));
    let names = tool_names(&bootstrap);
    assert!(names.contains(&SETUP_AGENT_NAME.to_string()), "{names:?}");
    assert!(
        names.contains(&"read_file".to_string()),
        "configured tools stay"
    );
    assert!(!names.contains(&UPDATE_AGENT_NAME.to_string()));
    assert_eq!(bootstrap.skill_names, ["bootstrap"]);
    let prompt = bootstrap.agent.system_prompt.as_deref().unwrap();
    assert!(prompt.contains("<name>bootstrap</name>") && !prompt.contains("<name>pdf</name>"));
    assert!(prompt.starts_with("<role>\nYou are Antler,"));
    assert!(!prompt.contains("<self_update>"));

    let reviewer = f.build("root", custom("Reviewer")).unwrap();
    assert_eq!(reviewer.branch, Branch::Custom);
    let names = tool_names(&reviewer);
    assert!(names.contains(&UPDATE_AGENT_NAME.to_string()), "{names:?}");
    assert!(!names.contains(&SETUP_AGENT_NAME.to_string()));
    assert!(names.contains(&"read_file".to_string()));
    assert!(
        !names.contains(&"bash".to_string()) && !names.contains(&"write_file".to_string()),
        "tool_groups filter the configured tools: {names:?}"
    );
    let prompt = reviewer.agent.system_prompt.as_deref().unwrap();
    assert!(prompt.contains("You are reviewer,"));
    assert!(prompt.contains("<soul>\nI am reviewer of root.\n</soul>"));
    assert!(prompt.contains("<self_update>"));
}

const SETUP_AGENT_NAME: &str = crate::custom_agents::SETUP_AGENT;
const UPDATE_AGENT_NAME: &str = crate::custom_agents::UPDATE_AGENT;

#[test]
fn a_custom_agents_skill_list_filters_and_an_empty_list_disables() {
    let f = fixture(|_| {});
    f.create("root", "all", |_| {});
    f.create("root", "some", |c| {
        c.skills = Some(vec!["pdf".into(), "ghost".into()])
    });
    f.create("root", "none", |c| c.skills = Some(vec![]));
    let skills = |name: &str| f.build("root", custom(name)).unwrap().skill_names;
    assert_eq!(skills("all"), ["bootstrap", "pdf", "research"]);
    assert_eq!(skills("some"), ["pdf"]);
    assert!(skills("none").is_empty());
    let prompt = f
        .build("root", custom("none"))
        .unwrap()
        .agent
        .system_prompt
        .unwrap();
    assert!(!prompt.contains("<skill_system>"));
}

#[test]
fn a_webhook_run_of_a_custom_agent_has_no_update_agent() {
    let f = fixture(|_| {});
    f.create("root", "hook", |_| {});
    let lead = f
        .build(
            "root",
            RunOptions {
                channel_name: Some("webhook".into()),
                ..custom("hook")
            },
        )
        .unwrap();
    assert!(!tool_names(&lead).contains(&UPDATE_AGENT_NAME.to_string()));
}

#[test]
fn the_agents_model_and_behaviour_apply_unless_the_request_overrides_them() {
    let f = fixture(|_| {});
    f.create("root", "deep", |c| {
        c.model = Some("thinker".into());
        c.thinking_enabled = Some(true);
        c.reasoning_effort = Some(ReasoningEffort::High);
        c.model_settings = ModelSettings {
            temperature: Some(0.2),
            max_tokens: Some(512),
        };
    });
    let lead = f.build("root", custom("deep")).unwrap();
    assert_eq!(lead.agent.model.name(), "thinker");
    assert!(lead.options.thinking());
    assert_eq!(lead.options.reasoning_effort.as_deref(), Some("high"));
    assert!(lead.warnings.is_empty(), "{:?}", lead.warnings);
    assert!(
        lead.agent
            .middleware
            .iter()
            .any(|m| m.name() == AGENT_MODEL_SETTINGS),
        "model_settings are applied by a middleware"
    );
    let overridden = f
        .build(
            "root",
            RunOptions {
                model_name: Some("plain".into()),
                reasoning_effort: Some("low".into()),
                ..custom("deep")
            },
        )
        .unwrap();
    assert_eq!(overridden.agent.model.name(), "plain");
    assert_eq!(overridden.options.reasoning_effort.as_deref(), Some("low"));
    assert!(
        !overridden.options.thinking(),
        "the agent's thinking is downgraded on plain"
    );
    assert!(overridden.warnings[0].contains("does not support thinking"));
}

#[test]
fn dynamic_context_is_in_every_chain() {
    let f = fixture(|_| {});
    let lead = f.build("root", RunOptions::default()).unwrap();
    assert!(
        lead.agent
            .middleware
            .iter()
            .any(|m| m.name() == "DynamicContextMiddleware")
    );
}

#[test]
fn the_prompt_is_byte_identical_for_two_users_of_the_same_agent() {
    let f = fixture(|_| {});
    f.create("alice", "twin", |_| {});
    let soul = f.store.get("alice", "twin").unwrap().unwrap().soul;
    f.store
        .create(
            "bob",
            "twin",
            &AgentConfig::new("twin", "test agent"),
            &soul,
        )
        .unwrap();
    let alice = f.build("alice", custom("twin")).unwrap();
    let bob = f.build("bob", custom("twin")).unwrap();
    let uncached = make_lead_agent(
        &custom("twin"),
        &f.config,
        LeadAgentDeps {
            tools: Some(&f.tools),
            users: RunUsers::alone("bob"),
            agents: Some(f.store.clone()),
            ..LeadAgentDeps::models_only(&f.models)
        },
    )
    .unwrap();
    assert_eq!(alice.agent.system_prompt, bob.agent.system_prompt);
    assert_eq!(alice.agent.system_prompt, uncached.agent.system_prompt);
}

#[test]
fn an_update_applies_on_the_next_build() {
    let f = fixture(|_| {});
    f.create("root", "grow", |_| {});
    let before = f.build("root", custom("grow")).unwrap();
    f.store
        .update(
            "root",
            "grow",
            AgentUpdate {
                soul: Some("A new soul.".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let after = f.build("root", custom("grow")).unwrap();
    assert_ne!(before.agent.system_prompt, after.agent.system_prompt);
    assert!(
        after
            .agent
            .system_prompt
            .unwrap()
            .contains("<soul>\nA new soul.\n</soul>")
    );
}

#[test]
fn the_default_agent_carries_the_default_soul_when_present() {
    let f = fixture(|_| {});
    let without = f.build("root", RunOptions::default()).unwrap();
    assert!(!without.agent.system_prompt.unwrap().contains("<soul>"));
    f.store.set_default_soul("Default & kind.").unwrap();
    let with = f.build("root", RunOptions::default()).unwrap();
    assert!(
        with.agent
            .system_prompt
            .unwrap()
            .contains("<soul>\nDefault &amp; kind.\n</soul>")
    );
    let bootstrap = f
        .build(
            "root",
            RunOptions {
                is_bootstrap: true,
                ..Default::default()
            },
        )
        .unwrap();
    let prompt = bootstrap.agent.system_prompt.unwrap();
    assert!(
        prompt.contains("<soul>\nDefault &amp; kind.\n</soul>")
            && !prompt.contains("<self_update>")
    );
}

#[test]
fn a_skill_is_listed_only_to_agents_that_have_its_tools() {
    let f = fixture(|_| {});
    let skills = f.config.sandbox.skills_path.clone().unwrap();
    std::fs::create_dir_all(skills.join("web-brief")).unwrap();
    std::fs::write(
        skills.join("web-brief/SKILL.md"),
        "---\nname: web-brief\ndescription: Brief from the web\nallowed-tools: web_search, WebFetch, present_files\n---\n",
    )
    .unwrap();
    // The default tools include the web tools: shown.
    let default = f.build("root", RunOptions::default()).unwrap();
    assert!(default.skill_names.contains(&"web-brief".to_string()));
    let prompt = default.agent.system_prompt.unwrap();
    assert!(prompt.contains("<name>web-brief</name>"));
    assert!(prompt.contains("<citations>"));
    // An agent without the `web` group: hidden, while skills needing nothing stay.
    f.create("root", "reader", |agent| {
        agent.tool_groups = Some(vec!["file:read".into()]);
    });
    let reader = f.build("root", custom("reader")).unwrap();
    assert!(!reader.skill_names.contains(&"web-brief".to_string()));
    assert!(reader.skill_names.contains(&"pdf".to_string()));
    let prompt = reader.agent.system_prompt.unwrap();
    assert!(!prompt.contains("web-brief"));
    assert!(
        !prompt.contains("<citations>"),
        "no web tools, no citation rules"
    );
}

#[test]
fn the_prompt_states_the_surface_the_sandbox_and_plan_mode_truthfully() {
    let f = fixture(|config| config.uploads.auto_convert_documents = true);
    let prompt_with = |options: RunOptions, mode: Option<ExecMode>| -> String {
        let sandbox = mode.map(|mode| {
            Arc::new(HostSandboxProvider::new(
                ProviderSettings::from_config(&f.config, None),
                mode,
            )) as Arc<dyn SandboxProvider>
        });
        let lead = make_lead_agent(
            &options,
            &f.config,
            LeadAgentDeps {
                tools: Some(&f.tools),
                sandbox,
                ..LeadAgentDeps::models_only(&f.models)
            },
        )
        .unwrap();
        lead.agent.system_prompt.unwrap().to_string()
    };
    let bwrap = |network| {
        Some(ExecMode::Bwrap {
            network,
            drop_to_uid: false,
        })
    };

    let web = prompt_with(RunOptions::default(), bwrap(false));
    assert!(web.contains("bash has no network"));
    assert!(
        web.contains("report.pdf → report.md"),
        "HTTP uploads are converted"
    );
    assert!(!web.contains("characters per message"));
    assert!(!web.contains("write_todos"));
    assert!(prompt_with(RunOptions::default(), bwrap(true)).contains("bash has network access"));
    // bash refused by the sandbox: nothing said about it.
    let no_bash = prompt_with(
        RunOptions::default(),
        Some(ExecMode::Local { allow_bash: false }),
    );
    assert!(!no_bash.contains("bash"), "{no_bash}");

    let telegram = RunOptions {
        channel_name: Some("telegram".into()),
        is_plan_mode: true,
        ..Default::default()
    };
    let chat = prompt_with(telegram, bwrap(false));
    assert!(chat.contains("This chat is on Telegram, which shows at most 4096 characters"));
    assert!(
        chat.contains("report.pdf → report.md"),
        "chat attachments are converted too"
    );
    assert!(chat.contains("<todo_list_system>"));
}

#[test]
fn who_may_bootstrap_and_whose_agents_are_visible() {
    let strict = fixture(|_| {});
    let bootstrap = |name: Option<&str>| RunOptions {
        is_bootstrap: true,
        agent_name: name.map(str::to_string),
        ..Default::default()
    };
    let err = strict
        .build("alice", bootstrap(Some("mine")))
        .err()
        .unwrap();
    assert!(
        matches!(err, LeadAgentError::Forbidden(AccessDenied::Bootstrap)),
        "{err}"
    );
    assert!(strict.build("root", bootstrap(Some("mine"))).is_ok());

    let open = fixture(|c| c.agents.self_service = true);
    assert!(open.build("alice", bootstrap(Some("mine"))).is_ok());
    // Without a name the conversation asks for one: an agent of her own all the same.
    assert!(open.build("alice", bootstrap(None)).is_ok());
    let err = open
        .build("alice", bootstrap(Some("default")))
        .err()
        .unwrap();
    assert!(
        matches!(err, LeadAgentError::Forbidden(AccessDenied::DefaultSoul)),
        "{err}"
    );

    open.create("alice", "private", |_| {});
    assert!(open.build("alice", custom("private")).is_ok());
    let err = open.build("bob", custom("private")).err().unwrap();
    assert!(matches!(err, LeadAgentError::AgentNotFound { .. }), "{err}");
    assert!(err.to_string().contains("no agent named 'private' for you"));
    let err = open.build("alice", custom("../etc")).err().unwrap();
    assert!(matches!(err, LeadAgentError::InvalidAgentName(_)), "{err}");
}

#[test]
fn a_bootstrap_tells_the_model_which_agent_it_sets_up() {
    let f = fixture(|_| {});
    let bootstrap = |name: Option<&str>| RunOptions {
        is_bootstrap: true,
        agent_name: name.map(str::to_string),
        ..Default::default()
    };
    let setup_agent = |lead: &LeadAgent| {
        let tool = lead.agent.tools.iter().find(|t| t.name() == "setup_agent");
        tool.unwrap().clone()
    };

    let named = f.build("root", bootstrap(Some("Coder"))).unwrap();
    let prompt = named.agent.system_prompt.as_deref().unwrap();
    assert!(
        prompt.contains(
            "<bootstrap>\nThis conversation sets up a new agent named \"coder\". The name is fixed"
        ),
        "{prompt}"
    );
    let tool = setup_agent(&named);
    assert!(tool.description().contains("\"coder\""));
    assert_eq!(
        tool.parameters()["required"],
        serde_json::json!(["soul", "description"])
    );

    let unnamed = f.build("root", bootstrap(None)).unwrap();
    let prompt = unnamed.agent.system_prompt.as_deref().unwrap();
    assert!(prompt.contains("has no name yet"), "{prompt}");
    assert!(
        prompt.contains("ask the person what to call it"),
        "{prompt}"
    );
    let schema = setup_agent(&unnamed).parameters();
    assert_eq!(
        schema["required"],
        serde_json::json!(["name", "soul", "description"])
    );
    assert!(
        schema["properties"]["name"]["description"]
            .as_str()
            .unwrap()
            .contains("letters, digits and hyphens")
    );

    let default = f.build("root", bootstrap(Some("default"))).unwrap();
    assert_eq!(default.agent_name, None, "the default agent's own run");
    let prompt = default.agent.system_prompt.as_deref().unwrap();
    assert!(prompt.contains("sets up the default agent"), "{prompt}");
    assert!(
        setup_agent(&default)
            .description()
            .starts_with("Save the default agent's SOUL.md")
    );
}

#[path = "schema_tests.rs"]
mod schema;

mod chain_order;

mod schedule_tool;
