//! `SystemMessageCoalescingMiddleware`: one leading system prompt per request.
//!
//! Strict providers (Anthropic, some OpenAI-compatible servers) reject system messages in the
//! middle of a conversation; other middlewares add them (date reminders). Request-only.

use async_trait::async_trait;

use crate::agent_api::RunContext;
use crate::agent_api::{Middleware, ModelNext};
use crate::model::{ModelError, ModelRequest};
use antler_store::messages::{AiMessage, Message};
use antler_store::state::ThreadState;

#[derive(Debug, Default)]
pub struct SystemMessageCoalescingMiddleware;

impl SystemMessageCoalescingMiddleware {
    pub fn new() -> Self {
        Self
    }
}

/// Merges every system message into the system prompt, in order: they stay in
/// `request.messages`, marked merged (`system_merged`), so the history is not copied to leave
/// them out, and the prompt is not joined into a copy either. Providers write the merged prompt
/// from `ModelRequest::system_parts` and leave those messages out of the conversation.
pub fn coalesce_system_messages(request: &mut ModelRequest) {
    request.system_merged |= request
        .messages
        .iter()
        .any(|m| matches!(m, Message::System(_)));
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
    use std::sync::Arc;

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
        let prompt = request.system.clone().unwrap();
        coalesce_system_messages(&mut request);
        assert!(request.system_merged);
        assert_eq!(
            request.system_parts().collect::<Vec<_>>(),
            [
                "base",
                "<system-reminder>date</system-reminder>",
                "late note"
            ]
        );
        assert!(
            Arc::ptr_eq(&prompt, request.system.as_ref().unwrap()),
            "the prompt is not copied"
        );
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
