//! Chat commands on a running daemon: `POST /api/commands` (what the web chat and `antler
//! chat` through the socket call), and `antler chat` itself talking to the daemon, with a
//! presented file's address.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::cli::antler;
use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

async fn command(daemon: &Daemon, token: &str, body: Value) -> reqwest::Response {
    daemon
        .post("/api/commands", token)
        .json(&body)
        .send()
        .await
        .expect("command request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_route_runs_commands_on_the_callers_conversation() {
    let fake = FakeOpenAi::start().await;
    // Setting up agents (`/bootstrap`) is for admins unless agents.self_service is on.
    let setup = Setup::new(&fake.base_url(), "admins: [alice]\n");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let conversation =
        json!({"thread_id": thread, "model": null, "agent": null, "plan_mode": false});

    let answer: Value = command(
        &daemon,
        TOKEN_A,
        json!({"command": "/plan on", "conversation": conversation}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(answer["reply"], "Plan mode on.");
    assert_eq!(answer["conversation"]["plan_mode"], true);
    assert_eq!(answer["conversation"]["thread_id"], thread.as_str());

    let answer: Value = command(
        &daemon,
        TOKEN_A,
        json!({"command": "/new", "conversation": answer["conversation"]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(answer["reply"], "New conversation started.");
    let new_thread = answer["conversation"]["thread_id"].as_str().unwrap();
    assert_ne!(new_thread, thread);
    assert_eq!(
        answer["conversation"]["plan_mode"], true,
        "settings are kept"
    );
    let owned = daemon
        .get(&format!("/api/threads/{new_thread}"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(owned.status(), 200, "the new thread is the caller's");

    // `/bootstrap NAME what it is for`: a setup conversation of its own, for that agent.
    let answer: Value = command(
        &daemon,
        TOKEN_A,
        json!({"command": "/bootstrap Chef plans our meals", "conversation": {"thread_id": new_thread}}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        answer["turn"],
        json!({"text": "Set up a new agent named chef. What it is for: plans our meals", "bootstrap": true})
    );
    assert_eq!(
        answer["conversation"]["bootstrap"],
        json!({"agent": "chef"})
    );
    assert_ne!(answer["conversation"]["thread_id"], new_thread);
    // Without a name the conversation asks for one; a name that cannot be one is refused.
    let answer: Value = command(&daemon, TOKEN_A, json!({"command": "/bootstrap"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["turn"]["text"], "Set up a new agent.");
    assert_eq!(answer["conversation"]["bootstrap"], json!({"agent": null}));
    let answer: Value = command(&daemon, TOKEN_A, json!({"command": "/bootstrap chef_2"}))
        .await
        .json()
        .await
        .unwrap();
    assert!(answer["turn"].is_null(), "{answer}");
    assert!(
        answer["reply"]
            .as_str()
            .unwrap()
            .starts_with("\"chef_2\" cannot be an agent's name: use 1 to 64 letters"),
        "{answer}"
    );
    let denied: Value = command(&daemon, TOKEN_B, json!({"command": "/bootstrap"}))
        .await
        .json()
        .await
        .unwrap();
    assert!(denied["turn"].is_null(), "{denied}");
    assert!(
        denied["reply"].as_str().unwrap().starts_with("Sorry, "),
        "{denied}"
    );

    // Not a command (a skill's activation, or plain text): the client sends it as a message.
    let refused = command(&daemon, TOKEN_A, json!({"command": "/weather paris"})).await;
    Daemon::expect_error(refused, 400, "not_a_command", &["send it as a message"]).await;
    // Another user's thread is as absent as a missing one.
    let foreign = command(
        &daemon,
        TOKEN_B,
        json!({"command": "/status", "conversation": {"thread_id": thread}}),
    )
    .await;
    Daemon::expect_error(foreign, 404, "thread_not_found", &[]).await;
    assert!(fake.requests().is_empty(), "no command reached the model");
}

/// `antler chat` through the daemon: commands run there, and a presented file is shown with
/// its address on the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn antler_chat_through_the_daemon_runs_commands_and_links_presented_files() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "write_file",
        json!({"path": "/mnt/user-data/outputs/report.md", "content": "# Report\n"}),
    ))
    .push(Reply::tool_call(
        "present_files",
        json!({"filepaths": ["/mnt/user-data/outputs/report.md"]}),
    ))
    .push(Reply::text("Here it is."));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "config_version: 1\ndata_dir: {data}\n\
             models:\n  - name: fake\n    provider: openai\n    model: fake-model\n    base_url: {url}\n    timeout: 30\n\
             llm_call:\n  retry_max_attempts: 1\n\
             gateway:\n  listen: 127.0.0.1:{port}\n  shutdown_grace_seconds: 2\n",
            data = dir.path().join("data").display(),
            url = fake.base_url(),
        ),
    )
    .unwrap();
    let daemon = Daemon::spawn(&config, &[], None);
    let output = antler(&config, &["chat"], "/plan on\n/status\nwrite a report\n").await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("Talking to the running daemon"), "{stdout}");
    assert!(
        stdout.contains("Plan mode on.") && stdout.contains("Plan mode: on"),
        "{stdout}"
    );
    assert!(stdout.contains("Here it is."), "{stdout}");
    let url = stdout
        .lines()
        .find_map(|line| line.strip_prefix("[file] /mnt/user-data/outputs/report.md: "))
        .unwrap_or_else(|| panic!("no file line in:\n{stdout}"));
    assert!(
        url.starts_with(&format!("{}/api/threads/", daemon.base)),
        "{url}"
    );
    let file = daemon.http.get(url).send().await.unwrap();
    assert_eq!(file.status(), 200, "{url}");
    assert_eq!(file.text().await.unwrap(), "# Report\n");
    let first = &fake.requests()[0];
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"write_todos"),
        "plan mode reached the run: {tools:?}"
    );
}
