//! One person across apps through the daemon: `GET /api/me` and `POST /api/me/link` with two
//! API tokens and an `identities:` section, then `antler users list|show|link|unlink` over the
//! daemon's socket and, after it stopped, on the data dir.

use std::path::Path;
use std::time::Duration;

use antler_test_support::FakeOpenAi;
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

const IDENTITIES: &str =
    "identities:\n  - user: alice\n    slack: [U0ALICE]\n    telegram: [123]\n";

async fn link(daemon: &Daemon, token: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = daemon.post("/api/me/link", token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("POST /api/me/link");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json"))
}

fn accounts(me: &Value) -> Vec<String> {
    me["accounts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            format!(
                "{}:{} {}",
                a["channel"].as_str().unwrap(),
                a["id"].as_str().unwrap(),
                a["source"].as_str().unwrap()
            )
        })
        .collect()
}

/// Runs `antler users ARGS` against `config`; (success, stdout, stderr).
async fn users(config: &Path, args: &[&str]) -> (bool, String, String) {
    let cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .arg("--config")
        .arg(config)
        .arg("users")
        .args(args)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("RUST_LOG", "warn")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), cli)
        .await
        .expect("antler users finished in time")
        .expect("antler users");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_accounts_link_with_a_code_and_the_operator_manages_links() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), IDENTITIES);
    let mut daemon = setup.start();

    let me = daemon.get_json("/api/me", TOKEN_A).await;
    assert_eq!(me["user_id"], "alice", "{me}");
    assert_eq!(
        accounts(&me),
        [
            "api:alice own",
            "telegram:123 config",
            "slack:U0ALICE config"
        ]
    );

    // Alice asks for a code; her own account cannot use it, a made-up one is refused.
    let (status, issued) = link(&daemon, TOKEN_A, None).await;
    assert_eq!(status, 200, "{issued}");
    let code = issued["code"].as_str().expect("code").to_string();
    assert_eq!(issued["user_id"], "alice");
    let expires = chrono::DateTime::parse_from_rfc3339(issued["expires_at"].as_str().unwrap())
        .expect("expires_at is RFC 3339");
    let ahead = expires
        .signed_duration_since(chrono::Utc::now())
        .num_seconds();
    assert!((590..=600).contains(&ahead), "valid 10 minutes: {ahead}");
    let (status, own) = link(&daemon, TOKEN_A, Some(json!({"code": code}))).await;
    assert_eq!(status, 400, "{own}");
    assert!(
        own["error"]["message"]
            .as_str()
            .unwrap()
            .contains("your own user"),
        "{own}"
    );
    let (status, wrong) = link(&daemon, TOKEN_B, Some(json!({"code": "ZZZZ-ZZZZ"}))).await;
    assert_eq!(
        (status, wrong["error"]["code"].as_str()),
        (400, Some("link_refused")),
        "{wrong}"
    );
    let (status, bad) = link(&daemon, TOKEN_B, Some(json!({"cod": code}))).await;
    assert_eq!(status, 400, "{bad}");

    // Bob's token uses it: from now on it acts as alice.
    let (status, joined) = link(&daemon, TOKEN_B, Some(json!({"code": code}))).await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["user_id"], "alice");
    assert_eq!(joined["previous_user_id"], "bob");
    let me = daemon.get_json("/api/me", TOKEN_B).await;
    assert_eq!(me["user_id"], "alice", "{me}");
    assert!(
        accounts(&me).contains(&"api:bob linked".to_string()),
        "{me}"
    );
    let (status, again) = link(&daemon, TOKEN_B, Some(json!({"code": code}))).await;
    assert_eq!(status, 400, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{again}"
    );

    // Other users' accounts are the operator's (and admins') business.
    let forbidden = daemon
        .get("/api/users", TOKEN_A)
        .send()
        .await
        .expect("users");
    assert_eq!(forbidden.status().as_u16(), 403);

    // The operator, over the socket.
    let config = &setup.config_path;
    let (ok, out, err) = users(config, &["list"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("alice\tapi:alice (own), telegram:123 (config), slack:U0ALICE (config), api:bob (linked "), "{out}");
    assert!(out.contains(" by code)"), "{out}");
    let (ok, out, err) = users(config, &["show", "alice"]).await;
    assert!(ok, "{err}");
    assert!(
        out.starts_with("User alice\nAccounts:\n  api:alice (own)\n"),
        "{out}"
    );
    assert!(out.contains("Holds: nothing"), "{out}");
    let (ok, out, err) = users(config, &["unlink", "api:bob"]).await;
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "api:bob is its own user again (bob); what it did while linked stays with alice.\n"
    );
    assert_eq!(daemon.get_json("/api/me", TOKEN_B).await["user_id"], "bob");
    let (ok, out, err) = users(config, &["link", "slack:U9", "bob"]).await;
    assert!(ok, "{err}");
    assert_eq!(out, "slack:U9 is now bob (it was slack-U9).\n");
    let (ok, _, err) = users(config, &["link", "slack:U0ALICE", "bob"]).await;
    assert!(
        !ok && err.contains("set up as alice by the administrator"),
        "{err}"
    );
    let (ok, _, err) = users(config, &["link", "mail:bob", "bob"]).await;
    assert!(!ok && err.contains("is not an account"), "{err}");

    // With the daemon stopped, on the data dir.
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(30)), Some(0));
    let (ok, out, err) = users(config, &["show", "bob"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("  slack:U9 (linked "), "{out}");
    let (ok, out, err) = users(config, &["unlink", "slack:U9"]).await;
    assert!(ok, "{err}");
    assert!(
        out.starts_with("slack:U9 is its own user again (slack-U9)"),
        "{out}"
    );
}
