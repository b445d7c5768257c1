//! A fake OpenTelemetry collector: OTLP/HTTP `POST /v1/traces` with a protobuf
//! `ExportTraceServiceRequest`, decoded with the OpenTelemetry proto types and kept for the
//! test, answered with an empty `ExportTraceServiceResponse` as a collector does.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

/// One exported span, flattened out of its resource and scope.
#[derive(Clone, Debug)]
pub struct CollectedSpan {
    pub name: String,
    /// Lowercase hex, as logs print it.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// Values as text; arrays as `[a, b]`.
    pub attributes: BTreeMap<String, String>,
    /// `status.code`: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// The resource's `service.name`.
    pub service_name: String,
}

impl CollectedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// One export as it arrived.
#[derive(Clone, Debug)]
pub struct CollectedExport {
    pub headers: BTreeMap<String, String>,
    /// The protobuf body, undecoded.
    pub body: Bytes,
    pub request: ExportTraceServiceRequest,
}

#[derive(Default)]
struct Collected {
    exports: Vec<CollectedExport>,
}

#[derive(Clone, Default)]
struct Shared {
    collected: Arc<Mutex<Collected>>,
    news: Arc<tokio::sync::Notify>,
}

/// The fake collector on 127.0.0.1.
pub struct FakeCollector {
    addr: SocketAddr,
    shared: Shared,
}

impl FakeCollector {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let router = Router::new()
            .route("/v1/traces", post(export))
            .with_state(shared.clone());
        let addr = crate::serve(router).await;
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT`, for `telemetry.otlp.endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn exports(&self) -> Vec<CollectedExport> {
        self.shared.collected.lock().unwrap().exports.clone()
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<CollectedSpan> {
        self.exports()
            .iter()
            .flat_map(|export| flatten(&export.request))
            .collect()
    }

    /// Waits until a span named `name` arrived and returns all spans then; panics after
    /// `limit`.
    pub async fn wait_for_span(&self, name: &str, limit: Duration) -> Vec<CollectedSpan> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let news = self.shared.news.notified();
            let spans = self.spans();
            if spans.iter().any(|span| span.name == name) {
                return spans;
            }
            if tokio::time::timeout_at(deadline, news).await.is_err() {
                let names: Vec<String> = spans.into_iter().map(|span| span.name).collect();
                panic!("timed out waiting for a span named {name:?}; got {names:?}");
            }
        }
    }
}

async fn export(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let request = match ExportTraceServiceRequest::decode(body.clone()) {
        Ok(request) => request,
        Err(error) => {
            return (StatusCode::BAD_REQUEST, format!("not an export: {error}")).into_response();
        }
    };
    let headers = headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect();
    shared
        .collected
        .lock()
        .unwrap()
        .exports
        .push(CollectedExport {
            headers,
            body,
            request,
        });
    shared.news.notify_waiters();
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

fn flatten(request: &ExportTraceServiceRequest) -> Vec<CollectedSpan> {
    let mut spans = Vec::new();
    for resource_spans in &request.resource_spans {
        let service_name = resource_spans
            .resource
            .as_ref()
            .and_then(|resource| {
                resource
                    .attributes
                    .iter()
                    .find(|kv| kv.key == "service.name")
            })
            .map(|kv| value_text(kv.value.as_ref()))
            .unwrap_or_default();
        for scope_spans in &resource_spans.scope_spans {
            for span in &scope_spans.spans {
                spans.push(CollectedSpan {
                    name: span.name.clone(),
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    attributes: attributes(&span.attributes),
                    status_code: span.status.as_ref().map_or(0, |status| status.code),
                    service_name: service_name.clone(),
                });
            }
        }
    }
    spans
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), value_text(kv.value.as_ref())))
        .collect()
}

fn value_text(value: Option<&AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
        Some(any_value::Value::IntValue(number)) => number.to_string(),
        Some(any_value::Value::DoubleValue(number)) => number.to_string(),
        Some(any_value::Value::ArrayValue(array)) => {
            let items: Vec<String> = array.values.iter().map(|v| value_text(Some(v))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
