//! `SystemMessageCoalescingMiddleware`: one leading system prompt per request.
//!
//! Strict providers (Anthropic, some OpenAI-compatible servers) reject system messages in the
//! middle of a conversation; other middlewares add them (date reminders). Request-only.

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{Middleware, ModelNext};
use crate::messages::{AiMessage, Message};
use crate::model::{ModelError, ModelRequest};
use crate::state::ThreadState;

#[derive(Debug, Default)]
pub struct SystemMessageCoalescingMiddleware;

impl SystemMessageCoalescingMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// Merges `request.system` and every system message into `request.system`, in order; the
/// system messages stay in `request.messages`, marked merged (`system_merged`), so the history
/// is not copied to leave them out. Providers then write only the merged prompt.
pub fn coalesce_system_messages(request: &mut ModelRequest) {
    if request.system_merged
        || !request
            .messages
            .iter()
            .any(|m| matches!(m, Message::System(_)))
    {
        return;
    }
    let earlier = request.system.take();
    let system_texts = request.messages.iter().filter_map(|m| match m {
        Message::System(system) => Some(system.content.as_str()),
        _ => None,
    });
    let parts: Vec<&str> = earlier
        .as_deref()
        .into_iter()
        .chain(system_texts)
        .filter(|p| !p.trim().is_empty())
        .collect();
    request.system = (!parts.is_empty()).then(|| parts.join("\n\n"));
    request.system_merged = true;
}

#[async_trait]
impl Middleware for SystemMessageCoalescingMiddleware {
    fn name(&self) -> &str {
        "SystemMessageCoalescingMiddleware"
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        coalesce_system_messages(&mut request);
        next.call(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_all_system_text_into_the_prompt() {
        let mut request = ModelRequest {
            system: Some("base".into()),
            messages: vec![
                Message::system("<system-reminder>date</system-reminder>"),
                Message::human("hi"),
                Message::system("late note"),
                Message::system("  "),
            ]
            .into(),
            ..Default::default()
        };
        let history = request.messages.clone();
        coalesce_system_messages(&mut request);
        assert_eq!(
            request.system.as_deref(),
            Some("base\n\n<system-reminder>date</system-reminder>\n\nlate note")
        );
        assert!(request.system_merged);
        assert!(
            request.messages.shares_list_with(&history),
            "the history is not copied"
        );
        let merged = request.clone();
        coalesce_system_messages(&mut request);
        assert_eq!(request, merged, "merging twice changes nothing");
    }

    #[test]
    fn leaves_requests_without_system_messages_alone() {
        let mut request = ModelRequest {
            system: Some("base".into()),
            messages: vec![Message::human("hi")].into(),
            ..Default::default()
        };
        let before = request.clone();
        coalesce_system_messages(&mut request);
        assert_eq!(request, before);
    }
}
