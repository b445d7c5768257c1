//! `antler mcp call SERVER TOOL [--args JSON]`: one tool of a configured server, called here
//! (no model, no daemon), its result printed as JSON.
//!
//! Exit codes: 0 the tool answered, 1 it reported an error (`isError`), 2 nothing was called
//! (an unknown server, bad arguments, a server that could not be reached).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::mcp::{McpCliError, configured_server, not_called, print_result};
use crate::config::AppConfig;
use crate::mcp::TOKEN_DIR_NAME;
use crate::mcp::probe::{ProbeOptions, ProbeSession, parse_arguments};

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
    let arguments = match parse_arguments(args.args.as_deref()) {
        Ok(arguments) => arguments,
        Err(message) => return Ok(not_called(&message)),
    };
    let server = match configured_server(config, config_file, &args.server) {
        Ok(server) => server,
        Err(message) => return Ok(not_called(&message)),
    };
    if !server.enabled {
        eprintln!(
            "note: `{}` is disabled in extensions_config.json; calling it anyway",
            server.name
        );
    }
    // A person is at hand: an authorization-code server may be authorized in a browser, and
    // its tokens are kept where the daemon finds them.
    let options = ProbeOptions {
        token_dir: Some(config.data_dir().join(TOKEN_DIR_NAME)),
        ..ProbeOptions::default()
    };
    let session = match ProbeSession::open(&server, &options).await {
        Ok(session) => session,
        Err(error) => return Ok(not_called(&error.to_string())),
    };
    let called = session.call(&args.tool, arguments).await;
    session.close().await;
    match called {
        Ok(result) => print_result(out, &result),
        Err(error) => Ok(not_called(&error.to_string())),
    }
}
