//! `GuardrailMiddleware`: asks a [`GuardrailProvider`] before every tool call and turns a denied
//! call into an error tool message, so the model can choose another tool and the run goes on.
//!
//! The built-in provider is an allowlist/denylist from `guardrails:` in the config, followed by
//! an HTTP policy service when `guardrails.policy_url` is set ([`PolicyServiceProvider`]). When
//! a provider fails, `fail_closed` (the default) denies the call; otherwise it is allowed with a
//! warning in the log.
//!
//! [`PolicyServiceProvider`]: policy::PolicyServiceProvider

mod policy;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;

use crate::agent_api::{Middleware, ToolNext, ToolResult};
use crate::agent_api::{ToolContext, ToolError};
use crate::config::GuardrailsConfig;
use antler_store::messages::{ToolCall, ToolMessage};

pub use policy::{POLICY_TIMEOUT, PolicyServiceProvider};

/// A provider's verdict on one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// `reason` is shown to the model; write it as a clause without a final full stop.
    Deny {
        reason: String,
    },
}

/// Why a provider could not decide.
#[derive(Debug, thiserror::Error)]
pub enum GuardrailError {
    #[error("guardrail provider {provider} failed: {detail}")]
    Failed { provider: String, detail: String },
}

/// Decides whether a tool call may run. Implementations may call out (a policy service), so the
/// check is async; an `Err` is handled by the middleware's `fail_closed` setting.
#[async_trait]
pub trait GuardrailProvider: Send + Sync {
    fn name(&self) -> &str;
    async fn check(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
    ) -> Result<Decision, GuardrailError>;
}

/// The built-in provider: the denylist wins, then an empty allowlist allows everything.
#[derive(Clone, Debug, Default)]
pub struct AllowlistProvider {
    allowed: HashSet<String>,
    denied: HashSet<String>,
}

impl AllowlistProvider {
    pub fn new(
        allowed: impl IntoIterator<Item = String>,
        denied: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            allowed: allowed.into_iter().collect(),
            denied: denied.into_iter().collect(),
        }
    }

    pub fn from_config(config: &GuardrailsConfig) -> Self {
        Self::new(
            config.allowed_tools.iter().cloned(),
            config.denied_tools.iter().cloned(),
        )
    }

    pub fn decide(&self, tool: &str) -> Decision {
        if self.denied.contains(tool) {
            Decision::Deny {
                reason: "it is on the guardrails denylist".into(),
            }
        } else if !self.allowed.is_empty() && !self.allowed.contains(tool) {
            Decision::Deny {
                reason: "it is not on the guardrails allowlist".into(),
            }
        } else {
            Decision::Allow
        }
    }
}

#[async_trait]
impl GuardrailProvider for AllowlistProvider {
    fn name(&self) -> &str {
        "allowlist"
    }

    async fn check(
        &self,
        call: &ToolCall,
        _ctx: &ToolContext<'_>,
    ) -> Result<Decision, GuardrailError> {
        Ok(self.decide(&call.name))
    }
}

/// The text the model reads for a denied call.
pub fn denied_text(tool: &str, reason: &str) -> String {
    format!(
        "Error: tool '{tool}' is not allowed here: {reason}. Choose another tool or answer without it."
    )
}

pub struct GuardrailMiddleware {
    provider: Arc<dyn GuardrailProvider>,
    fail_closed: bool,
}

impl GuardrailMiddleware {
    pub fn new(provider: Arc<dyn GuardrailProvider>, fail_closed: bool) -> Self {
        Self {
            provider,
            fail_closed,
        }
    }

    /// The built-in guardrail of `guardrails:`: the lists, then the policy service if any.
    pub fn from_config(config: &GuardrailsConfig) -> Self {
        let local = AllowlistProvider::from_config(config);
        let provider: Arc<dyn GuardrailProvider> = match &config.policy_url {
            Some(url) => Arc::new(PolicyServiceProvider::new(local, url)),
            None => Arc::new(local),
        };
        Self::new(provider, config.fail_closed)
    }

    async fn decide(&self, call: &ToolCall, ctx: &ToolContext<'_>) -> Decision {
        match self.provider.check(call, ctx).await {
            Ok(decision) => decision,
            Err(error) if self.fail_closed => {
                tracing::warn!(tool = %call.name, %error, "Guardrail failed; denying the call (fail_closed)");
                Decision::Deny {
                    reason: "the guardrail could not check this call".into(),
                }
            }
            Err(error) => {
                tracing::warn!(tool = %call.name, %error, "Guardrail failed; allowing the call because fail_closed is off");
                Decision::Allow
            }
        }
    }
}

#[async_trait]
impl Middleware for GuardrailMiddleware {
    fn name(&self) -> &str {
        "GuardrailMiddleware"
    }

    fn wraps_model_call(&self) -> bool {
        false
    }

    async fn wrap_tool_call(
        &self,
        call: &ToolCall,
        ctx: &ToolContext<'_>,
        next: ToolNext<'_>,
    ) -> Result<ToolResult, ToolError> {
        match self.decide(call, ctx).await {
            Decision::Allow => next.call(call, ctx).await,
            Decision::Deny { reason } => {
                crate::metrics::guardrail_denial(&call.name);
                tracing::info!(tool = %call.name, tool_call_id = %call.id, %reason, "Guardrail denied a tool call");
                Ok(ToolResult::message(ToolMessage::error(
                    call,
                    denied_text(&call.name, &reason),
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::MiddlewareRef;
    use crate::agent_api::RunContext;
    use crate::agent_api::{ToolOutput, ToolRef};
    use crate::config::AppConfig;
    use crate::tools::FnTool;
    use antler_store::messages::ToolStatus;
    use antler_store::state::ThreadState;
    use serde_json::json;

    struct Broken;

    #[async_trait]
    impl GuardrailProvider for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        async fn check(
            &self,
            _call: &ToolCall,
            _ctx: &ToolContext<'_>,
        ) -> Result<Decision, GuardrailError> {
            Err(GuardrailError::Failed {
                provider: "broken".into(),
                detail: "policy service unreachable".into(),
            })
        }
    }

    async fn run(middleware: GuardrailMiddleware, tool: &str) -> ToolMessage {
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
            args: json!({}),
            args_error: None,
        };
        let chain: Vec<MiddlewareRef> = vec![Arc::new(middleware)];
        let tools: Vec<ToolRef> = vec![Arc::new(FnTool::new("echo", "echoes", |_args| async {
            Ok(ToolOutput::text("ran"))
        }))];
        ToolNext::new(&chain, &tools)
            .call(&call, &ctx)
            .await
            .unwrap()
            .message
    }

    #[test]
    fn denylist_wins_and_empty_allowlist_allows_all() {
        let open = AllowlistProvider::new([], ["bash".to_string()]);
        assert_eq!(open.decide("ls"), Decision::Allow);
        assert!(matches!(open.decide("bash"), Decision::Deny { .. }));
        let strict =
            AllowlistProvider::new(["ls".to_string(), "bash".to_string()], ["bash".to_string()]);
        assert_eq!(strict.decide("ls"), Decision::Allow);
        assert_eq!(
            strict.decide("bash"),
            Decision::Deny {
                reason: "it is on the guardrails denylist".into()
            }
        );
        assert_eq!(
            strict.decide("write_file"),
            Decision::Deny {
                reason: "it is not on the guardrails allowlist".into()
            }
        );
    }

    #[tokio::test]
    async fn denied_call_is_an_error_message_and_allowed_call_runs() {
        let config = GuardrailsConfig {
            enabled: true,
            denied_tools: vec!["echo".into()],
            ..Default::default()
        };
        let denied = run(GuardrailMiddleware::from_config(&config), "echo").await;
        assert_eq!(denied.status, ToolStatus::Error);
        assert_eq!(
            denied.content,
            "Error: tool 'echo' is not allowed here: it is on the guardrails denylist. Choose another tool or answer without it."
        );
        let allowed = run(
            GuardrailMiddleware::from_config(&GuardrailsConfig::default()),
            "echo",
        )
        .await;
        assert_eq!(allowed.content, "ran");
    }

    #[tokio::test]
    async fn provider_failure_denies_when_fail_closed_and_allows_otherwise() {
        let closed = run(GuardrailMiddleware::new(Arc::new(Broken), true), "echo").await;
        assert_eq!(closed.status, ToolStatus::Error);
        assert!(
            closed
                .content
                .contains("not allowed here: the guardrail could not check this call."),
            "{}",
            closed.content
        );
        let open = run(GuardrailMiddleware::new(Arc::new(Broken), false), "echo").await;
        assert_eq!(open.status, ToolStatus::Success);
        assert_eq!(open.content, "ran");
    }
}
