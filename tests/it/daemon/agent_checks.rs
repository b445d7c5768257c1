//! Agents are checked against what exists: `antler agents create --tool-groups foo --skills
//! nosuch` through the running daemon, and the HTTP API it calls, refuse the names with the
//! valid ones listed and save nothing.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use super::cli::antler;
use super::{Daemon, Setup, TOKEN_A};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tool_groups_and_skills_are_refused_through_the_daemon_and_its_api() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "admins: [alice]\n");
    let daemon = setup.start();
    let soul = setup.dir.path().join("soul.md");
    std::fs::write(&soul, "You write code.").unwrap();
    let created = antler(
        &setup.config_path,
        &[
            "agents",
            "create",
            "coder",
            "--user",
            "alice",
            "--soul-file",
            soul.to_str().unwrap(),
            "--tool-groups",
            "foo",
            "--skills",
            "nosuch",
        ],
        "",
    )
    .await;
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(!created.status.success(), "{stderr}");
    for needle in [
        "unknown tool group 'foo'",
        "web, file:read, file:write, bash",
        "unknown skill 'nosuch'",
        "bootstrap",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing from {stderr}");
    }
    let agents: Value = daemon.get_json("/api/agents", TOKEN_A).await;
    assert_eq!(agents["agents"], json!([]), "nothing was saved");

    let refused = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({"name": "coder", "soul": "s", "tool_groups": ["bash", "shell"]}))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(
        refused,
        400,
        "unknown_tool_group_or_skill",
        &["unknown tool group 'shell'", "file:read"],
    )
    .await;
    let created = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({"name": "coder", "soul": "s", "tool_groups": ["bash"], "skills": ["bootstrap"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let changed = daemon
        .http
        .put(daemon.url("/api/agents/coder"))
        .bearer_auth(TOKEN_A)
        .json(&json!({"skills": ["nosuch"]}))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(
        changed,
        400,
        "unknown_tool_group_or_skill",
        &["unknown skill 'nosuch'"],
    )
    .await;
}
