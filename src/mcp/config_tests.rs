use super::*;
use crate::config::MapEnv;
use serde_json::json;

fn parse(value: Value, env: &MapEnv) -> Result<ExtensionsConfig, McpConfigError> {
    ExtensionsConfig::parse(value.to_string().as_bytes(), "test.json", env)
}

fn problems(value: Value) -> Vec<String> {
    match parse(value, &MapEnv::new()) {
        Err(McpConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn claude_desktop_shape_parses_with_defaults() {
    let config = parse(
        json!({"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server"], "env": {"K": "v"}}},
               "skills": {"x": {"enabled": false}}}),
        &MapEnv::new(),
    )
    .unwrap();
    let server = &config.servers[0];
    assert_eq!(server.name, "fs");
    assert!(server.enabled && server.tool_name_prefix);
    assert_eq!(server.tool_call_timeout, DEFAULT_TOOL_CALL_TIMEOUT);
    match &server.transport {
        Transport::Stdio { command, args, env } => {
            assert_eq!(command, "npx");
            assert_eq!(args, &["-y", "server"]);
            assert_eq!(env["K"].expose(), "v");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn dollar_values_resolve_from_the_environment_and_missing_ones_are_empty() {
    let env = MapEnv::new()
        .with("TOKEN", "s3cret")
        .with("HOST", "http://127.0.0.1:9");
    let config = parse(
        json!({"mcpServers": {"remote": {"type": "http", "url": "${HOST}",
            "headers": {"X-Key": "$TOKEN", "X-Missing": "$NOPE", "X-Plain": "a$b"}}}}),
        &env,
    )
    .unwrap();
    let Transport::Remote { url, headers, .. } = &config.servers[0].transport else {
        panic!("remote expected");
    };
    assert_eq!(url, "http://127.0.0.1:9");
    assert_eq!(headers["X-Key"].expose(), "s3cret");
    assert_eq!(headers["X-Missing"].expose(), "");
    assert_eq!(headers["X-Plain"].expose(), "a$b");
    // Secrets never reach logs through Debug.
    assert!(!format!("{config:?}").contains("s3cret"));
}

#[test]
fn each_invalid_entry_is_named_by_its_key() {
    let cases = [
        (json!({"a": {"command": ""}}), "mcpServers.a.command"),
        (
            json!({"a": {"type": "ws", "url": "x"}}),
            "mcpServers.a.type: unknown transport `ws`",
        ),
        (json!({"a": {"type": "sse"}}), "mcpServers.a.url"),
        (
            json!({"a": {"type": "http", "url": "ftp://x"}}),
            "mcpServers.a.url",
        ),
        (
            json!({"a": {"command": "x", "bogus": 1}}),
            "mcpServers.a.bogus: unknown field `bogus`",
        ),
        (
            json!({"a": {"command": "x", "tool_call_timeout": 0}}),
            "mcpServers.a.tool_call_timeout",
        ),
        (
            json!({"a b": {"command": "x"}}),
            "mcpServers.a b: a server name",
        ),
        (
            json!({"a": {"command": "x", "oauth": {"token_url": "http://t", "grant_type": "client_credentials", "client_id": "c"}}}),
            "mcpServers.a.oauth: only sse and http",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"token_url": "http://t", "grant_type": "client_credentials"}}}),
            "mcpServers.a.oauth.client_id",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"token_url": "http://t", "grant_type": "refresh_token"}}}),
            "mcpServers.a.oauth.refresh_token",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"token_url": "http://t", "grant_type": "password"}}}),
            "mcpServers.a.oauth.grant_type",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "client_credentials", "client_id": "c", "token_endpoint_auth_method": "private_key_jwt"}}}),
            "mcpServers.a.oauth.private_key: private_key_jwt needs a private_key",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "authorization_code", "private_key": "k", "token_endpoint_auth_method": "private_key_jwt"}}}),
            "mcpServers.a.oauth.client_id: private_key_jwt needs the client_id",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "client_credentials", "client_id": "c", "token_endpoint_auth_method": "client_secret_basic"}}}),
            "mcpServers.a.oauth.client_secret: client_secret_basic needs a client_secret",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "client_credentials", "client_id": "c", "client_secret": "$UNSET", "token_endpoint_auth_method": "client_secret_post"}}}),
            "mcpServers.a.oauth.client_secret: client_secret_post needs a client_secret",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "client_credentials", "client_id": "c", "private_key": "MIIE..."}}}),
            "mcpServers.a.oauth.private_key: must be a PEM key",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "client_credentials", "client_id": "c", "private_key": "-----BEGIN PRIVATE KEY-----", "signing_algorithm": "HS256"}}}),
            "mcpServers.a.oauth.signing_algorithm: \"HS256\" is not one of",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "authorization_code", "client_metadata_url": "file:///x"}}}),
            "mcpServers.a.oauth.client_metadata_url",
        ),
        (
            json!({"a": {"url": "http://x", "oauth": {"grant_type": "client_credentials", "client_id": "c", "token_endpoint_auth_method": "mtls"}}}),
            "mcpServers.a.oauth.token_endpoint_auth_method",
        ),
        (
            json!({"A": {"command": "x"}, "a": {"command": "y"}}),
            "differ only in case",
        ),
    ];
    for (servers, expected) in cases {
        let found = problems(json!({ "mcpServers": servers }));
        assert!(
            found.iter().any(|p| p.contains(expected)),
            "{expected:?} not in {found:?}"
        );
    }
}

#[test]
fn type_is_inferred_and_transport_is_an_alias() {
    let config = parse(
        json!({"mcpServers": {
            "a": {"url": "http://127.0.0.1:1/mcp"},
            "b": {"transport": "sse", "url": "http://127.0.0.1:1/sse"},
            "c": {"type": "streamable_http", "url": "http://127.0.0.1:1/mcp"}}}),
        &MapEnv::new(),
    )
    .unwrap();
    let kinds: Vec<_> = config.servers.iter().map(|s| s.transport.kind()).collect();
    assert_eq!(
        kinds,
        [TransportKind::Http, TransportKind::Sse, TransportKind::Http]
    );
}

#[test]
fn exposed_names_are_prefixed_sanitised_and_capped() {
    let config = parse(
        json!({"mcpServers": {"srv": {"command": "x"}, "raw": {"command": "x", "tool_name_prefix": false}}}),
        &MapEnv::new(),
    )
    .unwrap();
    let raw = &config.servers[0];
    let srv = &config.servers[1];
    assert_eq!(exposed_tool_name(srv, "get-sum"), "srv_get-sum");
    assert_eq!(exposed_tool_name(raw, "get.sum"), "get_sum");
    assert_eq!(exposed_tool_name(srv, &"x".repeat(100)).len(), 64);
}

#[test]
fn merging_keeps_other_keys() {
    let merged = merge_servers(
        br#"{"skills": {"a": 1}, "mcpServers": {"old": {}}}"#,
        json!({"new": {"command": "x"}}),
    )
    .unwrap();
    let value: Value = serde_json::from_slice(&merged).unwrap();
    assert_eq!(value["skills"]["a"], 1);
    assert_eq!(value["mcpServers"], json!({"new": {"command": "x"}}));
}

#[test]
fn the_path_follows_the_env_then_the_data_dir_then_an_older_file_beside_config_yaml() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let etc = tmp.path().join("etc");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&etc).unwrap();
    let config_yaml = etc.join("config.yaml");
    let env = MapEnv::new().with(EXTENSIONS_ENV, "/etc/ext.json");
    assert_eq!(
        extensions_path(&env, Some(&config_yaml), &data),
        PathBuf::from("/etc/ext.json")
    );
    assert_eq!(
        extensions_write_path(&env, &data),
        PathBuf::from("/etc/ext.json")
    );
    let none = MapEnv::new();
    let in_data = data.join(EXTENSIONS_FILE_NAME);
    assert_eq!(extensions_path(&none, Some(&config_yaml), &data), in_data);
    assert_eq!(extensions_path(&none, None, &data), in_data);
    assert_eq!(extensions_write_path(&none, &data), in_data);
    // An install from before: the file beside config.yaml is read until the data dir has one.
    let beside = etc.join(EXTENSIONS_FILE_NAME);
    std::fs::write(&beside, "{}").unwrap();
    assert_eq!(extensions_path(&none, Some(&config_yaml), &data), beside);
    assert_eq!(extensions_write_path(&none, &data), in_data);
    std::fs::write(&in_data, "{}").unwrap();
    assert_eq!(extensions_path(&none, Some(&config_yaml), &data), in_data);
}

#[test]
fn oauth_endpoints_are_optional_and_every_key_is_resolved() {
    let env = MapEnv::new()
        .with(
            "KEY",
            "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----",
        )
        .with("SECRET", "s3cret");
    let config = parse(
        json!({"mcpServers": {
            "code": {"url": "http://127.0.0.1:1/mcp", "oauth": {"grant_type": "authorization_code"}},
            "pre": {"url": "http://127.0.0.1:1/mcp", "oauth": {
                "grant_type": "authorization_code", "client_id": "pre", "client_secret": "$SECRET",
                "client_metadata_url": "https://antler.example/client.json", "redirect_port": 8765}},
            "jwt": {"url": "http://127.0.0.1:1/mcp", "oauth": {
                "grant_type": "client_credentials", "client_id": "svc", "private_key": "$KEY",
                "signing_algorithm": "ES256", "token_endpoint_auth_method": "private_key_jwt"}}}}),
        &env,
    )
    .unwrap();
    let oauth = |name: &str| match &config
        .servers
        .iter()
        .find(|s| s.name == name)
        .unwrap()
        .transport
    {
        Transport::Remote {
            oauth: Some(oauth), ..
        } => oauth.as_ref().clone(),
        other => panic!("{other:?}"),
    };
    let code = oauth("code");
    assert_eq!(code.grant_type, GrantType::AuthorizationCode);
    assert_eq!(code.token_url, None);
    assert_eq!(code.client_id, None);
    let pre = oauth("pre");
    assert_eq!(pre.client_id.as_deref(), Some("pre"));
    assert_eq!(
        pre.client_secret.as_ref().map(|s| s.expose()),
        Some("s3cret")
    );
    assert_eq!(
        pre.client_metadata_url.as_deref(),
        Some("https://antler.example/client.json")
    );
    assert_eq!(pre.redirect_port, Some(8765));
    let jwt = oauth("jwt");
    assert_eq!(
        jwt.token_endpoint_auth_method,
        Some(TokenAuthMethod::PrivateKeyJwt)
    );
    assert!(
        jwt.private_key
            .as_ref()
            .unwrap()
            .expose()
            .contains("BEGIN PRIVATE KEY")
    );
    assert_eq!(jwt.signing_algorithm.as_deref(), Some("ES256"));
}
