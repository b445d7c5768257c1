//! [`McpManager`]: the MCP servers of `extensions_config.json`, connected lazily and cached.
//!
//! The first run that needs tools connects every enabled server (concurrently) and lists its
//! tools; later runs reuse them until the file's content changes (checked by hash at each use,
//! so an edit, a `PUT /api/mcp/config` or a hot reload all take effect on the next run). A
//! server that fails to start or times out is logged once, shown in `antler mcp list`, and
//! skipped; the run goes on without its tools. A session that died (the server exited) is
//! reopened on the next call.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

use crate::agent_api::ToolRef;
use crate::config::EnvSource;
use crate::mcp::config::{ExtensionsConfig, exposed_tool_name};
use crate::mcp::server::{ServerReport, ServerSlot, ServerStatus};
use crate::mcp::tool::McpTool;

/// The MCP tools of one configuration version.
#[derive(Default)]
pub struct McpToolSet {
    pub tools: Vec<ToolRef>,
}

struct Loaded {
    signature: [u8; 32],
    servers: Vec<Arc<ServerSlot>>,
    /// `None` until the first run asks for tools.
    tools: Option<Arc<McpToolSet>>,
    /// The file's problem, if it was rejected.
    error: Option<String>,
}

/// The MCP servers of the daemon (or embedded client). Cheap to clone.
#[derive(Clone)]
pub struct McpManager {
    inner: Arc<Inner>,
}

struct Inner {
    path: RwLock<PathBuf>,
    env: Arc<dyn EnvSource + Send + Sync>,
    http: reqwest::Client,
    /// Where authorization-code tokens are kept (`<data dir>/mcp-oauth`).
    token_dir: PathBuf,
    loaded: tokio::sync::Mutex<Option<Loaded>>,
}

/// The token directory inside a data dir.
pub const TOKEN_DIR_NAME: &str = "mcp-oauth";

impl McpManager {
    /// `data_dir` holds the servers' authorization-code tokens (in [`TOKEN_DIR_NAME`]).
    pub fn new(
        path: PathBuf,
        data_dir: &std::path::Path,
        env: Arc<dyn EnvSource + Send + Sync>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                path: RwLock::new(path),
                env,
                http: reqwest::Client::new(),
                token_dir: data_dir.join(TOKEN_DIR_NAME),
                loaded: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// The daemon's servers: `extensions_config.json` where the process environment and
    /// `data_dir` put it, tokens in `data_dir`.
    pub fn in_data_dir(data_dir: &std::path::Path) -> Self {
        let env = crate::config::ProcessEnv;
        let path = crate::mcp::extensions_path(&env, None, data_dir);
        Self::new(path, data_dir, Arc::new(env))
    }

    /// Where `extensions_config.json` is read from.
    pub fn path(&self) -> PathBuf {
        self.inner
            .path
            .read()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// Points the manager at another file (the daemon does this once it knows where
    /// `config.yaml` is); the next use reloads.
    pub fn set_path(&self, path: PathBuf) {
        if let Ok(mut slot) = self.inner.path.write() {
            *slot = path;
        }
    }

    /// The MCP tools for a run: connected and listed on first use, then cached until the
    /// file's content changes.
    pub async fn tools(&self) -> Arc<McpToolSet> {
        let mut loaded = self.current().await;
        let Some(state) = loaded.as_mut() else {
            return Arc::default();
        };
        if let Some(tools) = &state.tools {
            return tools.clone();
        }
        let enabled: Vec<_> = state
            .servers
            .iter()
            .filter(|s| s.config.enabled)
            .cloned()
            .collect();
        let found = futures::future::join_all(enabled.iter().map(discover)).await;
        let tools = Arc::new(McpToolSet {
            tools: found.into_iter().flatten().collect(),
        });
        state.tools = Some(tools.clone());
        tools
    }

    /// Every configured server with its status and tools (without connecting anything).
    pub async fn servers(&self) -> Result<Vec<ServerReport>, String> {
        let loaded = self.current().await;
        match loaded.as_ref() {
            None => Ok(Vec::new()),
            Some(state) => match &state.error {
                Some(error) => Err(error.clone()),
                None => Ok(state.servers.iter().map(|s| s.report()).collect()),
            },
        }
    }

    /// Closes every session (stdio servers are killed). Called at shutdown.
    pub async fn shutdown(&self) {
        let servers = match self.inner.loaded.lock().await.take() {
            Some(state) => state.servers,
            None => return,
        };
        for slot in servers {
            slot.drop_session().await;
        }
    }

    /// The state for the file as it is now, reloaded when its content changed.
    async fn current(&self) -> tokio::sync::MutexGuard<'_, Option<Loaded>> {
        let path = self.path();
        // Read inline: every run asks, the file is a few hundred bytes (usually absent), and
        // tokio::fs's hop to a blocking thread and back cost more than the read itself (two
        // thread wake-ups per run, and a blocking thread respawned after each idle spell).
        let bytes = std::fs::read(&path).unwrap_or_default();
        let signature: [u8; 32] = Sha256::digest(&bytes).into();
        let mut loaded = self.inner.loaded.lock().await;
        if loaded.as_ref().is_some_and(|l| l.signature == signature) {
            return loaded;
        }
        let old = loaded.take();
        let (servers, error) = match ExtensionsConfig::parse_or_empty(
            &bytes,
            &path.display().to_string(),
            self.inner.env.as_ref(),
        ) {
            Ok(config) => (
                config
                    .servers
                    .into_iter()
                    .map(|server| {
                        Arc::new(ServerSlot::new(
                            server,
                            self.inner.http.clone(),
                            Some(self.inner.token_dir.clone()),
                        ))
                    })
                    .collect(),
                None,
            ),
            Err(error) => {
                // Reported once per version of the file: the signature is remembered below.
                tracing::warn!(path = %path.display(), %error, "extensions_config.json was rejected; running without MCP servers");
                (Vec::new(), Some(error.to_string()))
            }
        };
        if let Some(old) = old {
            tracing::info!(path = %path.display(), "extensions_config.json changed; MCP tools are rediscovered on the next run");
            for slot in old.servers {
                slot.drop_session().await;
            }
        }
        *loaded = Some(Loaded {
            signature,
            servers,
            tools: None,
            error,
        });
        loaded
    }
}

impl ExtensionsConfig {
    /// Empty bytes (no file) are an empty config.
    fn parse_or_empty(
        bytes: &[u8],
        origin: &str,
        env: &dyn EnvSource,
    ) -> Result<Self, crate::mcp::config::McpConfigError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        Self::parse(bytes, origin, env)
    }
}

/// Connects and lists the server's tools; failures are logged once and yield none.
async fn discover(slot: &Arc<ServerSlot>) -> Vec<ToolRef> {
    let listed = async {
        let peer = slot.peer().await.map_err(|e| e.to_string())?;
        let listing =
            tokio::time::timeout(crate::mcp::connect::START_TIMEOUT, peer.list_all_tools())
                .await
                .map_err(|_| "listing its tools timed out".to_string())?;
        listing.map_err(|e| format!("listing its tools failed: {e}"))
    };
    match listed.await {
        Ok(tools) => {
            let tools: Vec<ToolRef> = tools
                .into_iter()
                .map(|tool| {
                    let exposed = exposed_tool_name(&slot.config, &tool.name);
                    Arc::new(McpTool::new(slot.clone(), exposed, tool)) as ToolRef
                })
                .collect();
            if let Ok(mut names) = slot.tools.lock() {
                *names = tools.iter().map(|t| t.name().to_string()).collect();
            }
            tracing::info!(server = %slot.config.name, tools = tools.len(), "Connected to an MCP server");
            tools
        }
        Err(error) => {
            tracing::warn!(server = %slot.config.name, %error, "MCP server skipped: it did not start; runs go on without its tools");
            slot.set_status(ServerStatus::Failed { error });
            slot.drop_session().await;
            Vec::new()
        }
    }
}
