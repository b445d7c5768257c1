//! `GET/PUT /api/mcp/config` and `GET /api/mcp/servers` on the real daemon: admins only, a PUT
//! is validated in full before `extensions_config.json` (beside config.yaml) is rewritten, and a
//! server that cannot start is listed with the reason.

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_read_validate_and_replace_the_mcp_config() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "admins:\n  - bob\n");
    let file = setup.dir.path().join("extensions_config.json");
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
