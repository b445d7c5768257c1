//! MCP: tools of external Model Context Protocol servers, configured in
//! `extensions_config.json` (`config`), reached over stdio, streamable HTTP (`http`) or the
//! legacy HTTP+SSE transport (`sse`), with OAuth tokens (`oauth`); connected lazily and cached
//! per version of the file (`manager`), exposed to agents as tools (`tool`, `result`), and
//! optionally deferred behind `tool_search` (`deferred`).

pub mod config;
pub mod connect;
pub mod deferred;
mod elicitation;
pub mod handler;
mod http;
pub mod manager;
pub(crate) mod oauth;
pub(crate) mod probe;
mod result;
pub(crate) mod server;
mod sse;
pub mod tool;

pub use config::{
    EXTENSIONS_ENV, EXTENSIONS_FILE_NAME, ExtensionsConfig, extensions_path, extensions_write_path,
};
pub use deferred::{DeferredCatalog, DeferredToolsMiddleware, TOOL_SEARCH, ToolSearchTool};
pub use handler::ElicitationPolicy;
pub use manager::{McpManager, McpToolSet, TOKEN_DIR_NAME};
pub use server::{ServerReport, ServerStatus};
pub use tool::{MCP_GROUP, McpTool};

/// The binary's log filter: `RUST_LOG` when set, else `level` (a `log_level` value) with rmcp's
/// transport worker silenced: it logs every failed connection at ERROR with its internal Rust
/// types (`reqwest::Error { kind: … }`), while the manager reports the same failure once, in
/// words.
pub fn log_filter(level: &str) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{level},rmcp::transport::worker=off")))
}
