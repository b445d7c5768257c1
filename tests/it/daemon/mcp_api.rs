//! `GET/PUT /api/mcp/config` and `GET /api/mcp/servers` on the real daemon: admins only, a PUT
//! is validated in full before `extensions_config.json` (in the data dir) is rewritten, an older
//! install's file beside config.yaml is read until the first PUT moves it, and a server that
//! cannot start is listed with the reason.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_read_validate_and_replace_the_mcp_config() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "admins:\n  - bob\n");
    // Written in the data dir (the service's writable state), never beside config.yaml.
    let file = setup.data_dir().join("extensions_config.json");
    let daemon = setup.start();

    let refused = daemon.get("/api/mcp/config", TOKEN_A).send().await.unwrap();
    Daemon::expect_error(refused, 403, "forbidden", &["only admins"]).await;

    let empty = daemon.get_json("/api/mcp/config", TOKEN_B).await;
    assert_eq!(empty["mcpServers"], json!({}), "{empty}");
    assert_eq!(empty["path"], file.display().to_string());

    let invalid = daemon
        .http
        .put(daemon.url("/api/mcp/config"))
        .bearer_auth(TOKEN_B)
        .json(&json!({"mcpServers": {"x": {"type": "stdio"}}}))
        .send()
        .await
        .unwrap();
    Daemon::expect_error(invalid, 422, "invalid_config", &["mcpServers.x"]).await;
    assert!(!file.exists(), "an invalid config is never written");

    let no_servers = daemon
        .http
        .put(daemon.url("/api/mcp/config"))
        .bearer_auth(TOKEN_B)
        .json(&json!({"servers": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_servers.status(), 400);

    let servers = json!({"broken": {"command": "/nonexistent/server", "description": "gone"}});
    let put = daemon
        .http
        .put(daemon.url("/api/mcp/config"))
        .bearer_auth(TOKEN_B)
        .json(&json!({"mcpServers": servers}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let written: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["mcpServers"], servers);
    assert_eq!(
        daemon.get_json("/api/mcp/config", TOKEN_B).await["mcpServers"],
        servers
    );

    let listed = daemon.get_json("/api/mcp/servers", TOKEN_B).await;
    let broken = &listed["servers"][0];
    assert_eq!(broken["name"], "broken", "{listed}");
    assert_eq!(broken["status"]["state"], "failed", "{listed}");
    assert!(
        broken["status"]["error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/server"),
        "{listed}"
    );
    let refused = daemon
        .get("/api/mcp/servers", TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
}

/// An install from before the file moved: `extensions_config.json` beside config.yaml (which
/// the service cannot write under systemd) is read until the first PUT, which writes the data
/// dir's copy with the file's other keys and leaves the old one as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_file_beside_config_yaml_is_read_and_the_first_put_moves_it() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "admins:\n  - bob\n");
    let old = setup.dir.path().join("extensions_config.json");
    let old_text =
        r#"{"mcpServers": {"old": {"command": "/nonexistent/old"}}, "skills": {"keep": 1}}"#;
    std::fs::write(&old, old_text).unwrap();
    let daemon = setup.start();

    let read = daemon.get_json("/api/mcp/config", TOKEN_B).await;
    assert_eq!(read["path"], old.display().to_string(), "{read}");
    assert_eq!(read["mcpServers"]["old"]["command"], "/nonexistent/old");

    let servers = json!({"new": {"command": "/nonexistent/new"}});
    let put = daemon
        .http
        .put(daemon.url("/api/mcp/config"))
        .bearer_auth(TOKEN_B)
        .json(&json!({"mcpServers": servers}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let moved = setup.data_dir().join("extensions_config.json");
    let written: Value = serde_json::from_slice(&std::fs::read(&moved).unwrap()).unwrap();
    assert_eq!(written["mcpServers"], servers);
    assert_eq!(
        written["skills"],
        json!({"keep": 1}),
        "other keys are carried over"
    );
    assert_eq!(std::fs::read_to_string(&old).unwrap(), old_text);
    let read = daemon.get_json("/api/mcp/config", TOKEN_B).await;
    assert_eq!(read["path"], moved.display().to_string());
    assert_eq!(read["mcpServers"], servers);
}
