//! `antler mcp call SERVER TOOL [--args JSON]`: one tool of a configured server, called here
//! (no model, no daemon), its result printed as JSON.
//!
//! Contract: owned by the cli lane.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::mcp::McpCliError;
use crate::config::AppConfig;

#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// The server's name in extensions_config.json.
    pub server: String,
    /// The tool's name as the server lists it (without Antler's `server_` prefix).
    pub tool: String,
    /// The arguments, a JSON object.
    #[arg(long)]
    pub args: Option<String>,
}

pub async fn run(
    config: &AppConfig,
    config_file: Option<&Path>,
    args: CallArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, McpCliError> {
    let _ = (config, config_file, out);
    Err(McpCliError::Config(format!(
        "calling {} of {} is not built yet",
        args.tool, args.server
    )))
}
