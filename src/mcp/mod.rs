//! MCP: tools of external Model Context Protocol servers, configured in
//! `extensions_config.json` (`config`), reached over stdio, streamable HTTP (`http`) or the
//! legacy HTTP+SSE transport (`sse`), with OAuth tokens (`oauth`); connected lazily and cached
//! per version of the file (`manager`), exposed to agents as tools (`tool`, `result`), and
//! optionally deferred behind `tool_search` (`deferred`).

pub mod config;
mod connect;
pub mod deferred;
mod http;
pub mod manager;
mod oauth;
mod result;
mod server;
mod sse;
pub mod tool;

pub use config::{EXTENSIONS_ENV, EXTENSIONS_FILE_NAME, ExtensionsConfig, extensions_path};
pub use deferred::{DeferredCatalog, DeferredToolsMiddleware, TOOL_SEARCH, ToolSearchTool};
pub use manager::{McpManager, McpToolSet};
pub use server::{ServerReport, ServerStatus};
pub use tool::{MCP_GROUP, McpTool};
