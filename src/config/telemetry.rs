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

impl TelemetryConfig {
    /// Problems with `telemetry.otlp`, each naming its key.
    pub fn problems(&self) -> Vec<crate::config::ConfigProblem> {
        use crate::config::ConfigProblem;
        let Some(otlp) = &self.otlp else {
            return Vec::new();
        };
        let key = |name: &str| format!("telemetry.otlp.{name}");
        let mut problems = Vec::new();
        let endpoint = otlp.endpoint.trim();
        let example = match otlp.protocol {
            OtlpProtocol::HttpProtobuf => "http://127.0.0.1:4318",
            OtlpProtocol::Grpc => "http://127.0.0.1:4317",
        };
        if endpoint.is_empty() {
            problems.push(ConfigProblem::new(
                key("endpoint"),
                format!(
                    "traces are on but no collector is set: give its URL, e.g. {example}, or \
                     remove telemetry.otlp to turn traces off"
                ),
            ));
        } else {
            match reqwest::Url::parse(endpoint) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {}
                _ => problems.push(ConfigProblem::new(
                    key("endpoint"),
                    format!("`{endpoint}` is not an http:// or https:// URL, e.g. {example}"),
                )),
            }
        }
        if !(0.0..=1.0).contains(&otlp.sample_ratio) {
            problems.push(ConfigProblem::new(
                key("sample_ratio"),
                format!(
                    "{} is not a fraction: give a number from 0.0 (no runs traced) to 1.0 (every \
                     run)",
                    otlp.sample_ratio
                ),
            ));
        }
        if otlp.service_name.trim().is_empty() {
            problems.push(ConfigProblem::new(
                key("service_name"),
                "give the name traces are filed under, e.g. antler",
            ));
        }
        for name in otlp.headers.keys() {
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            if !valid {
                problems.push(ConfigProblem::new(
                    key(&format!("headers.{name}")),
                    "is not a valid header name: use letters, digits, `-` and `_`",
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn otlp(endpoint: &str, sample_ratio: f64) -> TelemetryConfig {
        TelemetryConfig {
            otlp: Some(OtlpConfig {
                endpoint: endpoint.into(),
                sample_ratio,
                ..OtlpConfig::default()
            }),
            include_content: false,
        }
    }

    fn problems(config: &TelemetryConfig) -> Vec<(String, String)> {
        config
            .problems()
            .into_iter()
            .map(|p| (p.path, p.message))
            .collect()
    }

    #[test]
    fn telemetry_is_off_and_valid_by_default() {
        assert!(TelemetryConfig::default().problems().is_empty());
        assert!(problems(&otlp("http://127.0.0.1:4318", 1.0)).is_empty());
        assert!(problems(&otlp("https://cloud.langfuse.com/api/public/otel", 0.0)).is_empty());
    }

    #[test]
    fn telemetry_endpoint_must_be_an_http_url_and_the_ratio_a_fraction() {
        let found = problems(&otlp("", 1.0));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "telemetry.otlp.endpoint");
        assert!(found[0].1.contains("http://127.0.0.1:4318"), "{found:?}");

        let found = problems(&otlp("collector:4317", 1.5));
        let keys: Vec<&str> = found.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(
            keys,
            ["telemetry.otlp.endpoint", "telemetry.otlp.sample_ratio"]
        );
        assert!(found[0].1.contains("`collector:4317`"), "{found:?}");
        assert!(found[1].1.contains("from 0.0"), "{found:?}");
        assert_eq!(problems(&otlp("ftp://x", -0.1)).len(), 2);
    }

    #[test]
    fn telemetry_header_names_are_checked_but_values_never_shown() {
        let mut config = otlp("http://127.0.0.1:4318", 1.0);
        if let Some(otlp) = config.otlp.as_mut() {
            otlp.headers
                .insert("Bad Header".into(), "Basic c2VjcmV0".into());
            otlp.headers
                .insert("Authorization".into(), "Basic c2VjcmV0".into());
        }
        let found = problems(&config);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "telemetry.otlp.headers.Bad Header");
        assert!(!found[0].1.contains("c2VjcmV0"), "{found:?}");
    }
}
