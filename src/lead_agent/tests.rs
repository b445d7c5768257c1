use std::path::Path;

use super::*;
use crate::agents::{AgentUpdate, ModelSettings, ReasoningEffort};
use crate::config::ModelConfig;
use crate::model::ScriptedModel;
use serde_json::Value;
use crate::sandbox::{ExecMode, HostSandboxProvider, ProviderSettings};

struct Fixture {
    _dir: tempfile::TempDir,
    config: Arc<AppConfig>,
    models: ModelRegistry,
    tools: ToolRegistry,
    store: Arc<AgentStore>,
    cache: LeadAgentCache,
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

const SETUP_AGENT_NAME: &str = crate::agents::SETUP_AGENT;
const UPDATE_AGENT_NAME: &str = crate::agents::UPDATE_AGENT;

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
    let err = open.build("alice", bootstrap(None)).err().unwrap();
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

/// Every tool any branch can hand the model: the configured kinds (the web tools added), the
/// middlewares' (`ask_clarification`, `write_todos`, `present_files`), `task`, `setup_agent`
/// and `update_agent`.
fn every_builtin_tool() -> Vec<ToolRef> {
    let f = fixture(|config| {
        let kinds = [
            "bash",
            "ls",
            "read_file",
            "write_file",
            "str_replace",
            "glob",
            "grep",
            "view_image",
            "web_search",
            "web_fetch",
        ];
        for kind in kinds {
            config.tools.push(crate::config::ToolConfig {
                name: kind.into(),
                group: None,
                use_kind: kind.into(),
                params: Default::default(),
            });
        }
    });
    f.create("root", "reviewer", |_| {});
    let planning = RunOptions {
        model_name: Some("seer".into()),
        is_plan_mode: true,
        subagent_enabled: true,
        ..Default::default()
    };
    let bootstrap = RunOptions {
        is_bootstrap: true,
        agent_name: Some("new-bot".into()),
        ..Default::default()
    };
    let mut tools: Vec<ToolRef> = Vec::new();
    for options in [planning, bootstrap, custom("reviewer")] {
        let lead = f.build("root", options).unwrap();
        for tool in lead.agent.tools {
            if !tools.iter().any(|t| t.name() == tool.name()) {
                tools.push(tool);
            }
        }
    }
    tools
}

/// The properties of each tool's arguments in the order their structs declare them.
const DECLARED_ORDER: [(&str, &[&str]); 17] = [
    ("bash", &["description", "command"]),
    ("ls", &["description", "path"]),
    ("read_file", &["description", "path", "start_line", "end_line"]),
    ("write_file", &["description", "path", "content", "append"]),
    (
        "str_replace",
        &["description", "path", "old_str", "new_str", "replace_all"],
    ),
    (
        "glob",
        &["description", "pattern", "path", "include_dirs", "max_results"],
    ),
    (
        "grep",
        &[
            "description",
            "pattern",
            "path",
            "glob",
            "literal",
            "case_sensitive",
            "max_results",
        ],
    ),
    ("view_image", &["description", "path"]),
    ("web_search", &["query", "max_results"]),
    ("web_fetch", &["url"]),
    ("present_files", &["filepaths"]),
    (
        "task",
        &["description", "prompt", "subagent_type", "max_turns"],
    ),
    ("write_todos", &["todos"]),
    (
        "ask_clarification",
        &["question", "clarification_type", "context", "options"],
    ),
    ("setup_agent", &["soul", "description", "skills"]),
    (
        "update_agent",
        &["soul", "description", "skills", "tool_groups", "model"],
    ),
    ("tool_search", &["query", "max_results"]),
];

/// Every schema node below `schema` (itself included).
fn schema_nodes(schema: &Value, out: &mut Vec<serde_json::Map<String, Value>>) {
    match schema {
        Value::Object(node) => {
            out.push(node.clone());
            node.values().for_each(|child| schema_nodes(child, out));
        }
        Value::Array(items) => items.iter().for_each(|child| schema_nodes(child, out)),
        _ => {}
    }
}

#[test]
fn every_builtin_tool_schema_is_plain_json_schema_in_declared_order() {
    let mut tools = every_builtin_tool();
    let catalog = DeferredCatalog::new(&[]);
    tools.push(Arc::new(crate::mcp::ToolSearchTool::new(catalog)));
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    let declared: Vec<&str> = DECLARED_ORDER.iter().map(|(name, _)| *name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    let mut expected = declared.clone();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "every built-in tool is checked");
    for tool in &tools {
        let schema = tool.parameters();
        let (_, order) = DECLARED_ORDER
            .iter()
            .find(|(name, _)| *name == tool.name())
            .unwrap();
        let properties: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(properties, *order, "{}", tool.name());
        let text = schema.to_string();
        for internal in ["Arguments of", "the schema the model sees", "$schema", "title"] {
            assert!(!text.contains(internal), "{}: {text}", tool.name());
        }
        assert!(schema.get("description").is_none(), "{}: {text}", tool.name());
        let mut nodes = Vec::new();
        schema_nodes(&schema, &mut nodes);
        for node in nodes {
            assert!(node.get("format").is_none(), "{}: {text}", tool.name());
            assert!(node.get("anyOf").is_none(), "{}: {text}", tool.name());
            if let Some(kind) = node.get("type") {
                assert!(kind.is_string(), "{}: a plain type: {text}", tool.name());
            }
            if let Some(values) = node.get("enum").and_then(Value::as_array) {
                assert!(!values.iter().any(Value::is_null), "{}: {text}", tool.name());
            }
        }
    }
    let write_file = tools.iter().find(|t| t.name() == "write_file").unwrap();
    assert!(
        write_file
            .description()
            .contains("at most 80 KB unless append=true"),
        "{}",
        write_file.description()
    );
    let web_fetch = tools.iter().find(|t| t.name() == "web_fetch").unwrap();
    assert!(
        web_fetch
            .description()
            .contains("Only fetch exact URLs the user gave or that web_search returned")
            && web_fetch.description().contains("scheme"),
        "{}",
        web_fetch.description()
    );
}
