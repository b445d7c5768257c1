//! Tests of `antler agents` on the data dir (the daemon path is tested in tests/it).

use clap::Parser;

use super::*;
use crate::config::{ApiToken, ModelConfig, Secret};
use crate::custom_agents::{AgentStore, AgentUpdate};

async fn run_ok(config: &AppConfig, user: &str, command: AgentsCommand) -> String {
    let mut out = Vec::new();
    run(config, None, user, command, &mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

async fn run_err(config: &AppConfig, user: &str, command: AgentsCommand) -> AgentsCliError {
    let mut out = Vec::new();
    run(config, None, user, command, &mut out)
        .await
        .unwrap_err()
}

fn setup() -> (tempfile::TempDir, AppConfig, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let skills = tmp.path().join("skills");
    for name in ["search", "summarize"] {
        std::fs::create_dir_all(skills.join(name)).unwrap();
        std::fs::write(
            skills.join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\nSteps.\n"),
        )
        .unwrap();
    }
    let mut config = AppConfig {
        data_dir: Some(tmp.path().join("data")),
        models: vec![
            ModelConfig {
                name: "main".into(),
                ..Default::default()
            },
            ModelConfig {
                name: "small".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    config.sandbox.skills_path = Some(skills);
    let soul_file = tmp.path().join("soul.md");
    std::fs::write(&soul_file, "First soul.").unwrap();
    (tmp, config, soul_file)
}

/// The command line as a person types it after `antler agents`.
#[derive(Parser)]
struct Line {
    #[command(subcommand)]
    command: AgentsCommand,
}

fn parse(args: &[&str]) -> Result<AgentsCommand, clap::Error> {
    Line::try_parse_from(std::iter::once("agents").chain(args.iter().copied())).map(|l| l.command)
}

#[tokio::test]
async fn create_show_history_revert_delete() {
    let (_tmp, config, soul_file) = setup();
    let created = run_ok(
        &config,
        "alice",
        parse(&[
            "create",
            "Helper",
            "--description",
            "Helps",
            "--soul-file",
            soul_file.to_str().unwrap(),
            "--model",
            "main",
        ])
        .unwrap(),
    )
    .await;
    assert!(
        created.starts_with("created agent 'helper' for user 'alice'"),
        "{created}"
    );
    let list = run_ok(&config, "alice", AgentsCommand::List).await;
    assert!(list.contains("helper") && list.contains("main") && list.contains("Helps"));
    assert_eq!(
        run_ok(&config, "bob", AgentsCommand::List).await,
        "no agents for user 'bob'\n"
    );

    let store = AgentStore::new(config.data_dir());
    store
        .update(
            "alice",
            "helper",
            AgentUpdate {
                soul: Some("Second soul.".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let history = run_ok(&config, "alice", parse(&["history", "helper"]).unwrap()).await;
    assert!(history.starts_with("000001  "), "{history}");
    // The CLI wrote the first version; the store's plain update has no known author.
    assert!(
        history.contains("by the CLI (as alice): created: SOUL.md 1 line\n"),
        "{history}"
    );
    assert!(
        history.ends_with("by unknown: SOUL.md +1/−1 lines  (current)\n"),
        "{history}"
    );
    let reverted = run_ok(
        &config,
        "alice",
        parse(&["revert", "helper", "000001"]).unwrap(),
    )
    .await;
    assert!(
        reverted.contains("reverted to version 000001"),
        "{reverted}"
    );
    let shown = run_ok(&config, "alice", parse(&["show", "helper"]).unwrap()).await;
    assert!(shown.contains("# SOUL.md\nFirst soul.") && shown.contains("model: main"));

    let err = run_err(&config, "bob", parse(&["show", "helper"]).unwrap()).await;
    assert!(
        err.to_string()
            .contains("no agent named 'helper' for user 'bob'")
    );
    let err = run_err(
        &config,
        "alice",
        parse(&[
            "create",
            "other",
            "--soul-file",
            soul_file.to_str().unwrap(),
            "--model",
            "gpt-nope",
        ])
        .unwrap(),
    )
    .await;
    assert!(matches!(err, AgentsCliError::UnknownModel { .. }), "{err}");

    run_ok(&config, "alice", parse(&["delete", "helper"]).unwrap()).await;
    assert!(store.get("alice", "helper").unwrap().is_none());
}

#[tokio::test]
async fn create_takes_tool_groups_and_skills() {
    let (_tmp, config, soul_file) = setup();
    let soul = soul_file.to_str().unwrap();
    run_ok(
        &config,
        "alice",
        parse(&[
            "create",
            "coder",
            "--soul-file",
            soul,
            "--tool-groups",
            "file:read, bash",
            "--skills",
            "",
        ])
        .unwrap(),
    )
    .await;
    let agent = AgentStore::new(config.data_dir())
        .get("alice", "coder")
        .unwrap()
        .unwrap();
    assert_eq!(
        agent.config.tool_groups,
        Some(vec!["file:read".to_string(), "bash".to_string()])
    );
    // '' means none, which differs from leaving the flag out (all skills).
    assert_eq!(agent.config.skills, Some(Vec::new()));
}

/// A tool group or skill that does not exist is refused with the names that do, and nothing
/// is saved (an agent with a mistyped group would have run without its tools).
#[tokio::test]
async fn unknown_tool_groups_and_skills_are_refused_with_the_valid_names() {
    let (_tmp, config, soul_file) = setup();
    let soul = soul_file.to_str().unwrap();
    let create = |groups: &str, skills: &str| {
        parse(&[
            "create",
            "coder",
            "--soul-file",
            soul,
            "--tool-groups",
            groups,
            "--skills",
            skills,
        ])
        .unwrap()
    };
    let error = run_err(&config, "alice", create("foo", "nosuch")).await;
    assert!(error.is_usage(), "{error}");
    let message = error.to_string();
    assert!(message.contains("unknown tool group 'foo'"), "{message}");
    assert!(
        message.contains("web, file:read, file:write, bash"),
        "{message}"
    );
    assert!(message.contains("unknown skill 'nosuch'"), "{message}");
    assert!(message.contains("search, summarize"), "{message}");
    let store = AgentStore::new(config.data_dir());
    assert!(store.get("alice", "coder").unwrap().is_none());

    run_ok(&config, "alice", create("bash", "search")).await;
    let update = parse(&["update", "coder", "--skills", "search,nosuch"]).unwrap();
    let message = run_err(&config, "alice", update).await.to_string();
    assert!(message.contains("unknown skill 'nosuch'"), "{message}");
    let agent = store.get("alice", "coder").unwrap().unwrap();
    assert_eq!(agent.config.skills, Some(vec!["search".to_string()]));
}

#[tokio::test]
async fn update_changes_only_the_given_fields_and_keeps_history() {
    let (tmp, config, soul_file) = setup();
    let soul = soul_file.to_str().unwrap();
    run_ok(
        &config,
        "alice",
        parse(&[
            "create",
            "helper",
            "--description",
            "Helps",
            "--soul-file",
            soul,
        ])
        .unwrap(),
    )
    .await;
    let new_soul = tmp.path().join("soul2.md");
    std::fs::write(&new_soul, "Second soul.").unwrap();
    let out = run_ok(
        &config,
        "alice",
        parse(&[
            "update",
            "Helper",
            "--soul-file",
            new_soul.to_str().unwrap(),
            "--model",
            "small",
            "--skills",
            "search,summarize",
        ])
        .unwrap(),
    )
    .await;
    assert_eq!(
        out,
        "updated agent 'helper' of user 'alice': soul, skills, model; the replaced files are kept as version 000001\n"
    );
    let agent = AgentStore::new(config.data_dir())
        .get("alice", "helper")
        .unwrap()
        .unwrap();
    assert_eq!(agent.soul, "Second soul.");
    assert_eq!(agent.config.description, "Helps");
    assert_eq!(agent.config.model.as_deref(), Some("small"));
    assert_eq!(
        agent.config.skills,
        Some(vec!["search".to_string(), "summarize".to_string()])
    );

    let same = run_ok(
        &config,
        "alice",
        parse(&["update", "helper", "--model", "small"]).unwrap(),
    )
    .await;
    assert!(same.contains("nothing changed"), "{same}");

    let err = run_err(
        &config,
        "alice",
        parse(&["update", "helper", "--model", "gpt-nope"]).unwrap(),
    )
    .await;
    assert!(matches!(err, AgentsCliError::UnknownModel { .. }), "{err}");
    let err = run_err(
        &config,
        "bob",
        parse(&["update", "helper", "--description", "x"]).unwrap(),
    )
    .await;
    assert!(
        err.to_string()
            .contains("no agent named 'helper' for user 'bob'"),
        "{err}"
    );
}

#[test]
fn update_needs_at_least_one_change() {
    let Err(err) = parse(&["update", "helper"]) else {
        panic!("an update without changes must be refused");
    };
    assert_eq!(
        err.kind(),
        clap::error::ErrorKind::MissingRequiredArgument,
        "{err}"
    );
    assert!(err.to_string().contains("--soul-file"), "{err}");
}

#[test]
fn the_user_must_be_named_once_tokens_name_users() {
    let mut config = AppConfig::default();
    assert_eq!(resolve_user(&config, None).unwrap(), "local");
    assert_eq!(resolve_user(&config, Some("bob")).unwrap(), "bob");
    for user in ["bob", "alice", "bob"] {
        config.gateway.api_tokens.push(ApiToken {
            token: Secret::new(format!("token-{user}")),
            user: user.into(),
        });
    }
    let err = resolve_user(&config, None).unwrap_err();
    assert!(err.is_usage());
    let text = err.to_string();
    assert!(text.contains("--user is required"), "{text}");
    assert!(text.contains("alice, bob)"), "{text}");
    assert_eq!(resolve_user(&config, Some("alice")).unwrap(), "alice");
    let err = resolve_user(&config, Some("../etc")).unwrap_err();
    assert!(
        matches!(err, AgentsCliError::Store(AgentStoreError::InvalidUser(_))),
        "{err}"
    );
}
