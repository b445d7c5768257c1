//! MCP against real servers: `@modelcontextprotocol/server-everything` (npm) over stdio,
//! streamable HTTP and legacy SSE, driven by scripted-model runs of the real harness.
//!
//! The package is installed by `.ci/run` (or here, on first use) into
//! `$ANTLER_MCP_SERVERS_DIR` (default `~/.cache/antler/mcp-servers`). Without node the tests
//! skip loudly; `.ci/run` sets `ANTLER_REQUIRE_MCP=1`, which makes that a failure instead.

mod cli;
mod conformance;
mod deferred;
mod elicitation;
mod legacy_sse_auth;
mod login;
mod oauth;
mod oauth_discovery;
mod remote;
mod sse_retry;
mod stdio;
mod taint;
mod versions;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler::agent::RunOutcome;
use antler::agent_api::RunOptions;
use antler::config::{AppConfig, ConfigHandle, ModelConfig};
use antler::harness::{Harness, RunRequest, Speaker};
use antler::model::{ModelRegistry, ScriptedModel, ScriptedTurn};
use antler_store::MemoryStore;
use antler_store::messages::{Message, ToolMessage};
use serde_json::Value;

/// The version `.ci/run` installs; keep the two in step.
pub(crate) const EVERYTHING_VERSION: &str = "2026.8.31";

/// `dist/index.js` of server-everything, installing it when missing; `None` (after a loud
/// message) when node is not installed and `ANTLER_REQUIRE_MCP` is not set.
pub(crate) fn everything() -> Option<PathBuf> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let required = std::env::var("ANTLER_REQUIRE_MCP").is_ok_and(|v| v == "1");
    let node = std::process::Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        assert!(
            !required,
            "ANTLER_REQUIRE_MCP=1 but node is not installed; install Node.js 18+"
        );
        eprintln!(
            "\n!!! SKIPPED: node is not installed, so the MCP tests against server-everything \
             did not run. Install Node.js 18+ (or run .ci/run) to run them. !!!\n"
        );
        return None;
    }
    let dir = std::env::var_os("ANTLER_MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/antler/mcp-servers")
        });
    let index = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if !index.is_file() {
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(format!(
                "@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"
            ))
            .status()
            .expect("npm runs");
        assert!(status.success(), "npm install of server-everything failed");
    }
    assert!(
        index.is_file(),
        "{} is missing after npm install",
        index.display()
    );
    Some(index)
}

/// A harness with a scripted model whose MCP servers come from `servers` (the `mcpServers`
/// object), written to a temporary `extensions_config.json`.
pub(crate) struct Fixture {
    pub(crate) harness: Harness,
    pub(crate) model: Arc<ScriptedModel>,
    pub(crate) dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new(servers: Value, tool_search: bool, turns: Vec<ScriptedTurn>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = AppConfig {
            data_dir: Some(dir.path().join("data")),
            ..AppConfig::default()
        };
        config.tool_search.enabled = tool_search;
        // No model call for titles: the script holds only what the tests assert on.
        config.title.enabled = false;
        let model = Arc::new(ScriptedModel::new("scripted", turns));
        let models =
            ModelRegistry::new().with_model("scripted", model.clone(), ModelConfig::default());
        let harness = Harness::with_parts(
            ConfigHandle::fixed(config),
            Arc::new(MemoryStore::new()),
            Some(models),
        )
        .unwrap();
        let path = dir.path().join("extensions_config.json");
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&serde_json::json!({ "mcpServers": servers })).unwrap(),
        )
        .unwrap();
        harness.mcp().set_path(path);
        Self {
            harness,
            model,
            dir,
        }
    }

    /// Runs one turn on `thread` and waits for its end.
    pub(crate) async fn run(&self, thread: &str, text: &str) -> RunOutcome {
        let handle = self
            .harness
            .start_run(RunRequest {
                user_id: "alice".into(),
                speaker: Speaker::Owner,
                thread_id: thread.into(),
                input: vec![Message::human(text)],
                options: RunOptions::default(),
                want_values: false,
            })
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(120), handle.outcome)
            .await
            .expect("the run ends")
            .unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Stdio servers die with their sessions; close them before the runtime goes.
        let mcp = self.harness.mcp().clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { mcp.shutdown().await });
        }
    }
}

/// The tool messages of a run, in order.
pub(crate) fn tool_messages(outcome: &RunOutcome) -> Vec<ToolMessage> {
    outcome
        .state
        .messages
        .iter()
        .filter_map(|m| m.as_tool().cloned())
        .collect()
}

pub(crate) fn calls(calls: &[(&str, Value)]) -> ScriptedTurn {
    ScriptedTurn::ToolCalls {
        text: String::new(),
        calls: calls
            .iter()
            .map(|(name, args)| (name.to_string(), args.clone()))
            .collect(),
    }
}

pub(crate) fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn::Text(vec![text.to_string()])
}

/// The stdio entry for server-everything.
pub(crate) fn stdio_server(index: &std::path::Path) -> Value {
    serde_json::json!({"command": "node", "args": [index, "stdio"]})
}

/// Starts server-everything's HTTP transport (`streamableHttp` or `sse`) on a free port and
/// waits until it accepts connections; the child dies with the returned guard.
///
/// The port is found free, then handed to the child: another test may take it in between (the
/// child then exits at once), so a child that ends before listening is started again on
/// another port, a few times.
pub(crate) async fn start_http_server(
    index: &std::path::Path,
    mode: &str,
) -> (tokio::process::Child, u16) {
    let mut ended = Vec::new();
    for _ in 0..5 {
        match try_start_http_server(index, mode).await {
            Ok(started) => return started,
            Err(end) => ended.push(end),
        }
    }
    panic!("server-everything {mode} exited before listening, every time: {ended:?}");
}

/// One start on a port found free: the child listening, or how it ended before it did.
async fn try_start_http_server(
    index: &std::path::Path,
    mode: &str,
) -> Result<(tokio::process::Child, u16), String> {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new("node")
        .arg(index)
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Node's start-up is seconds on a loaded machine: wait for the port (or the child's end)
    // up to a generous deadline rather than a fixed number of tries.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok((child, port));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("port {port}: {status}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server-everything {mode} did not listen on {port} within 90 s");
}
