//! `antler mcp login SERVER`: a person authorizes Antler with a configured server in a
//! browser (OAuth authorization code with PKCE); the tokens are kept in the data dir, where
//! the daemon finds and refreshes them.
//!
//! Contract: owned by the oauth-login lane.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::mcp::McpCliError;
use crate::config::AppConfig;

#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The server's name in extensions_config.json.
    pub server: String,
    /// Ask for this scope instead of the one discovered.
    #[arg(long)]
    pub scope: Option<String>,
}

pub async fn run(
    config: &AppConfig,
    config_file: Option<&Path>,
    args: LoginArgs,
    out: &mut dyn Write,
) -> Result<ExitCode, McpCliError> {
    let _ = (config, config_file, out);
    Err(McpCliError::Config(format!(
        "logging in to {} is not built yet",
        args.server
    )))
}
