//! Where the command line's logs go: stderr, as text or JSON, coloured only at a terminal.

use crate::config::{LoadedConfig, LogFormat};

/// Logs go to stderr; `quiet` (interactive commands) shows only warnings unless `RUST_LOG` says
/// otherwise, so the console stays readable.
pub fn init(loaded: &LoadedConfig, quiet: bool) {
    let level = if quiet {
        "warn"
    } else {
        &loaded.config.log_level
    };
    init_to(loaded.config.log_format, level);
}

/// Logs at `default` (unless `RUST_LOG` says otherwise) in `format` to stderr.
pub fn init_to(format: LogFormat, default: &str) {
    let filter = crate::mcp::log_filter(default);
    use std::io::IsTerminal;
    // Colours only for a person at a terminal; journald and log files get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    if let Err(e) = result {
        eprintln!("warning: logging is not available: {e}");
    }
}
