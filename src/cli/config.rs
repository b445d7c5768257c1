//! `antler config`: validate a config file or print the configuration reference; neither needs
//! the async runtime or a loaded configuration.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::{ProcessEnv, run_check};

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file: exit 0, or print every problem and exit 64.
    Check { path: Option<PathBuf> },
    /// Print the configuration reference (every key, its type, default and meaning) as
    /// Markdown; docs/configuration.md is this output.
    Reference,
}

/// Runs `command`; `flag` is the global `--config`, which `check` falls back to.
pub fn run(command: &ConfigCommand, flag: Option<&Path>, cwd: &Path) -> ExitCode {
    match command {
        ConfigCommand::Check { path } => {
            let path = path.as_deref().or(flag);
            let code = run_check(path, &ProcessEnv, cwd, &mut std::io::stdout());
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        ConfigCommand::Reference => {
            print!("{}", crate::config::reference::render());
            ExitCode::SUCCESS
        }
    }
}
