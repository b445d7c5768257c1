//! `antler mcp login` through the real binary, against a fake authorization server in front of
//! the real server-everything: the browser is a `curl` that follows the redirects (as the
//! conformance wrapper's fetch script does), the tokens land in the data dir, and the daemon's
//! side (`McpManager`, never interactive) uses them and refreshes them when they stop working.

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use antler::config::ProcessEnv;
use antler::mcp::{McpManager, ServerStatus};
use antler_test_support::{AuthServerOptions, FakeAuthServer};
use serde_json::{Value, json};

use super::{everything, start_http_server};

/// The browser: fetches the authorization URL and follows its redirect to the loopback.
const BROWSER: &str = "curl -sfL -o /dev/null";

/// `antler ARGS…` with `home` as its data dir (`ANTLER_HOME`), no daemon to find.
async fn antler(home: &Path, args: &[&str], browser: &str) -> Output {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .args(args)
        .current_dir(home)
        .env("ANTLER_HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env_remove("ANTLER_CONFIG")
        .env_remove("ANTLER_EXTENSIONS_CONFIG")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env("BROWSER", browser)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn antler");
    tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("antler mcp login finished in time")
        .expect("antler output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_servers(home: &Path, servers: Value) {
    std::fs::write(
        home.join("extensions_config.json"),
        serde_json::to_vec_pretty(&json!({ "mcpServers": servers })).unwrap(),
    )
    .unwrap();
}

fn stored(home: &Path, server: &str) -> Value {
    let path = home.join("mcp-oauth").join(format!("{server}.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// Connects the servers of `home` as the daemon does and returns the status of `server`.
async fn daemon_status(home: &Path, server: &str) -> (ServerStatus, Vec<String>) {
    let manager = McpManager::new(
        home.join("extensions_config.json"),
        home,
        Arc::new(ProcessEnv),
    );
    manager.tools().await;
    let reports = manager.servers().await.unwrap();
    manager.shutdown().await;
    let report = reports.into_iter().find(|r| r.name == server).unwrap();
    (report.status, report.tools)
}

#[tokio::test]
async fn login_keeps_tokens_the_daemon_uses_and_refreshes() {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, "streamableHttp").await;
    let auth = FakeAuthServer::start(AuthServerOptions {
        scopes_supported: Some(vec!["mcp:tools".into(), "offline_access".into()]),
        resource_scopes: Some(vec!["mcp:tools".into()]),
        upstream: Some(format!("http://127.0.0.1:{port}")),
        ..AuthServerOptions::default()
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    write_servers(
        home.path(),
        json!({"docs": {"type": "http", "url": auth.resource_url()}}),
    );

    let login = antler(home.path(), &["mcp", "login", "docs"], BROWSER).await;
    let (out, err) = (text(&login.stdout), text(&login.stderr));
    assert!(login.status.success(), "stdout: {out}\nstderr: {err}");
    assert!(out.contains("mcp-oauth/docs.json"), "{out}");
    assert!(out.contains("next connection"), "{out}");

    // What the client sent: a public client registered for the loopback redirect, PKCE S256,
    // the resource and the scope (with offline_access, which the server lists).
    let registration = auth.requests_to("as", "/register");
    assert_eq!(registration.len(), 1);
    let body = registration[0].json.clone().unwrap();
    assert_eq!(body["client_name"], "Antler");
    assert_eq!(body["token_endpoint_auth_method"], "none");
    assert_eq!(
        body["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    let redirect = body["redirect_uris"][0].as_str().unwrap().to_string();
    assert!(
        redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"),
        "{redirect}"
    );
    let authorize = auth.requests_to("as", "/authorize");
    assert_eq!(authorize.len(), 1);
    let authorize = &authorize[0];
    assert_eq!(authorize.param("code_challenge_method"), Some("S256"));
    assert_eq!(authorize.param("redirect_uri"), Some(redirect.as_str()));
    assert_eq!(
        authorize.param("resource"),
        Some(auth.resource_url().as_str())
    );
    assert_eq!(authorize.param("scope"), Some("mcp:tools offline_access"));
    assert!(authorize.param("state").is_some_and(|s| s.len() >= 32));
    let token = auth.requests_to("as", "/token");
    assert_eq!(token.len(), 1, "one code exchange");
    assert_eq!(token[0].param("grant_type"), Some("authorization_code"));
    assert!(
        token[0]
            .param("code_verifier")
            .is_some_and(|v| v.len() >= 43)
    );
    assert_eq!(
        token[0].param("resource"),
        Some(auth.resource_url().as_str())
    );

    // The file: this user's only, with the tokens and the client.
    let path = home.path().join("mcp-oauth/docs.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let saved = stored(home.path(), "docs");
    let access = saved["access_token"].as_str().unwrap().to_string();
    assert!(auth.is_valid_access_token(&access), "{saved}");
    assert!(saved["refresh_token"].as_str().is_some(), "{saved}");
    assert_eq!(saved["client_id"], "client-1");
    assert_eq!(saved["token_endpoint"], auth.token_endpoint());

    // The daemon's side uses the saved token as it is.
    let (status, tools) = daemon_status(home.path(), "docs").await;
    assert_eq!(status, ServerStatus::Connected, "{status:?}");
    assert!(tools.iter().any(|t| t == "docs_echo"), "{tools:?}");
    let bearer = format!("Bearer {access}");
    assert!(
        auth.requests_to("resource", "/mcp")
            .iter()
            .any(|r| r.authorization.as_deref() == Some(bearer.as_str())),
        "the saved token was sent"
    );
    assert_eq!(
        auth.requests_to("as", "/token").len(),
        1,
        "no new token yet"
    );

    // The server stops accepting it: the daemon refreshes with the saved refresh token, keeps
    // the rotated one, and never asks for a browser.
    auth.expire_access_tokens();
    let (status, _) = daemon_status(home.path(), "docs").await;
    assert_eq!(status, ServerStatus::Connected, "{status:?}");
    let tokens = auth.requests_to("as", "/token");
    assert_eq!(tokens.len(), 2, "one refresh");
    assert_eq!(tokens[1].param("grant_type"), Some("refresh_token"));
    assert_eq!(
        tokens[1].param("refresh_token"),
        saved["refresh_token"].as_str()
    );
    assert_eq!(tokens[1].param("client_id"), Some("client-1"));
    let refreshed = stored(home.path(), "docs");
    assert_ne!(refreshed["refresh_token"], saved["refresh_token"]);
    assert!(auth.is_valid_access_token(refreshed["access_token"].as_str().unwrap()));
    assert_eq!(
        auth.requests_to("as", "/authorize").len(),
        1,
        "no new login"
    );
}

#[tokio::test]
async fn a_pre_registered_client_authenticates_by_the_servers_method() {
    let auth = FakeAuthServer::start(AuthServerOptions {
        registration: false,
        token_endpoint_auth_methods: vec!["client_secret_basic".into()],
        preregistered: Some((
            "antler-app".into(),
            "app-secret".into(),
            "client_secret_basic".into(),
        )),
        ..AuthServerOptions::default()
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    write_servers(
        home.path(),
        json!({"docs": {"type": "http", "url": auth.resource_url(), "oauth": {
            "grant_type": "authorization_code",
            "client_id": "antler-app",
            "client_secret": "app-secret",
        }}}),
    );
    let login = antler(home.path(), &["mcp", "login", "docs"], BROWSER).await;
    assert!(login.status.success(), "{}", text(&login.stderr));
    assert!(auth.requests_to("as", "/register").is_empty());
    let token = auth.requests_to("as", "/token");
    assert_eq!(token.len(), 1);
    // `antler-app:app-secret` in Basic, nothing in the form.
    assert_eq!(
        token[0].authorization.as_deref(),
        Some("Basic YW50bGVyLWFwcDphcHAtc2VjcmV0")
    );
    assert_eq!(token[0].param("client_secret"), None);
    let saved = stored(home.path(), "docs");
    assert_eq!(saved["client_id"], "antler-app");
    assert_eq!(
        saved["client_secret"],
        Value::Null,
        "a configured secret stays in the config"
    );
}

#[tokio::test]
async fn a_refused_authorization_or_a_wrong_grant_exits_non_zero_saying_what_to_do() {
    let auth = FakeAuthServer::start(AuthServerOptions {
        authorize_error: Some("access_denied".into()),
        ..AuthServerOptions::default()
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    write_servers(
        home.path(),
        json!({
            "docs": {"type": "http", "url": auth.resource_url()},
            "machine": {"type": "http", "url": auth.resource_url(), "oauth": {
                "grant_type": "client_credentials",
                "token_url": auth.token_endpoint(),
                "client_id": "x",
            }},
            "local": {"command": "true"},
        }),
    );
    let denied = antler(home.path(), &["mcp", "login", "docs"], BROWSER).await;
    let err = text(&denied.stderr);
    assert!(!denied.status.success(), "{err}");
    assert!(err.contains("access_denied"), "{err}");
    assert!(err.contains("antler mcp login"), "{err}");
    assert!(!home.path().join("mcp-oauth/docs.json").exists());

    let wrong = antler(home.path(), &["mcp", "login", "machine"], BROWSER).await;
    let err = text(&wrong.stderr);
    assert!(!wrong.status.success(), "{err}");
    assert!(
        err.contains("mcpServers.machine.oauth.grant_type is client_credentials"),
        "{err}"
    );

    let stdio = antler(home.path(), &["mcp", "login", "local"], BROWSER).await;
    let err = text(&stdio.stderr);
    assert!(!stdio.status.success(), "{err}");
    assert!(err.contains("stdio server"), "{err}");

    let unknown = antler(home.path(), &["mcp", "login", "nope"], BROWSER).await;
    let err = text(&unknown.stderr);
    assert!(!unknown.status.success(), "{err}");
    assert!(err.contains("configured: docs, local, machine"), "{err}");
}
