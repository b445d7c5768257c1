//! OpenTelemetry traces of runs (`telemetry.otlp`): the exporter behind a batch processor, the
//! `tracing` layer that turns antler's spans into OTLP spans, and the span constructors the
//! run, model, tool, sub-agent and delivery code call.
//!
//! Off (no `telemetry.otlp`) nothing is installed and every constructor in [`spans`] returns a
//! disabled span after one relaxed atomic load, so the hot path pays nothing measurable.

mod export;
mod install;
pub mod spans;
#[cfg(test)]
mod tests;

pub use export::traces_url;
pub use install::{TelemetryError, TelemetryGuard, install};

use std::sync::atomic::{AtomicBool, Ordering};

/// The target of every span meant for the exporter: the OTLP layer sees only these, so library
/// spans (hyper, tonic, sled) never reach a collector.
pub const SPAN_TARGET: &str = "antler::otel";

/// The target of a span that starts a trace (under [`SPAN_TARGET`]): the only spans the log
/// formatter is shown, for their `trace_id` field.
pub const ROOT_TARGET: &str = "antler::otel::root";

/// Set once, when the OTLP layer is installed (the global subscriber cannot change later).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// `telemetry.include_content` as it was at start.
static INCLUDE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported: span constructors check this before building anything.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether spans may carry message text, prompts, tool arguments and user ids.
pub fn include_content() -> bool {
    INCLUDE_CONTENT.load(Ordering::Relaxed)
}

fn set_enabled(include_content: bool) {
    INCLUDE_CONTENT.store(include_content, Ordering::Relaxed);
    ENABLED.store(true, Ordering::Relaxed);
}
