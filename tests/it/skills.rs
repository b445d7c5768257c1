//! Skills end to end through the real daemon: install an archive over HTTP, `/skill task`
//! activation (the body reaches the model for exactly one turn, `allowed-tools` enforced),
//! the reference's messages for disabled and not-allowed skills, per-user visibility, admin-only
//! public toggles, and the `antler skills` CLI through the daemon's socket.

use std::io::{Cursor, Write};

use antler_test_support::{FakeOpenAi, Reply};
use reqwest::StatusCode;
use serde_json::{Value, json};
use zip::write::SimpleFileOptions;

use crate::daemon::cli::antler;
use crate::daemon::{Daemon, Setup, TOKEN_A, TOKEN_B, collect_sse};

const SKILL_BODY: &str = "# Weekly report\nAlways start the report with the word ZEBRA.\n";

fn skill_archive() -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    writer
        .start_file("weekly-report/SKILL.md", options)
        .unwrap();
    write!(
        writer,
        "---\nname: weekly-report\ndescription: Write the weekly status report.\nallowed-tools: read_file, ls\n---\n{SKILL_BODY}"
    )
    .unwrap();
    writer
        .start_file("weekly-report/templates/report.md", options)
        .unwrap();
    writer.write_all(b"# Week N").unwrap();
    writer.finish().unwrap().into_inner()
}

fn setup(fake: &FakeOpenAi) -> Setup {
    let skills = concat!(env!("CARGO_MANIFEST_DIR"), "/skills/public");
    Setup::new(
        &fake.base_url(),
        &format!("admins: [alice]\nsandbox:\n  skills_path: {skills}\n"),
    )
}

async fn install(daemon: &Daemon, token: &str, archive: Vec<u8>) -> reqwest::Response {
    let part = reqwest::multipart::Part::bytes(archive).file_name("weekly.skill");
    daemon
        .post("/api/skills/install", token)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap()
}

async fn put_enabled(daemon: &Daemon, token: &str, name: &str, enabled: bool) -> StatusCode {
    daemon
        .http
        .put(daemon.url(&format!("/api/skills/{name}")))
        .bearer_auth(token)
        .json(&json!({ "enabled": enabled }))
        .send()
        .await
        .unwrap()
        .status()
}

/// The streamed text of one run.
async fn turn(daemon: &Daemon, token: &str, thread: &str, text: &str) -> String {
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), token)
        .json(&json!({"input": {"messages": [{"role": "user", "content": text}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    collect_sse(response)
        .await
        .into_iter()
        .filter(|(event, _)| event == "messages")
        .filter_map(|(_, data)| data[0]["content"].as_str().map(str::to_string))
        .collect()
}

fn user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_skill_is_activated_for_one_turn_with_its_allowed_tools() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "write_file",
        json!({"description": "d", "path": "/mnt/user-data/outputs/x.md", "content": "x"}),
    ))
    .push(Reply::text("ZEBRA report done."))
    .push(Reply::text("You are welcome."));
    let setup = setup(&fake);
    let daemon = setup.start();

    let archive = skill_archive();
    let response = install(&daemon, TOKEN_A, archive.clone()).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let installed: Value = response.json().await.unwrap();
    assert_eq!(installed["name"], "weekly-report");
    assert_eq!(installed["source"], "custom");
    let sha = installed["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);

    // Alice sees it with its hash; Bob does not see it at all.
    let listed: Value = daemon.get_json("/api/skills", TOKEN_A).await;
    let mine = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "weekly-report")
        .cloned()
        .unwrap();
    assert_eq!(mine["enabled"], true);
    assert_eq!(mine["sha256"], sha.as_str());
    assert_eq!(mine["location"], "/mnt/skills/weekly-report/SKILL.md");
    let bobs: Value = daemon.get_json("/api/skills", TOKEN_B).await;
    assert!(!bobs.to_string().contains("weekly-report"), "{bobs}");
    // A second install of the same name is a clash.
    let clash = install(&daemon, TOKEN_A, archive).await;
    assert_eq!(clash.status(), StatusCode::CONFLICT);

    let thread = daemon.create_thread(TOKEN_A).await;
    let answer = turn(&daemon, TOKEN_A, &thread, "/weekly-report for week 12").await;
    assert_eq!(answer, "ZEBRA report done.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "a tool step and the answer");
    for request in &requests {
        let text = user_text(request);
        assert!(
            text.contains("<activated_skill name=\\\"weekly-report\\\""),
            "{text}"
        );
        assert!(text.contains("Always start the report with the word ZEBRA."));
        let mut tools = tool_names(request);
        tools.sort();
        assert_eq!(tools, ["ls", "read_file"]);
    }
    // The model asked for a tool outside allowed-tools: refused, nothing written.
    let refused = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("tool 'write_file' is not allowed while skill 'weekly-report' is active"),
        "{refused}"
    );
    assert!(
        !setup
            .data_dir()
            .join(format!(
                "users/alice/threads/{thread}/user-data/outputs/x.md"
            ))
            .exists()
    );
    // The prompt lists it for progressive disclosure.
    assert!(
        requests[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("<location>/mnt/skills/weekly-report/SKILL.md</location>")
    );

    // The next message runs without the skill and with every tool.
    assert_eq!(
        turn(&daemon, TOKEN_A, &thread, "thanks").await,
        "You are welcome."
    );
    let next = fake.requests().pop().unwrap();
    assert!(!user_text(&next).contains("activated_skill"));
    assert!(tool_names(&next).contains(&"write_file".to_string()));

    // Disabled: the reference's message, and the model is not called.
    assert_eq!(
        put_enabled(&daemon, TOKEN_A, "weekly-report", false).await,
        StatusCode::OK
    );
    let calls = fake.requests().len();
    assert_eq!(
        turn(&daemon, TOKEN_A, &thread, "/weekly-report again").await,
        "Skill `/weekly-report` is installed but disabled. Enable it before using slash activation."
    );
    assert_eq!(fake.requests().len(), calls);

    // Bob may not toggle a public skill; Alice (an admin) may.
    assert_eq!(
        put_enabled(&daemon, TOKEN_B, "research-report", false).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        put_enabled(&daemon, TOKEN_A, "research-report", false).await,
        StatusCode::OK
    );
    let bobs: Value = daemon.get_json("/api/skills", TOKEN_B).await;
    let research = bobs["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "research-report")
        .cloned()
        .unwrap();
    assert_eq!(research["enabled"], false);

    let deleted = daemon
        .delete("/api/skills/weekly-report", TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::OK);
    assert!(
        !setup
            .data_dir()
            .join("users/alice/skills/custom/weekly-report")
            .exists()
    );
    let public = daemon
        .delete("/api/skills/research-report", TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), StatusCode::CONFLICT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_outside_the_agents_list_is_refused_with_the_reference_message() {
    let fake = FakeOpenAi::start().await;
    let setup = setup(&fake);
    let daemon = setup.start();
    let created = daemon
        .post("/api/agents", TOKEN_A)
        .json(&json!({"name": "narrow", "soul": "I am narrow.", "skills": ["data-analysis"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let thread = daemon.create_thread(TOKEN_A).await;
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/stream"), TOKEN_A)
        .json(&json!({
            "input": {"messages": [{"role": "user", "content": "/research-report on otters"}]},
            "context": {"agent_name": "narrow"},
        }))
        .send()
        .await
        .unwrap();
    let text: String = collect_sse(response)
        .await
        .into_iter()
        .filter(|(event, _)| event == "messages")
        .filter_map(|(_, data)| data[0]["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        text,
        "Skill `/research-report` is not available for this agent."
    );
    assert!(fake.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_installs_lists_and_removes_through_the_daemon() {
    let fake = FakeOpenAi::start().await;
    let setup = setup(&fake);
    let daemon = setup.start();
    let archive = setup.dir.path().join("weekly.skill");
    std::fs::write(&archive, skill_archive()).unwrap();
    let config = &setup.config_path;

    let out = antler(
        config,
        &[
            "skills",
            "--user",
            "alice",
            "install",
            archive.to_str().unwrap(),
        ],
        "",
    )
    .await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("Installed weekly-report (sha256 "),
        "{text}"
    );

    let out = antler(
        config,
        &["skills", "--user", "alice", "disable", "weekly-report"],
        "",
    )
    .await;
    assert!(out.status.success());
    let out = antler(config, &["skills", "--user", "alice", "list"], "").await;
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = list
        .lines()
        .find(|l| l.starts_with("weekly-report"))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(line.contains("custom") && line.contains("disabled") && line.contains("sha256:"));
    // What the CLI did is what the API sees.
    let api: Value = daemon.get_json("/api/skills", TOKEN_A).await;
    assert!(api.to_string().contains("\"enabled\":false"), "{api}");

    let out = antler(
        config,
        &["skills", "--user", "alice", "remove", "bootstrap"],
        "",
    )
    .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be removed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = antler(
        config,
        &["skills", "--user", "alice", "remove", "weekly-report"],
        "",
    )
    .await;
    assert!(out.status.success());
    assert!(
        !setup
            .data_dir()
            .join("users/alice/skills/custom/weekly-report")
            .exists()
    );
}
