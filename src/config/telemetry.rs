//! The `telemetry` config section: OpenTelemetry traces of runs, off until `otlp` is set.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TelemetryConfig {
    /// Where traces go (an OTLP collector, Jaeger, Tempo, Langfuse's OTLP endpoint); unset = no
    /// traces, and no cost.
    pub otlp: Option<OtlpConfig>,
    /// Put message text, prompts, tool arguments and user ids into spans. Off: spans carry
    /// names, models, token counts, durations and stop reasons only.
    pub include_content: bool,
}

/// How the OTLP exporter reaches its collector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct OtlpConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318` (HTTP; `/v1/traces` is added) or
    /// `http://127.0.0.1:4317` (gRPC).
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// Sent with every export (e.g. `Authorization: Basic …` for Langfuse); values are secrets
    /// and may be `$ENV` references.
    pub headers: BTreeMap<String, String>,
    /// The fraction of runs traced, 0.0–1.0.
    pub sample_ratio: f64,
    /// `service.name` of the exported resource.
    pub service_name: String,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            protocol: OtlpProtocol::HttpProtobuf,
            headers: BTreeMap::new(),
            sample_ratio: 1.0,
            service_name: "antler".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OtlpProtocol {
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    #[serde(rename = "grpc")]
    Grpc,
}
