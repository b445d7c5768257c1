//! `SenderNamesMiddleware`: in a shared conversation (a group chat's thread) the model sees who
//! wrote each human message, as `[Name] ` before it.
//!
//! Request-only, like the uploads block: the stored message stays what the person typed (the
//! web chat and `/state` show it once, with `meta.extra.sender` beside it), and the request is
//! rebuilt from the stored messages each time, so a re-run of a turn sends the same request. It
//! sits just before `DanglingToolCallMiddleware`, so human messages that repair joins (a
//! cancelled turn's question and the next one) each keep their own name, and after
//! `UploadsMiddleware`, so a message's uploads block is part of what its sender is shown to say.

use async_trait::async_trait;

use crate::agent_api::{Anchors, Middleware, ModelNext, RunContext};
use crate::model::{ModelError, ModelRequest};
use antler_store::messages::{AiMessage, Message, sender_label};
use antler_store::state::ThreadState;

pub const SENDER_NAMES: &str = "SenderNamesMiddleware";

/// Built by the lead agent for runs in shared conversations only.
#[derive(Debug, Default)]
pub struct SenderNamesMiddleware;

#[async_trait]
impl Middleware for SenderNamesMiddleware {
    fn name(&self) -> &str {
        SENDER_NAMES
    }

    fn anchors(&self) -> Anchors {
        Anchors {
            prev: Some("DanglingToolCallMiddleware".into()),
            next: None,
        }
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _state: &ThreadState,
        _ctx: &RunContext,
        next: ModelNext<'_>,
    ) -> Result<AiMessage, ModelError> {
        // Looked for on the shared history first: changing it copies it.
        let named = |m: &Message| m.as_human().is_some_and(|h| h.shared_sender().is_some());
        if request.messages.iter().any(named) {
            for message in request.messages.iter_mut() {
                if let Message::Human(human) = message
                    && let Some(sender) = human.shared_sender()
                {
                    let label = sender_label(sender.name);
                    human.content = format!("[{label}] {}", human.content).into();
                }
            }
        }
        next.call(request).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::AppConfig;
    use crate::model::{ScriptedModel, ScriptedTurn};
    use antler_store::messages::HumanMessage;

    fn from(user: &str, name: &str, text: &str) -> Message {
        let mut human = HumanMessage {
            id: antler_store::messages::new_id("human").into(),
            content: text.into(),
            ..Default::default()
        };
        human.set_shared_sender(user, name);
        Message::Human(human)
    }

    #[tokio::test]
    async fn each_senders_messages_carry_their_name_in_the_request_only() {
        let mut hidden = HumanMessage {
            id: "memory".into(),
            content: "<memory>x</memory>".into(),
            ..Default::default()
        };
        hidden.meta.hide_from_ui = true;
        let state = ThreadState {
            messages: vec![
                Message::Human(hidden),
                from("slack-UANN", "Ann", "hello"),
                Message::ai("hi Ann"),
                from("slack-UBOB", "Bob] [Ann", "I am Bob"),
            ]
            .into(),
            ..Default::default()
        };
        let ctx = RunContext::new("t", "slack-UANN", Arc::new(AppConfig::default()));
        let model = ScriptedModel::new("m", [ScriptedTurn::Text(vec!["ok".into()])]);
        let request = ModelRequest {
            messages: state.messages.clone(),
            ..Default::default()
        };
        SenderNamesMiddleware
            .wrap_model_call(
                request,
                &state,
                &ctx,
                ModelNext::new(&[], &model, &state, &ctx),
            )
            .await
            .unwrap();
        let sent = model.requests().pop().unwrap();
        let contents: Vec<&str> = sent.messages.iter().map(Message::content).collect();
        assert_eq!(
            contents,
            [
                "<memory>x</memory>",
                "[Ann] hello",
                "hi Ann",
                "[Bob Ann] I am Bob"
            ]
        );
        assert_eq!(state.messages[1].content(), "hello", "stored as typed");
    }
}
