//! Where the command line's logs go: stderr, as text or JSON, coloured only at a terminal; with
//! `telemetry.otlp` set, next to the OpenTelemetry trace exporter.

use tracing_subscriber::{Layer, Registry};

use crate::config::{LoadedConfig, LogFormat};
use crate::telemetry::TelemetryGuard;

/// Logs go to stderr; `quiet` (interactive commands) shows only warnings unless `RUST_LOG` says
/// otherwise, so the console stays readable. With `telemetry.otlp` set, runs are also traced;
/// the guard flushes the last spans at exit.
pub fn init(loaded: &LoadedConfig, quiet: bool) -> Option<TelemetryGuard> {
    let level = if quiet {
        "warn"
    } else {
        &loaded.config.log_level
    };
    let format = loaded.config.log_format;
    let telemetry = &loaded.config.telemetry;
    if let Some(otlp) = &telemetry.otlp {
        let filter = crate::mcp::log_filter(level);
        match crate::telemetry::install(telemetry, otlp, fmt_layer(format), filter) {
            Ok(guard) => return Some(guard),
            Err(error) => {
                init_to(format, level);
                tracing::warn!(%error, "Traces are off");
                return None;
            }
        }
    }
    init_to(format, level);
    None
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

/// The same formatter as [`init_to`], as a layer beside the trace exporter.
fn fmt_layer(format: LogFormat) -> Box<dyn Layer<Registry> + Send + Sync> {
    use std::io::IsTerminal;
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => layer.json().boxed(),
        LogFormat::Text => layer.boxed(),
    }
}
