//! `antler mcp list|call|probe|login`: the MCP servers of `extensions_config.json`, their
//! status and tools, from the running daemon (`GET /api/mcp/servers` over its socket, as the
//! operator) or, with no daemon, by connecting to them here and closing them again; one tool
//! called here (`call`, `probe`), and a person's authorization obtained (`login`).

pub mod call;
pub mod login;
pub mod probe;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use clap::Subcommand;
use reqwest::Method;

use crate::cli::daemon_client::{DaemonClient, DaemonClientError};
use crate::config::{AppConfig, ProcessEnv};
use crate::mcp::config::{ExtensionsConfig, ServerConfig};
use crate::mcp::{McpManager, ServerReport, ServerStatus, extensions_path};

/// The exit code of `call` and `probe` when the tool reported an error (`isError`).
pub const EXIT_TOOL_ERROR: u8 = 1;
/// The exit code of `call` and `probe` when nothing was called: bad arguments, an unknown
/// server, a server that could not be reached or refused the call.
pub const EXIT_NOT_CALLED: u8 = 2;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// List the configured servers with their status and tools (connects to each).
    List,
    /// Call one tool of a configured server and print its result as JSON (exit code 1 when
    /// the tool reports an error).
    Call(crate::cli::mcp::call::CallArgs),
    /// Connect to a server by URL: initialize, list its tools, optionally call one.
    Probe(crate::cli::mcp::probe::ProbeArgs),
    /// Authorize Antler with a configured server in a browser (OAuth authorization code).
    Login(crate::cli::mcp::login::LoginArgs),
}

#[derive(Debug, thiserror::Error)]
pub enum McpCliError {
    #[error(transparent)]
    Daemon(#[from] DaemonClientError),
    #[error("{0}")]
    Config(String),
    #[error("could not write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs `command` through `daemon` when one runs, else here; `config_file` is where
/// `config.yaml` was loaded from (`None`: the embedded default), which decides where an older
/// install's `extensions_config.json` is.
pub async fn run(
    config: &AppConfig,
    config_file: Option<&Path>,
    daemon: Option<&DaemonClient>,
    command: McpCommand,
    out: &mut dyn Write,
) -> Result<std::process::ExitCode, McpCliError> {
    match command {
        McpCommand::List => {
            list(config, config_file, daemon, out).await?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        McpCommand::Call(args) => crate::cli::mcp::call::run(config, config_file, args, out).await,
        McpCommand::Probe(args) => {
            crate::cli::mcp::probe::run(config, config_file, args, out).await
        }
        McpCommand::Login(args) => {
            crate::cli::mcp::login::run(config, config_file, args, out).await
        }
    }
}

async fn list(
    config: &AppConfig,
    config_file: Option<&Path>,
    daemon: Option<&DaemonClient>,
    out: &mut dyn Write,
) -> Result<(), McpCliError> {
    let (path, servers) = match daemon {
        Some(client) => {
            let body = client.send(Method::GET, "/api/mcp/servers", None).await?;
            let servers: Vec<Listed> = serde_json::from_value(body["servers"].clone())
                .map_err(|e| DaemonClientError::Protocol(e.to_string()))?;
            (body["path"].as_str().unwrap_or("").to_string(), servers)
        }
        None => {
            let path = extensions_path(&ProcessEnv, config_file, &config.data_dir());
            let manager = McpManager::new(path.clone(), &config.data_dir(), Arc::new(ProcessEnv));
            manager.tools().await;
            let reports = manager.servers().await.map_err(McpCliError::Config);
            manager.shutdown().await;
            (
                path.display().to_string(),
                reports?.into_iter().map(Listed::from).collect(),
            )
        }
    };
    write_listing(out, &path, &servers)?;
    Ok(())
}

/// A server as listed (the daemon's JSON or a local report).
#[derive(serde::Deserialize)]
struct Listed {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    enabled: bool,
    status: ServerStatus,
    tools: Vec<String>,
}

impl From<ServerReport> for Listed {
    fn from(report: ServerReport) -> Self {
        Self {
            name: report.name,
            kind: report.kind.to_string(),
            enabled: report.enabled,
            status: report.status,
            tools: report.tools,
        }
    }
}

fn write_listing(out: &mut dyn Write, path: &str, servers: &[Listed]) -> std::io::Result<()> {
    if servers.is_empty() {
        writeln!(
            out,
            "No MCP servers configured (in {path}); see extensions_config.example.json"
        )?;
        return Ok(());
    }
    writeln!(out, "MCP servers in {path}:")?;
    let width = servers.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for server in servers {
        let status = match (&server.status, server.enabled) {
            (_, false) | (ServerStatus::Disabled, _) => "disabled".to_string(),
            (ServerStatus::Pending, _) => "not connected yet".to_string(),
            (ServerStatus::Connected, _) => format!("connected, {} tools", server.tools.len()),
            (ServerStatus::Failed { error }, _) => format!("failed: {error}"),
        };
        writeln!(out, "  {:width$}  {:5}  {status}", server.name, server.kind)?;
        if !server.tools.is_empty() {
            writeln!(out, "  {:width$}         {}", "", server.tools.join(", "))?;
        }
    }
    Ok(())
}

/// The server `name` of `extensions_config.json` (the file `antler mcp list` reads); an unknown
/// name is refused with the names that are configured.
pub(crate) fn configured_server(
    config: &AppConfig,
    config_file: Option<&Path>,
    name: &str,
) -> Result<ServerConfig, String> {
    let path = extensions_path(&ProcessEnv, config_file, &config.data_dir());
    let (extensions, _) =
        ExtensionsConfig::load(&path, &ProcessEnv).map_err(|error| error.to_string())?;
    let names: Vec<&str> = extensions.servers.iter().map(|s| s.name.as_str()).collect();
    if let Some(server) = extensions.servers.iter().find(|s| s.name == name) {
        return Ok(server.clone());
    }
    if names.is_empty() {
        return Err(format!(
            "no MCP server named `{name}`: {} configures none; add one (see \
             extensions_config.example.json)",
            path.display()
        ));
    }
    Err(format!(
        "no MCP server named `{name}` in {}; the configured ones are: {}",
        path.display(),
        names.join(", ")
    ))
}

/// Prints a tool's result as JSON; the exit code says whether the tool reported an error.
pub(crate) fn print_result(
    out: &mut dyn Write,
    result: &rmcp::model::CallToolResult,
) -> Result<std::process::ExitCode, McpCliError> {
    let text = serde_json::to_string_pretty(result)
        .map_err(|e| McpCliError::Config(format!("the result is not printable as JSON: {e}")))?;
    writeln!(out, "{text}")?;
    Ok(if result.is_error == Some(true) {
        std::process::ExitCode::from(EXIT_TOOL_ERROR)
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// Says on stderr why nothing was called and gives the matching exit code.
pub(crate) fn not_called(message: &str) -> std::process::ExitCode {
    eprintln!("error: {message}");
    std::process::ExitCode::from(EXIT_NOT_CALLED)
}
