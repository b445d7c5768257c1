//! The sampler, the trace id in log lines, and the exporter running on the tokio runtime,
//! through a scoped subscriber (the global one belongs to the binary).

use std::io::Write;
use std::sync::{Arc, Mutex};

use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::OtlpConfig;
use crate::telemetry::install::{provider, subscriber};
use crate::telemetry::spans::otel_span_for_test;

/// Keeps what it is asked to export.
#[derive(Clone, Debug, Default)]
struct Collecting {
    spans: Arc<Mutex<Vec<SpanData>>>,
}

impl SpanExporter for Collecting {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.spans.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// A log sink the test reads back.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn otlp(sample_ratio: f64) -> OtlpConfig {
    OtlpConfig {
        endpoint: "http://127.0.0.1:4318".into(),
        sample_ratio,
        ..OtlpConfig::default()
    }
}

/// Runs `body` under the telemetry subscriber (logs to `logs` as `json` or text); returns the
/// spans exported.
fn traced(
    sample_ratio: f64,
    json: bool,
    logs: &Buffer,
    body: impl FnOnce(),
) -> (Vec<SpanData>, SdkTracerProvider) {
    let exporter = Collecting::default();
    let provider = provider(exporter.clone(), &otlp(sample_ratio));
    let writer = logs.clone();
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(move || writer.clone());
    let fmt = if json {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    let subscriber = subscriber(fmt, EnvFilter::new("warn"), &provider);
    tracing::subscriber::with_default(subscriber, body);
    provider.force_flush().unwrap();
    let spans = exporter.spans.lock().unwrap().clone();
    (spans, provider)
}

#[test]
fn sample_ratio_one_exports_every_run_and_zero_none() {
    let logs = Buffer::default();
    let run = || {
        for _ in 0..20 {
            let run = otel_span_for_test("invoke_agent lead");
            let _entered = run.enter();
            let _model = otel_span_for_test("chat fake-model").entered();
        }
    };
    let (all, _) = traced(1.0, false, &logs, run);
    assert_eq!(all.len(), 40);
    let names: Vec<&str> = all.iter().map(|span| span.name.as_ref()).collect();
    assert!(names.contains(&"invoke_agent lead"), "{names:?}");
    assert!(names.contains(&"chat fake-model"), "{names:?}");

    let (none, _) = traced(0.0, false, &logs, run);
    assert!(none.is_empty(), "{} spans exported at ratio 0", none.len());
}

#[test]
fn a_child_span_shares_its_runs_trace() {
    let logs = Buffer::default();
    let (spans, _) = traced(1.0, false, &logs, || {
        let run = otel_span_for_test("invoke_agent lead");
        let _entered = run.enter();
        let _tool = otel_span_for_test("execute_tool ls").entered();
    });
    let run = spans
        .iter()
        .find(|s| s.name == "invoke_agent lead")
        .unwrap();
    let tool = spans.iter().find(|s| s.name == "execute_tool ls").unwrap();
    assert_eq!(tool.span_context.trace_id(), run.span_context.trace_id());
    assert_eq!(tool.parent_span_id, run.span_context.span_id());
}

#[test]
fn log_lines_inside_a_run_carry_its_trace_id_in_text_and_json() {
    for json in [false, true] {
        let logs = Buffer::default();
        let mut trace_id = String::new();
        traced(1.0, json, &logs, || {
            let run = otel_span_for_test("invoke_agent lead");
            let _entered = run.enter();
            let _model = otel_span_for_test("chat fake-model").entered();
            trace_id = run.context().span().span_context().trace_id().to_string();
            tracing::warn!("the model is slow");
        });
        let text = logs.text();
        let line = text
            .lines()
            .find(|line| line.contains("the model is slow"))
            .unwrap_or_else(|| panic!("no log line in {text:?}"));
        assert_eq!(trace_id.len(), 32);
        assert!(
            line.contains(&trace_id),
            "json={json}: {trace_id} missing from {line}"
        );
        if json {
            let parsed: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(parsed["spans"][0]["trace_id"], trace_id.as_str(), "{line}");
        }
    }
}

#[test]
fn a_line_outside_any_run_has_no_trace_id() {
    let logs = Buffer::default();
    traced(1.0, false, &logs, || tracing::warn!("idle"));
    let text = logs.text();
    assert!(text.contains("idle"), "{text}");
    assert!(!text.contains("trace_id"), "{text}");
}

/// The batch processor exports from its own thread; the HTTP client needs the tokio runtime.
/// The exporter spawns each export there: a reqwest export reaches a listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_from_the_batch_thread_run_on_the_tokio_runtime() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (sender, received) = tokio::sync::oneshot::channel();
    let server = tokio_util::task::AbortOnDropHandle::new({
        #[allow(clippy::disallowed_methods)] // Aborted on drop, at the end of the test.
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = vec![0u8; 4096];
            let read = tokio::io::AsyncReadExt::read(&mut socket, &mut head)
                .await
                .unwrap();
            let head = String::from_utf8_lossy(&head[..read]).into_owned();
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
            tokio::io::AsyncWriteExt::write_all(&mut socket, answer.as_bytes())
                .await
                .unwrap();
            let _ = sender.send(head);
        })
    });
    let mut config = otlp(1.0);
    config.endpoint = endpoint;
    config
        .headers
        .insert("x-test-header".into(), "present".into());
    let exporter =
        crate::telemetry::export::span_exporter(&config, tokio::runtime::Handle::current())
            .unwrap();
    let provider = provider(exporter, &config);
    let logs = Buffer::default();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(move || logs.clone())
        .boxed();
    tracing::subscriber::with_default(subscriber(fmt, EnvFilter::new("warn"), &provider), || {
        let _run = otel_span_for_test("invoke_agent lead").entered();
    });
    // force_flush blocks until the batch thread's export (spawned on this runtime) ends.
    let flushed = tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap();
    assert!(flushed.is_ok(), "{flushed:?}");
    let head = tokio::time::timeout(std::time::Duration::from_secs(10), received)
        .await
        .unwrap()
        .unwrap();
    drop(server);
    assert!(head.starts_with("POST /v1/traces HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-test-header: present"),
        "{head}"
    );
    assert!(head.contains("application/x-protobuf"), "{head}");
}
