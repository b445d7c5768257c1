//! What a new user reads, through the real binary: a port in use names `ANTLER_LISTEN`, a
//! missing archive is reported once, a missing secret gets no default suggested, one problem is
//! "it", numbers are "whole numbers", `localhost:PORT` is a listen address, and an MCP server
//! that cannot be reached is a sentence without Rust type names.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::daemon::Daemon;

/// `antler ARGS…` in `home` (also its `ANTLER_HOME` and runtime dir), without a config file.
fn antler(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_antler"))
        .args(args)
        .current_dir(home)
        .env("ANTLER_HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env_remove("ANTLER_CONFIG")
        .env_remove("ANTLER_LISTEN")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run antler")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_port_in_use_names_antler_listen() {
    let home = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let run = antler(home.path(), &["run"], &[("ANTLER_LISTEN", addr.as_str())]);
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("Address already in use"), "{err}");
    assert!(err.contains("ANTLER_LISTEN=127.0.0.1:8788"), "{err}");
}

#[test]
fn a_missing_archive_is_reported_once() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("nowhere.skill");
    let install = antler(
        home.path(),
        &["skills", "install", missing.to_str().unwrap()],
        &[],
    );
    let err = text(&install.stderr);
    assert_eq!(install.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("check the path"), "{err}");
}

#[test]
fn config_problems_read_plainly() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    std::fs::write(
        &config,
        "gateway:\n  api_tokens: [{token: $ANTLER_TEST_UNSET_TOKEN, user: a}]\n  backlog: lots\n",
    )
    .unwrap();
    let check = antler(home.path(), &["config", "check"], &[]);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(64), "{out}");
    let secret = out
        .lines()
        .find(|l| l.starts_with("gateway.api_tokens[0].token:"))
        .unwrap_or_else(|| panic!("{out}"));
    // A secret's reference is not repeated (a literal secret may read as one); where to set
    // the variable is said.
    assert!(!secret.contains("ANTLER_TEST_UNSET_TOKEN"), "{secret}");
    assert!(secret.contains("is not set"), "{secret}");
    assert!(secret.contains("where antler starts"), "{secret}");
    assert!(!secret.contains(":-"), "no default for a secret: {secret}");
    let backlog = out
        .lines()
        .find(|l| l.starts_with("gateway.backlog:"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        backlog.ends_with("expected a whole number (0 or more)"),
        "{backlog}"
    );

    std::fs::write(
        &config,
        "models: [{name: m, model: x, base_url: 'http://127.0.0.1:9/v1'}]\n\
         gateway:\n  backlog: lots\n",
    )
    .unwrap();
    let run = antler(home.path(), &["run"], &[]);
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(64), "{err}");
    assert!(err.contains("has 1 problem; fix it and retry"), "{err}");
}

#[test]
fn localhost_is_a_listen_address() {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_antler"));
    command
        .arg("run")
        .current_dir(home.path())
        .env("ANTLER_HOME", home.path())
        .env_remove("ANTLER_CONFIG");
    let daemon = Daemon::spawn_command(
        command,
        &[
            ("ANTLER_LISTEN", "localhost:0"),
            ("ANTLER_MODEL_URL", "http://127.0.0.1:9/v1"),
        ],
        None,
    );
    assert!(
        daemon.base.starts_with("http://127.0.0.1:"),
        "{}",
        daemon.base
    );
}

/// Answers every connection with `response`, until the test ends.
fn serve_forever(response: &'static str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(response.as_bytes());
        }
    });
    addr
}

#[test]
fn an_mcp_server_that_cannot_be_reached_is_a_sentence() {
    let home = tempfile::tempdir().unwrap();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let page = serve_forever(
        "HTTP/1.1 501 Not Implemented\r\ncontent-type: text/html\r\ncontent-length: 46\r\n\
         connection: close\r\n\r\n<!DOCTYPE HTML>\n<html><body>nope</body></html>",
    );
    let extensions = home.path().join("extensions_config.json");
    std::fs::write(
        &extensions,
        serde_json::json!({"mcpServers": {
            "closed": {"type": "http", "url": format!("http://{closed}/mcp")},
            "page": {"type": "http", "url": format!("http://{page}/mcp")},
        }})
        .to_string(),
    )
    .unwrap();
    let list = antler(
        home.path(),
        &["mcp", "list"],
        &[("ANTLER_EXTENSIONS_CONFIG", extensions.to_str().unwrap())],
    );
    let (out, err) = (text(&list.stdout), text(&list.stderr));
    assert!(list.status.success(), "{out}{err}");
    let closed_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("closed"))
        .unwrap();
    assert!(
        closed_line.contains("failed: could not connect: "),
        "{closed_line}"
    );
    assert!(closed_line.contains("Connection refused"), "{closed_line}");
    let page_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("page"))
        .unwrap();
    assert!(
        page_line.contains("HTTP 501 Not Implemented with a web page"),
        "{page_line}"
    );
    for internal in ["::", "rmcp", "<html"] {
        assert!(!out.contains(internal), "{internal:?} shown:\n{out}");
    }
    // The log (stderr) names its own targets (`antler::mcp::manager`), but no Rust types.
    for internal in ["rmcp::", "WorkerTransport", "reqwest::Error", "<html"] {
        assert!(!err.contains(internal), "{internal:?} logged:\n{err}");
    }
}
