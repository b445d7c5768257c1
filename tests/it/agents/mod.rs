//! Integration tests: custom-agent storage and versioning, the `setup_agent`/`update_agent` tools
//! (reference §13.1 items 16–17), per-user isolation, the static system prompt and the
//! dynamic-context middleware (item 24, in `agents/dynamic_context.rs`).

mod dynamic_context;

use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use antler::agent_api::RunContext;
use antler::agent_api::{Tool, ToolContext, ToolError, ToolOutput};
use antler::config::{AppConfig, ModelConfig};
use antler::custom_agents::{
    AgentConfig, AgentStore, AgentStoreError, AgentUpdate, PromptOptions, SetupAgentTool,
    UpdateAgentTool, apply_prompt_template,
};
use antler::skills::SkillCatalog;
use antler_store::state::ThreadState;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn config_with_models(names: &[&str]) -> Arc<AppConfig> {
    Arc::new(AppConfig {
        models: names
            .iter()
            .map(|name| ModelConfig {
                name: (*name).into(),
                model: (*name).into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

pub(super) fn run_ctx(user: &str, agent_name: Option<&str>) -> RunContext {
    let mut ctx = RunContext::new("thread-1", user, config_with_models(&["gpt-main", "small"]));
    ctx.agent_name = agent_name.map(str::to_string);
    ctx
}

async fn call(tool: &dyn Tool, ctx: &RunContext, args: Value) -> Result<ToolOutput, ToolError> {
    let state = ThreadState::default();
    let tool_ctx = ToolContext {
        run: ctx,
        state: &state,
        tool_call_id: "call-1",
    };
    tool.call(args, &tool_ctx).await
}

fn failure(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Failed(message)) => message,
        other => panic!("expected a tool failure, got {other:?}"),
    }
}

fn store_in(tmp: &tempfile::TempDir) -> Arc<AgentStore> {
    Arc::new(AgentStore::new(tmp.path()))
}

fn tree(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            out.push(entry.path().display().to_string());
            out.extend(tree(&entry.path()));
        }
    }
    out.sort();
    out
}

fn create_reviewer(store: &AgentStore, user: &str) {
    store
        .create(
            user,
            "Reviewer",
            &AgentConfig::new("reviewer", "Reviews code"),
            "# Reviewer\nBe strict.\n",
        )
        .unwrap();
}

// ---- storage and versioning ----

#[test]
fn three_updates_are_listed_and_revert_restores_exact_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    let dir = store.agent_dir("alice", "reviewer").unwrap();
    let read = |file: &str| std::fs::read(dir.join(file)).unwrap();
    let original = (read("SOUL.md"), read("config.yaml"));

    let mut seen = vec![original.clone()];
    for (i, soul) in ["v1 soul\n", "v2 soul  \n\n", "v3 — ünïcode <soul>\n"]
        .iter()
        .enumerate()
    {
        let changed = store
            .update(
                "alice",
                "reviewer",
                AgentUpdate {
                    soul: Some((*soul).into()),
                    description: Some(format!("description {i}")),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(changed.fields, ["soul", "description"]);
        seen.push((read("SOUL.md"), read("config.yaml")));
    }

    let history = store.history("alice", "reviewer").unwrap();
    assert_eq!(history.len(), 3);
    for (version, (soul, config)) in history.iter().zip(&seen) {
        assert_eq!(version.soul_sha256.as_deref(), Some(sha(soul).as_str()));
        assert_eq!(version.config_sha256.as_deref(), Some(sha(config).as_str()));
    }
    let first = store
        .read_version("alice", "reviewer", &history[0].id)
        .unwrap();
    assert_eq!(first.soul.unwrap().as_bytes(), original.0.as_slice());

    let archived = store.revert("alice", "reviewer", &history[0].id).unwrap();
    assert_eq!((read("SOUL.md"), read("config.yaml")), original);
    let after = store.history("alice", "reviewer").unwrap();
    assert_eq!(after.len(), 4, "revert archives the version it replaces");
    assert_eq!(after.last().map(|v| v.id.clone()), archived);
    assert_eq!(
        after[3].soul_sha256.as_deref(),
        Some(sha(&seen[3].0).as_str())
    );
    let agent = store.get("alice", "reviewer").unwrap().unwrap();
    assert_eq!(agent.config.description, "Reviews code");
}

#[test]
fn history_is_bounded_and_no_op_updates_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path()).with_history_limit(20);
    create_reviewer(&store, "alice");
    let same = store
        .update(
            "alice",
            "reviewer",
            AgentUpdate {
                description: Some("Reviews code".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(same.is_empty());
    assert!(store.history("alice", "reviewer").unwrap().is_empty());
    for i in 0..25 {
        store
            .update(
                "alice",
                "reviewer",
                AgentUpdate {
                    soul: Some(format!("soul {i}")),
                    ..Default::default()
                },
            )
            .unwrap();
    }
    let history = store.history("alice", "reviewer").unwrap();
    assert_eq!(history.len(), 20);
    assert_eq!(history[0].id, "000006");
    assert!(matches!(
        store.revert("alice", "reviewer", "000001"),
        Err(AgentStoreError::VersionNotFound { .. })
    ));
    assert!(matches!(
        store.read_version("alice", "reviewer", "../../x"),
        Err(AgentStoreError::VersionNotFound { .. })
    ));
}

#[test]
fn create_refuses_existing_and_delete_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    let again = store.create("alice", "REVIEWER", &AgentConfig::new("x", ""), "soul");
    assert!(matches!(again, Err(AgentStoreError::Exists { name }) if name == "reviewer"));
    assert_eq!(store.list("alice").unwrap().len(), 1);
    store.delete("alice", "reviewer").unwrap();
    assert!(store.get("alice", "reviewer").unwrap().is_none());
    assert!(matches!(
        store.delete("alice", "reviewer"),
        Err(AgentStoreError::NotFound { .. })
    ));
}

#[test]
fn default_soul_is_versioned_at_the_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    assert_eq!(store.default_soul().unwrap(), None);
    store.set_default_soul("first").unwrap();
    store.set_default_soul("second").unwrap();
    assert_eq!(store.default_soul().unwrap().as_deref(), Some("second"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("soul-history/000001/SOUL.md")).unwrap(),
        "first"
    );
    assert!(matches!(
        store.set_default_soul(" \n"),
        Err(AgentStoreError::EmptySoul)
    ));
}

// ---- setup_agent (§13.1 item 16) ----

#[tokio::test]
async fn setup_agent_with_empty_soul_errors_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let tool = SetupAgentTool::new(store_in(&tmp), None, Some("helper"));
    let ctx = run_ctx("alice", Some("helper"));
    let message = failure(call(&tool, &ctx, json!({"soul": "  \n\t", "description": "d"})).await);
    assert_eq!(
        message,
        "soul content is empty; refusing to create agent with an empty SOUL.md"
    );
    assert!(tree(tmp.path()).is_empty(), "{:?}", tree(tmp.path()));
}

#[tokio::test]
async fn setup_agent_rejects_invalid_name_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["../evil", "bad_name", "a.b", "with space"] {
        let tool = SetupAgentTool::new(store_in(&tmp), None, Some(bad));
        let ctx = run_ctx("alice", Some(bad));
        let message = failure(call(&tool, &ctx, json!({"soul": "s", "description": "d"})).await);
        assert!(message.contains("invalid agent name"), "{message}");
        // Named in the conversation: the same rules, before anything is written.
        let unnamed = SetupAgentTool::new(store_in(&tmp), None, None);
        let ctx = run_ctx("alice", None);
        let args = json!({"name": bad, "soul": "s", "description": "d"});
        let message = failure(call(&unnamed, &ctx, args).await);
        assert!(message.contains("invalid agent name"), "{message}");
    }
    let unnamed = SetupAgentTool::new(store_in(&tmp), None, None);
    let args = json!({"name": "Default", "soul": "s", "description": "d"});
    let message = failure(call(&unnamed, &run_ctx("alice", None), args).await);
    assert!(
        message.contains("'default' names the default agent"),
        "{message}"
    );
    let tool = SetupAgentTool::new(store_in(&tmp), None, Some("ok"));
    let ctx = run_ctx("../alice", Some("ok"));
    let message = failure(call(&tool, &ctx, json!({"soul": "s", "description": "d"})).await);
    assert!(message.contains("invalid user id"), "{message}");
    assert!(tree(tmp.path()).is_empty(), "{:?}", tree(tmp.path()));
}

#[tokio::test]
async fn setup_agent_creates_the_run_agent_for_the_run_user() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    let tool = SetupAgentTool::new(store.clone(), None, Some("Helper"));
    let mut ctx = run_ctx("alice", None);
    ctx.options.agent_name = Some("Helper".into());
    let output = call(
        &tool,
        &ctx,
        json!({"soul": "# Helper\n", "description": " Helps ", "skills": ["bootstrap"]}),
    )
    .await
    .unwrap();
    assert_eq!(output.content, "Agent 'helper' created successfully!");
    assert_eq!(output.update.extra["created_agent_name"], "helper");
    let agent = store.get("alice", "helper").unwrap().unwrap();
    assert_eq!(agent.soul, "# Helper\n");
    assert_eq!(agent.config.description, "Helps");
    assert_eq!(agent.config.skills, Some(vec!["bootstrap".to_string()]));
    let again = failure(call(&tool, &ctx, json!({"soul": "x", "description": "d"})).await);
    assert!(again.contains("already exists"), "{again}");
}

#[tokio::test]
async fn setup_agent_without_a_name_creates_the_agent_the_person_named() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    let tool = SetupAgentTool::new(store.clone(), None, None);
    let ctx = run_ctx("alice", None);
    let args = json!({"name": " Chef ", "soul": "# Chef\n", "description": "Cooks"});
    let output = call(&tool, &ctx, args).await.unwrap();
    assert_eq!(output.content, "Agent 'chef' created successfully!");
    assert_eq!(output.update.extra["created_agent_name"], "chef");
    assert_eq!(
        store.get("alice", "chef").unwrap().unwrap().soul,
        "# Chef\n"
    );
    let missing = call(&tool, &ctx, json!({"soul": "s", "description": "d"})).await;
    assert!(
        matches!(&missing, Err(ToolError::InvalidArguments(m)) if m.contains("missing field `name`")),
        "the name is required: {missing:?}"
    );
}

#[tokio::test]
async fn setup_agent_for_default_writes_the_default_soul() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    let tool = SetupAgentTool::new(store.clone(), None, Some("default"));
    call(
        &tool,
        &run_ctx("alice", None),
        json!({"soul": "I am Antler.", "description": "d"}),
    )
    .await
    .unwrap();
    assert_eq!(
        store.default_soul().unwrap().as_deref(),
        Some("I am Antler.")
    );
}

/// A catalog on a skills directory holding `names`, with the config it belongs to.
fn catalog_with(tmp: &tempfile::TempDir, names: &[&str]) -> (Arc<AppConfig>, SkillCatalog) {
    let dir = tmp.path().join("skills");
    for name in names {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(
            dir.join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\nSteps.\n"),
        )
        .unwrap();
    }
    let mut config = (*config_with_models(&["gpt-main"])).clone();
    config.sandbox.skills_path = Some(dir);
    config.data_dir = Some(tmp.path().join("data"));
    let catalog = SkillCatalog::from_config(
        &config,
        Arc::new(antler_store::MemoryStore::new()),
        Default::default(),
    );
    (Arc::new(config), catalog)
}

/// The model's mistyped skill or tool group is a tool error listing what exists (so it can
/// call again), and nothing is saved.
#[tokio::test]
async fn agent_tools_refuse_skills_and_tool_groups_that_do_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    let (config, catalog) = catalog_with(&tmp, &["pdf", "web-research"]);
    let mut ctx = RunContext::new("thread-1", "alice", config);
    ctx.agent_name = Some("helper".into());
    let setup = SetupAgentTool::new(store.clone(), Some(catalog.clone()), Some("helper"));
    let message = failure(
        call(
            &setup,
            &ctx,
            json!({"soul": "# Helper", "description": "d", "skills": ["pdf", "nosuch"]}),
        )
        .await,
    );
    assert!(message.contains("unknown skill 'nosuch'"), "{message}");
    assert!(message.contains("pdf, web-research"), "{message}");
    assert!(store.get("alice", "helper").unwrap().is_none());
    call(
        &setup,
        &ctx,
        json!({"soul": "# Helper", "description": "d", "skills": ["pdf"]}),
    )
    .await
    .unwrap();

    let update = UpdateAgentTool::new(store.clone(), Some(catalog));
    let message = failure(call(&update, &ctx, json!({"tool_groups": ["shell"]})).await);
    assert!(message.contains("unknown tool group 'shell'"), "{message}");
    assert!(
        message.contains("web, file:read, file:write, bash"),
        "{message}"
    );
    let agent = store.get("alice", "helper").unwrap().unwrap();
    assert_eq!(agent.config.tool_groups, None);
}

// ---- update_agent (§13.1 item 17) ----

async fn update(store: &Arc<AgentStore>, user: &str, args: Value) -> Result<ToolOutput, ToolError> {
    let tool = UpdateAgentTool::new(store.clone(), None);
    call(&tool, &run_ctx(user, Some("reviewer")), args).await
}

#[tokio::test]
async fn update_agent_skills_empty_list_disables_all_and_omitted_keeps() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    let out = update(&store, "alice", json!({"skills": ["web-research", "pdf"]}))
        .await
        .unwrap();
    assert_eq!(
        out.content,
        "Agent 'reviewer' updated successfully. Changed: skills. The new configuration takes effect on the next user turn."
    );
    update(&store, "alice", json!({"description": "New"}))
        .await
        .unwrap();
    let agent = store.get("alice", "reviewer").unwrap().unwrap();
    assert_eq!(
        agent.config.skills,
        Some(vec!["web-research".into(), "pdf".into()])
    );
    update(&store, "alice", json!({"skills": []}))
        .await
        .unwrap();
    let agent = store.get("alice", "reviewer").unwrap().unwrap();
    assert_eq!(agent.config.skills, Some(vec![]));
    assert_eq!(agent.config.description, "New");
}

#[tokio::test]
async fn update_agent_treats_nullish_text_as_omitted() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    let out = update(
        &store,
        "alice",
        json!({"soul": "null", "description": "None", "model": "undefined", "skills": "null",
               "tool_groups": ["web"]}),
    )
    .await
    .unwrap();
    assert!(
        out.content.contains("Changed: tool_groups."),
        "{}",
        out.content
    );
    let agent = store.get("alice", "reviewer").unwrap().unwrap();
    assert_eq!(agent.soul, "# Reviewer\nBe strict.\n");
    assert_eq!(agent.config.description, "Reviews code");
    assert_eq!(agent.config.model, None);
    let nothing = failure(update(&store, "alice", json!({"soul": "NULL", "model": null})).await);
    assert!(nothing.starts_with("no fields to update"), "{nothing}");
}

#[tokio::test]
async fn update_agent_refuses_unknown_model_and_accepts_a_configured_one() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    let before = std::fs::read(
        store
            .agent_dir("alice", "reviewer")
            .unwrap()
            .join("config.yaml"),
    );
    let message = failure(
        update(
            &store,
            "alice",
            json!({"model": "gpt-9", "description": "x"}),
        )
        .await,
    );
    assert_eq!(
        message,
        "unknown model 'gpt-9'; use one of: gpt-main, small"
    );
    let after = std::fs::read(
        store
            .agent_dir("alice", "reviewer")
            .unwrap()
            .join("config.yaml"),
    );
    assert_eq!(
        before.unwrap(),
        after.unwrap(),
        "a refused update writes nothing"
    );
    update(&store, "alice", json!({"model": "small"}))
        .await
        .unwrap();
    let agent = store.get("alice", "reviewer").unwrap().unwrap();
    assert_eq!(agent.config.model.as_deref(), Some("small"));
}

#[tokio::test]
async fn update_agent_edge_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    let empty = failure(update(&store, "alice", json!({"soul": "   "})).await);
    assert!(empty.starts_with("soul content is empty"), "{empty}");
    let same = update(&store, "alice", json!({"description": "Reviews code"}))
        .await
        .unwrap();
    assert_eq!(
        same.content,
        "No changes: agent 'reviewer' already has this configuration."
    );
    let tool = UpdateAgentTool::new(store.clone(), None);
    let not_custom =
        failure(call(&tool, &run_ctx("alice", None), json!({"description": "x"})).await);
    assert!(
        not_custom.contains("use setup_agent instead"),
        "{not_custom}"
    );
    let mut webhook = run_ctx("alice", Some("reviewer"));
    webhook.options.channel_name = Some("webhook".into());
    let refused = failure(call(&tool, &webhook, json!({"description": "x"})).await);
    assert!(refused.contains("webhook"), "{refused}");
    assert!(store.history("alice", "reviewer").unwrap().is_empty());
}

#[tokio::test]
async fn update_agent_preserves_unmanaged_config_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    let mut config = AgentConfig::new("reviewer", "Reviews code");
    config
        .extra
        .insert("github".into(), json!({"repo": "acme/app"}));
    config.model_settings.temperature = Some(0.3);
    store.create("alice", "reviewer", &config, "soul").unwrap();
    update(&store, "alice", json!({"description": "Reviews PRs"}))
        .await
        .unwrap();
    let agent = store.get("alice", "reviewer").unwrap().unwrap();
    assert_eq!(agent.config.extra["github"]["repo"], "acme/app");
    assert_eq!(agent.config.model_settings.temperature, Some(0.3));
    assert_eq!(agent.config.description, "Reviews PRs");
}

// ---- per-user isolation ----

#[tokio::test]
async fn another_user_cannot_see_or_update_an_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    create_reviewer(&store, "alice");
    assert!(store.get("bob", "reviewer").unwrap().is_none());
    assert!(store.list("bob").unwrap().is_empty());
    assert!(matches!(
        store.history("bob", "reviewer"),
        Err(AgentStoreError::NotFound { .. })
    ));
    let message = failure(update(&store, "bob", json!({"soul": "hijacked"})).await);
    assert!(message.contains("does not exist"), "{message}");
    assert_eq!(
        store.get("alice", "reviewer").unwrap().unwrap().soul,
        "# Reviewer\nBe strict.\n"
    );
    assert!(!tmp.path().join("users/bob/agents/reviewer").exists());
}

// ---- static system prompt ----

#[test]
fn system_prompt_is_byte_identical_for_two_users_and_escapes_the_soul() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store_in(&tmp);
    let soul = "# Reviewer\nFlag <script> tags & unsafe `eval`.\n";
    for user in ["alice", "bob"] {
        store
            .create(user, "reviewer", &AgentConfig::new("reviewer", "d"), soul)
            .unwrap();
    }
    let prompt_for = |user: &str| {
        let agent = store.get(user, "reviewer").unwrap().unwrap();
        apply_prompt_template(&PromptOptions {
            agent_name: Some(&agent.config.name),
            soul: Some(&agent.soul),
            is_custom_agent: true,
            ..Default::default()
        })
    };
    let alice = prompt_for("alice");
    assert_eq!(alice, prompt_for("bob"));
    assert_eq!(alice, prompt_for("alice"), "stable across turns");
    assert!(
        alice
            .contains("<soul>\n# Reviewer\nFlag &lt;script&gt; tags &amp; unsafe `eval`.\n</soul>")
    );
    assert!(alice.contains("<self_update>"));
    assert!(!alice.contains("alice") && !alice.contains("bob"));
    let year = chrono::Local::now().format("%Y-%m-%d").to_string();
    assert!(!alice.contains(&year), "no dates in the static prompt");
}
