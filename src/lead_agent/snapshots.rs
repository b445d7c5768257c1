//! Snapshots of what a model reads from the lead agent and its sub-agents (`tests/prompts/`):
//! the whole first request of the default agent (system prompt, the user's message, every tool
//! schema, as the OpenAI provider would send them), and the system prompts of plan mode with
//! sub-agents, a bootstrap run, a custom agent with a SOUL.md and a general-purpose
//! sub-agent. Built with the shipped skills and default tools, a fixed date and fixed paths, so
//! any change to what a model reads shows in the diff. `UPDATE_EXPECT=1 cargo test --lib
//! snapshots` rewrites them after a deliberate change.

use std::sync::Arc;

use chrono::NaiveDate;
use expect_test::{ExpectFile, expect_file};
use serde_json::{Value, json};

use crate::agent::Agent;
use crate::agent_api::{RunContext, RunOptions, RunUsers};
use crate::config::{AppConfig, ModelConfig};
use crate::custom_agents::{AgentConfig, AgentStore};
use crate::lead_agent::{LeadAgent, LeadAgentCache, LeadAgentDeps, make_lead_agent};
use crate::middleware::DynamicContextMiddleware;
use crate::middleware::dynamic_context::Clock;
use crate::model::openai_request::request_body;
use crate::model::{ModelRegistry, ModelRequest, ScriptedModel, ScriptedTurn};
use crate::sandbox::{ExecMode, HostSandboxProvider, ProviderSettings, SandboxProvider};
use crate::tools::registry::ToolRegistry;
use antler_store::messages::Message;
use antler_store::state::ThreadState;

const USER: &str = "alice";

struct FixedDate;

impl Clock for FixedDate {
    fn today(&self) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 5, 8).expect("a valid date")
    }
}

/// The shipped skills and default tools, a bubblewrap sandbox without network (what `auto`
/// picks on a host with bubblewrap), and the README's default model.
struct Fixture {
    _dir: tempfile::TempDir,
    config: Arc<AppConfig>,
    model: Arc<ScriptedModel>,
    models: ModelRegistry,
    tools: ToolRegistry,
    sandbox: Arc<dyn SandboxProvider>,
    store: Arc<AgentStore>,
    cache: LeadAgentCache,
}

fn model_config() -> ModelConfig {
    ModelConfig {
        name: "default".into(),
        model: "qwen2.5:7b".into(),
        ..ModelConfig::default()
    }
}

fn fixture(turns: Vec<ScriptedTurn>) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = AppConfig {
        data_dir: Some(dir.path().join("data")),
        admins: vec![USER.into()],
        ..Default::default()
    };
    config.sandbox.skills_path =
        Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/public"));
    let config = Arc::new(config);
    let model = Arc::new(ScriptedModel::new("default", turns));
    let models = ModelRegistry::new().with_model("default", model.clone(), model_config());
    let sandbox: Arc<dyn SandboxProvider> = Arc::new(HostSandboxProvider::new(
        ProviderSettings::from_config(&config, None),
        ExecMode::Bwrap {
            network: false,
            drop_to_uid: false,
        },
    ));
    let tools = ToolRegistry::from_config(&config, sandbox.clone()).expect("default tools");
    let store = Arc::new(AgentStore::new(config.data_dir()));
    Fixture {
        _dir: dir,
        config,
        model,
        models,
        tools,
        sandbox,
        store,
        cache: LeadAgentCache::new(),
    }
}

impl Fixture {
    fn build(&self, options: RunOptions) -> LeadAgent {
        let mut lead = make_lead_agent(
            &options,
            &self.config,
            LeadAgentDeps {
                models: &self.models,
                tools: Some(&self.tools),
                sandbox: Some(self.sandbox.clone()),
                checkpointer: None,
                users: RunUsers::alone(USER),
                agents: Some(self.store.clone()),
                cache: Some(&self.cache),
                memory: None,
                skills: None,
                approvals: None,
                // The daemon's agents have `schedule_task` (`scheduler.enabled` by default).
                scheduler: Some(crate::scheduler::Scheduler::new(
                    Arc::new(antler_store::MemoryStore::new()),
                    Arc::new(crate::cluster::SystemWallClock),
                )),
            },
        )
        .expect("lead agent");
        fix_the_date(&mut lead.agent);
        lead
    }

    /// Runs `lead` on one message and returns every request its model received.
    async fn run(&self, lead: LeadAgent, text: &str) -> Vec<ModelRequest> {
        let mut ctx = RunContext::new("thread-1", USER, self.config.clone());
        ctx.options = lead.options;
        lead.agent
            .run(ThreadState::default(), vec![Message::human(text)], &ctx)
            .await;
        if let Some(tasks) = lead.subagent_tasks {
            tasks.wait().await;
        }
        self.model.requests()
    }
}

fn fix_the_date(agent: &mut Agent) {
    for middleware in agent.middleware.iter_mut() {
        if middleware.name() == "DynamicContextMiddleware" {
            *middleware = Arc::new(DynamicContextMiddleware::new().with_clock(Arc::new(FixedDate)));
        }
    }
}

/// A request as the provider sends it, readable: each message's role and text, then each tool
/// with its description and its parameters' JSON schema (pretty-printed).
fn render(request: &ModelRequest, with_schemas: bool) -> String {
    let body: Value =
        serde_json::from_slice(&request_body(&model_config(), request)).expect("a JSON body");
    let mut out = String::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "===== {} =====\n",
            message["role"].as_str().unwrap_or("?")
        ));
        out.push_str(message["content"].as_str().unwrap_or_default());
        out.push('\n');
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            out.push_str(&format!("[tool call] {}\n", call["function"]));
        }
    }
    let tools: Vec<&Value> = body["tools"].as_array().into_iter().flatten().collect();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    out.push_str(&format!("===== tools =====\n{}\n", names.join(", ")));
    if with_schemas {
        for tool in tools {
            let function = &tool["function"];
            out.push_str(&format!(
                "\n----- {} -----\n{}\n{}\n",
                function["name"].as_str().unwrap_or("?"),
                function["description"].as_str().unwrap_or_default(),
                serde_json::to_string_pretty(&function["parameters"]).unwrap_or_default()
            ));
        }
    }
    out
}

/// A schema as indented JSON, however it is held.
fn pretty(schema: &impl serde::Serialize) -> String {
    let value = serde_json::to_value(schema).unwrap_or_default();
    let value = match value {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other => other,
    };
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![text.into()])
}

fn check(snapshot: ExpectFile, actual: &str) {
    snapshot.assert_eq(actual);
}

#[tokio::test]
async fn the_default_agent_s_first_request() {
    let fixture = fixture(vec![answer("Hello! How can I help?")]);
    let lead = fixture.build(RunOptions::default());
    let requests = fixture.run(lead, "hi").await;
    check(
        expect_file!["../../tests/prompts/default_agent.txt"],
        &render(&requests[0], true),
    );
}

#[tokio::test]
async fn plan_mode_with_sub_agents() {
    let fixture = fixture(vec![answer("Done.")]);
    let lead = fixture.build(RunOptions {
        is_plan_mode: true,
        subagent_enabled: true,
        ..Default::default()
    });
    let requests = fixture
        .run(lead, "Compare three databases for our logs")
        .await;
    // The tools only plan mode and sub-agents add, in full; the rest by name.
    let mut text = render(&requests[0], false);
    for tool in requests[0].tools.iter() {
        if tool.name == "write_todos" || tool.name == "task" {
            text.push_str(&format!(
                "\n----- {} -----\n{}\n{}\n",
                tool.name,
                tool.description,
                pretty(&tool.parameters)
            ));
        }
    }
    check(
        expect_file!["../../tests/prompts/plan_mode_subagents.txt"],
        &text,
    );
}

#[tokio::test]
async fn a_bootstrap_run() {
    let fixture = fixture(vec![answer("What should your agent be called?")]);
    let lead = fixture.build(RunOptions {
        is_bootstrap: true,
        agent_name: Some("helper".into()),
        ..Default::default()
    });
    let requests = fixture.run(lead, "Initialize workspace").await;
    check(
        expect_file!["../../tests/prompts/bootstrap.txt"],
        &render(&requests[0], false),
    );
}

#[tokio::test]
async fn a_custom_agent_with_its_soul() {
    let fixture = fixture(vec![answer("Here is the plan.")]);
    let config = AgentConfig::new("reviewer", "Reviews pull requests");
    fixture
        .store
        .create(
            USER,
            "reviewer",
            &config,
            "**Identity**\nReviewer — Alice's code review partner.\n\n**Core Traits**\n- Points at the line, then explains\n- Never approves what it has not run\n\n**Communication**\n- English, short and direct\n",
        )
        .expect("agent created");
    let lead = fixture.build(RunOptions {
        agent_name: Some("reviewer".into()),
        ..Default::default()
    });
    let requests = fixture.run(lead, "Review the patch in uploads").await;
    check(
        expect_file!["../../tests/prompts/custom_agent.txt"],
        &render(&requests[0], false),
    );
}

#[tokio::test]
async fn a_general_purpose_sub_agent() {
    let fixture = fixture(vec![
        ScriptedTurn::ToolCalls {
            text: String::new(),
            calls: vec![(
                "task".into(),
                json!({"description": "Survey log databases", "prompt": "List three databases suited to storing application logs, with one strength and one weakness each.", "subagent_type": "general-purpose"}),
            )],
        },
        answer("Loki, ClickHouse, Elasticsearch."),
        answer("Here are three."),
    ]);
    let lead = fixture.build(RunOptions {
        subagent_enabled: true,
        ..Default::default()
    });
    let requests = fixture
        .run(lead, "Which databases could hold our logs?")
        .await;
    check(
        expect_file!["../../tests/prompts/general_purpose_subagent.txt"],
        &render(&requests[1], false),
    );
}
