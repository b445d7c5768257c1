//! The OTLP span exporter: HTTP/protobuf through the daemon's reqwest 0.12, or gRPC through
//! tonic, wrapped so every export runs on the tokio runtime and a collector that goes away (or
//! comes back) is logged once, not per batch.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::resource::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use tokio::runtime::Handle;

use crate::config::{OtlpConfig, OtlpProtocol};
use crate::telemetry::TelemetryError;

/// How long one export may take before it counts as failed; the batch processor's thread waits
/// this long at most, and no run ever waits for it.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest collector answer read back (an `ExportTraceServiceResponse` is a few bytes).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The URL HTTP exports go to: the endpoint's own path is kept and `/v1/traces` added, unless
/// the endpoint already names it (Langfuse's `…/api/public/otel` becomes
/// `…/api/public/otel/v1/traces`).
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim().trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Builds the exporter `otlp` describes; its exports run on `runtime`.
pub(crate) fn span_exporter(
    otlp: &OtlpConfig,
    runtime: Handle,
) -> Result<RuntimeExporter<opentelemetry_otlp::SpanExporter>, TelemetryError> {
    let inner = match otlp.protocol {
        OtlpProtocol::HttpProtobuf => {
            let client = reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(ReqwestClient(client))
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(traces_url(&otlp.endpoint))
                .with_headers(otlp.headers.clone().into_iter().collect())
                .with_timeout(EXPORT_TIMEOUT)
                .build()
        }
        OtlpProtocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(otlp.endpoint.trim())
            .with_metadata(grpc_metadata(&otlp.headers)?)
            .with_timeout(EXPORT_TIMEOUT)
            .build(),
    }
    .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    Ok(RuntimeExporter::new(inner, runtime, &otlp.endpoint))
}

/// gRPC metadata from the configured headers. A header that is not valid metadata is named
/// by key only: its value is a secret.
fn grpc_metadata(
    headers: &BTreeMap<String, String>,
) -> Result<opentelemetry_otlp::tonic_types::metadata::MetadataMap, TelemetryError> {
    use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let invalid = || TelemetryError::Header(name.clone());
        let name = reqwest::header::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|_| invalid())?;
        let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| invalid())?;
        map.insert(name, value);
    }
    Ok(MetadataMap::from_headers(map))
}

/// `opentelemetry_http::HttpClient` over reqwest 0.12: the exporter shares the daemon's HTTP
/// stack (TLS roots, proxy settings) instead of building a second reqwest.
#[derive(Clone, Debug)]
struct ReqwestClient(reqwest::Client);

#[async_trait::async_trait]
impl HttpClient for ReqwestClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let response = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = read_capped(response).await?;
        let mut answer = Response::builder().status(status).body(body)?;
        *answer.headers_mut() = headers;
        Ok(answer)
    }
}

async fn read_capped(mut response: reqwest::Response) -> Result<Bytes, HttpError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(
                format!("the collector's answer is over {MAX_RESPONSE_BYTES} bytes").into(),
            );
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

/// Runs each export of `inner` as a task on the tokio runtime (the SDK's batch processor calls
/// it from its own thread, where reqwest and tonic have no reactor) and logs the collector's
/// health on change only.
pub(crate) struct RuntimeExporter<E> {
    inner: Arc<E>,
    runtime: Handle,
    health: Arc<Health>,
}

impl<E> RuntimeExporter<E> {
    pub(crate) fn new(inner: E, runtime: Handle, endpoint: &str) -> Self {
        Self {
            inner: Arc::new(inner),
            runtime,
            health: Arc::new(Health {
                failing: AtomicBool::new(false),
                endpoint: shown_endpoint(endpoint),
            }),
        }
    }
}

impl<E> fmt::Debug for RuntimeExporter<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeExporter")
            .field("endpoint", &self.health.endpoint)
            .finish_non_exhaustive()
    }
}

impl<E: SpanExporter + 'static> SpanExporter for RuntimeExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let inner = self.inner.clone();
        // The task is awaited right here: the batch processor's thread blocks on this future.
        let task = self.runtime.spawn(async move { inner.export(batch).await });
        let result = match task.await {
            Ok(result) => result,
            Err(join) => Err(OTelSdkError::InternalFailure(join.to_string())),
        };
        self.health.observe(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Called while the provider is built, before any export holds a clone.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}

/// Whether the last export failed: a warning when the collector becomes unreachable, a note
/// when it answers again, nothing in between.
struct Health {
    failing: AtomicBool,
    /// The endpoint without any user:password part.
    endpoint: String,
}

impl Health {
    fn observe(&self, result: &OTelSdkResult) {
        let endpoint = self.endpoint.as_str();
        match result {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(endpoint, "Traces reach the OpenTelemetry collector again");
                }
            }
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        %error,
                        endpoint,
                        "Cannot export traces to the OpenTelemetry collector; runs go on untraced \
                         until it answers (check telemetry.otlp.endpoint and that the collector \
                         runs; this is logged once)"
                    );
                }
            }
        }
    }
}

/// The endpoint as logs may show it: credentials in the URL are dropped.
fn shown_endpoint(endpoint: &str) -> String {
    match reqwest::Url::parse(endpoint.trim()) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        Err(_) => endpoint.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_exports_go_to_v1_traces_under_the_endpoints_path() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://cloud.langfuse.com/api/public/otel/"),
            "https://cloud.langfuse.com/api/public/otel/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
    }

    #[test]
    fn logged_endpoints_lose_their_credentials() {
        assert_eq!(
            shown_endpoint("https://user:hunter2@collector:4318"),
            "https://collector:4318/"
        );
    }
}
