//! `antler mcp probe URL`: connects to a server by URL as Antler would (initialize, list its
//! tools, call the one named), with a configured entry's headers and OAuth settings when
//! `--server` names one; for a person debugging a server and for the MCP conformance suite.
//!
//! Contract: owned by the cli lane.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::mcp::McpCliError;
use crate::config::AppConfig;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ProbeTransport {
    Http,
    Sse,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ProbeElicitation {
    Decline,
    AcceptDefaults,
}

#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The server's MCP endpoint.
    pub url: String,
    /// Streamable HTTP (default) or the legacy HTTP+SSE transport.
    #[arg(long, value_enum, default_value = "http")]
    pub transport: ProbeTransport,
    /// Take headers and OAuth settings from this entry of extensions_config.json.
    #[arg(long)]
    pub server: Option<String>,
    /// Call this tool after listing.
    #[arg(long)]
    pub tool: Option<String>,
    /// The tool's arguments, a JSON object.
    #[arg(long)]
    pub args: Option<String>,
    /// How the server's elicitation requests are answered.
    #[arg(long, value_enum, default_value = "decline")]
    pub elicitation: ProbeElicitation,
}

pub async fn run(
    config: &AppConfig,
    config_file: Option<&Path>,
    args: ProbeArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, McpCliError> {
    let _ = (config, config_file, out);
    Err(McpCliError::Config(format!(
        "probing {} is not built yet",
        args.url
    )))
}
