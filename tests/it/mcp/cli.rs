//! `antler mcp call` and `antler mcp probe` as a person runs them: the binary against
//! server-everything (stdio for `call`, streamable HTTP for `probe`), its stdout, stderr and
//! exit codes.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{everything, start_http_server, stdio_server};

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `antler ARGS` in a fresh home whose extensions_config.json holds `servers`.
async fn antler(home: &Path, servers: Value, args: &[&str]) -> Ran {
    let config = home.join("extensions_config.json");
    std::fs::write(&config, json!({ "mcpServers": servers }).to_string()).unwrap();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .args(args)
        .current_dir(home)
        .env("ANTLER_HOME", home)
        .env("ANTLER_EXTENSIONS_CONFIG", &config)
        .env_remove("ANTLER_CONFIG")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("antler ends within 120 s")
        .unwrap();
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test]
async fn call_prints_the_result_as_json_and_refuses_what_it_cannot_call() {
    let Some(index) = everything() else { return };
    let home = tempfile::tempdir().unwrap();
    let servers = json!({ "everything": stdio_server(&index) });
    let ran = antler(
        home.path(),
        servers.clone(),
        &[
            "mcp",
            "call",
            "everything",
            "echo",
            "--args",
            r#"{"message": "hi there"}"#,
        ],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let result: Value = serde_json::from_str(&ran.stdout).expect("stdout is the result's JSON");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("hi there")),
        "{result}"
    );

    let unknown = antler(
        home.path(),
        servers.clone(),
        &["mcp", "call", "nope", "echo"],
    )
    .await;
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("no MCP server named `nope`")
            && unknown
                .stderr
                .contains("the configured ones are: everything"),
        "{}",
        unknown.stderr
    );
    assert!(unknown.stdout.is_empty(), "{}", unknown.stdout);

    let bad = antler(
        home.path(),
        servers,
        &["mcp", "call", "everything", "echo", "--args", "[1]"],
    )
    .await;
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--args must be a JSON object"),
        "{}",
        bad.stderr
    );
}

#[tokio::test]
async fn probe_tells_the_handshake_and_calls_the_tool() {
    let Some(index) = everything() else { return };
    let (_server, port) = start_http_server(&index, "streamableHttp").await;
    let home = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let ran = antler(
        home.path(),
        json!({}),
        &[
            "mcp",
            "probe",
            &url,
            "--tool",
            "get-sum",
            "--args",
            r#"{"a": 2, "b": 40}"#,
        ],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("Handshake done: protocol version ")
            && ran.stderr.contains("capabilities: ")
            && ran.stderr.contains("get-sum")
            && ran.stderr.contains("Calling get-sum"),
        "{}",
        ran.stderr
    );
    let result: Value = serde_json::from_str(&ran.stdout).expect("stdout is the result's JSON");
    assert!(result.to_string().contains("42"), "{result}");

    // A tool the server does not have: server-everything answers with an error result, which
    // is printed and gives exit code 1.
    let missing = antler(
        home.path(),
        json!({}),
        &["mcp", "probe", &url, "--tool", "nope"],
    )
    .await;
    assert_eq!(missing.code, Some(1), "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains("`nope` is not among the tools listed")
            && missing.stderr.contains("the tool reported an error"),
        "{}",
        missing.stderr
    );
    let result: Value = serde_json::from_str(&missing.stdout).expect("stdout is the result's JSON");
    assert_eq!(result["isError"], true, "{result}");

    // Nothing listening: nothing called, exit 2, the reason on stderr.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let gone = format!("http://127.0.0.1:{closed}/mcp");
    let refused = antler(home.path(), json!({}), &["mcp", "probe", &gone]).await;
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("could not open a session with") && refused.stdout.is_empty(),
        "{}",
        refused.stderr
    );
}
