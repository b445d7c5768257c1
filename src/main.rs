//! The `antler` binary: the composition root. Parses the command line, loads and validates the
//! configuration (exit 64 listing every problem), sets up logging, and hands over to
//! [`antler::cli`]. No behaviour lives here.

use std::process::ExitCode;

use clap::Parser;

use antler::cli::{Cli, Command, block_on};
use antler::config::{EXIT_CONFIG_INVALID, ProcessEnv, RuntimeConfig, load_config};

/// With the `mimalloc` feature, the binary allocates with mimalloc (see ARCHITECTURE.md,
/// "Memory", for why and the figures).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    if let Some(Command::Internal(command)) = cli.command {
        return command.run();
    }
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("error: cannot read the current directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Command::Config { command }) = &cli.command {
        return antler::cli::config::run(command, cli.config.as_deref(), &cwd);
    }
    if let Some(command) = cli.command.take_if(|command| command.is_client()) {
        // These find their daemon first and read the whole config only if there is none.
        let work = antler::cli::located::run(command, cli.config.as_deref(), cwd);
        return block_on(RuntimeConfig::default().build(), work);
    }
    // Loaded before the runtime exists: the config says how many workers it gets.
    let loaded = match load_config(cli.config.as_deref(), &ProcessEnv, &cwd) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: the configuration is invalid:\n{e}");
            return ExitCode::from(EXIT_CONFIG_INVALID as u8);
        }
    };
    let runtime = loaded.config.runtime.build();
    block_on(runtime, async move {
        // Only the daemon logs at the configured level; other commands keep the console quiet.
        let quiet = !matches!(cli.command, None | Some(Command::Run));
        let telemetry = antler::cli::logging::init(&loaded, quiet);
        for warning in &loaded.warnings {
            tracing::warn!("{warning}");
        }
        let result = antler::cli::run(cli.command, loaded, cwd).await;
        // After the daemon drained: the last runs' spans are flushed, within a bounded wait.
        if let Some(telemetry) = telemetry {
            telemetry.shutdown().await;
        }
        result
    })
}
