//! Installing the global subscriber with the OTLP layer next to the log formatter, and shutting
//! the exporter down with a bounded flush.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanExporter};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use crate::config::{OtlpConfig, TelemetryConfig};
use crate::telemetry::{SPAN_TARGET, export, set_enabled};

/// How long shutdown waits for the last spans to reach the collector.
const SHUTDOWN_FLUSH: Duration = Duration::from_secs(5);

/// Why traces could not be turned on (the daemon then runs without them).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("the OTLP exporter could not be built: {0}; check telemetry.otlp.endpoint")]
    Exporter(String),
    #[error(
        "telemetry.otlp.headers.{0} is not a valid gRPC metadata header (name or value); fix it \
         or use protocol: http/protobuf"
    )]
    Header(String),
    #[error("logging was already set up: {0}")]
    Subscriber(String),
}

/// Keeps the exporter alive; [`TelemetryGuard::shutdown`] flushes what is still queued.
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: SdkTracerProvider,
}

impl TelemetryGuard {
    /// Exports the spans still queued, waiting at most a few seconds: a collector that is down
    /// never holds up the exit.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(SHUTDOWN_FLUSH))
                .await;
        match flushed {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "Could not flush the last traces"),
            Err(error) => tracing::warn!(%error, "Could not flush the last traces"),
        }
    }
}

/// Sets the global subscriber: `fmt` (the log formatter, filtered by `filter`) and the OTLP
/// layer, which sees only antler's own spans ([`SPAN_TARGET`]). Must run inside the tokio
/// runtime: exports are spawned on it.
pub fn install(
    telemetry: &TelemetryConfig,
    otlp: &OtlpConfig,
    fmt: Box<dyn Layer<Registry> + Send + Sync>,
    filter: EnvFilter,
) -> Result<TelemetryGuard, TelemetryError> {
    let exporter = export::span_exporter(otlp, tokio::runtime::Handle::current())?;
    let provider = provider(exporter, otlp);
    subscriber(fmt, filter, &provider)
        .try_init()
        .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
    set_enabled(telemetry.include_content);
    Ok(TelemetryGuard { provider })
}

/// The log formatter and the OTLP layer over one registry.
pub(crate) fn subscriber(
    fmt: Box<dyn Layer<Registry> + Send + Sync>,
    filter: EnvFilter,
    provider: &SdkTracerProvider,
) -> impl tracing::Subscriber + Send + Sync + 'static {
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("antler"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        // INFO, the spans' level, not TRACE: the subscriber's max level (and the `log` bridge's)
        // stays what the log filter asks for, so debug and trace callsites stay off.
        .with_filter(Targets::new().with_target(SPAN_TARGET, tracing::Level::INFO));
    tracing_subscriber::registry()
        .with(fmt.with_filter(log_filter(filter)))
        .with(otel)
}

/// The log filter with the roots of antler's traces on (so log lines inside a run show its trace
/// id), their children off (nothing to format per model or tool call), and the SDK's own
/// per-batch complaints off (the exporter logs an unreachable collector once).
fn log_filter(filter: EnvFilter) -> EnvFilter {
    let mut filter = filter;
    for directive in [
        "antler::otel=off",
        "antler::otel::root=info",
        "opentelemetry_sdk=off",
        "opentelemetry_otlp=off",
        "opentelemetry=off",
    ] {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// A provider exporting in batches from its own thread, sampling whole traces at `sample_ratio`
/// (a child follows its parent's decision).
pub(crate) fn provider(
    exporter: impl SpanExporter + 'static,
    otlp: &OtlpConfig,
) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(otlp.sample_ratio))
        .with_resource(
            Resource::builder()
                .with_service_name(otlp.service_name.clone())
                .build(),
        )
        .build()
}

fn sampler(ratio: f64) -> Sampler {
    Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
}
