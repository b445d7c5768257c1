//! `PolicyServiceProvider`: the guardrail asks an HTTP policy service about each tool call
//! (`guardrails.policy_url`), after the local allowlist/denylist.
//!
//! The service gets `POST {policy_url}` with `{"tool", "args", "tool_call_id", "thread_id",
//! "user_id", "agent_name"}` and answers `{"allow": true}` or `{"allow": false, "reason": "…"}`.
//! An unreachable service, a timeout, a non-2xx status or an answer without `allow` is a provider
//! failure, and `guardrails.fail_closed` decides what happens to the call.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use crate::agent_api::ToolContext;
use crate::middleware::guardrail::{
    AllowlistProvider, Decision, GuardrailError, GuardrailProvider,
};
use antler_store::messages::ToolCall;

/// One check may take this long before it counts as a failure.
pub const POLICY_TIMEOUT: Duration = Duration::from_secs(10);

pub struct PolicyServiceProvider {
    local: AllowlistProvider,
    url: String,
    client: Result<reqwest::Client, String>,
}

#[derive(Deserialize)]
struct Verdict {
    allow: bool,
    #[serde(default)]
    reason: Option<String>,
}

impl PolicyServiceProvider {
    /// The local lists are checked first: a call they deny never reaches the service.
    pub fn new(local: AllowlistProvider, url: impl Into<String>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(POLICY_TIMEOUT)
            .user_agent(concat!("antler/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| error.to_string());
        Self {
            local,
            url: url.into(),
            client,
        }
    }

    fn failed(&self, detail: impl Into<String>) -> GuardrailError {
        GuardrailError::Failed {
            provider: format!("policy service {}", self.url),
            detail: detail.into(),
        }
    }
}

#[async_trait]
impl GuardrailProvider for PolicyServiceProvider {
    fn name(&self) -> &str {
        "policy_service"
    }

    async fn check(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
    ) -> Result<Decision, GuardrailError> {
        if let denied @ Decision::Deny { .. } = self.local.decide(&call.name) {
            return Ok(denied);
        }
        let client = self.client.as_ref().map_err(|e| self.failed(e.clone()))?;
        let body = json!({
            "tool": call.name,
            "args": call.args,
            "tool_call_id": call.id,
            "thread_id": ctx.run.thread_id,
            "user_id": ctx.run.users.speaker,
            "agent_name": ctx.run.agent_name,
        });
        let response = client
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .map_err(|e| self.failed(format!("the request failed: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.failed(format!("it answered HTTP {status}")));
        }
        let verdict: Verdict = response.json().await.map_err(|e| {
            self.failed(format!(
                "its answer is not {{\"allow\": true|false, \"reason\": \"…\"}}: {e}"
            ))
        })?;
        Ok(if verdict.allow {
            Decision::Allow
        } else {
            let reason = verdict
                .reason
                .map(|r| r.trim().trim_end_matches('.').to_string())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "the policy service denied it".into());
            Decision::Deny { reason }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::Json;
    use axum::routing::post;
    use serde_json::Value;

    use super::*;
    use crate::agent_api::RunContext;
    use crate::config::AppConfig;
    use antler_store::state::ThreadState;

    /// A policy service on 127.0.0.1 that denies `bash` and allows the rest.
    async fn policy_service() -> String {
        let app = axum::Router::new().route(
            "/check",
            post(|Json(body): Json<Value>| async move {
                match body["tool"].as_str() {
                    Some("bash") => Json(json!({"allow": false, "reason": "no shell today."})),
                    Some("garbled") => Json(json!({"verdict": "yes"})),
                    _ => Json(json!({"allow": true})),
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/check")
    }

    async fn check(
        provider: &PolicyServiceProvider,
        tool: &str,
    ) -> Result<Decision, GuardrailError> {
        let run = RunContext::new("t", "u", Arc::new(AppConfig::default()));
        let state = ThreadState::default();
        let ctx = ToolContext {
            run: &run,
            state: &state,
            tool_call_id: "c1",
        };
        let call = ToolCall {
            id: "c1".into(),
            name: tool.into(),
            args: json!({"command": "ls"}),
            args_error: None,
        };
        provider.check(&call, &ctx).await
    }

    #[tokio::test]
    async fn the_service_decides_after_the_local_lists() {
        let local = AllowlistProvider::new([], ["write_file".to_string()]);
        let provider = PolicyServiceProvider::new(local, policy_service().await);
        assert_eq!(check(&provider, "ls").await.unwrap(), Decision::Allow);
        assert_eq!(
            check(&provider, "bash").await.unwrap(),
            Decision::Deny {
                reason: "no shell today".into()
            }
        );
        assert_eq!(
            check(&provider, "write_file").await.unwrap(),
            Decision::Deny {
                reason: "it is on the guardrails denylist".into()
            }
        );
        let garbled = check(&provider, "garbled").await.unwrap_err();
        assert!(
            garbled.to_string().contains("is not {\"allow\""),
            "{garbled}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_service_is_a_provider_failure() {
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/check", closed.local_addr().unwrap());
        drop(closed);
        let provider = PolicyServiceProvider::new(AllowlistProvider::default(), url.clone());
        let error = check(&provider, "ls").await.unwrap_err();
        assert!(error.to_string().contains(&url), "{error}");
    }
}
