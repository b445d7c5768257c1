//! The record of a failed turn: an AI message that closes the turn in the thread's history.
//!
//! A run that fails after the person's message was saved would otherwise leave that message
//! unanswered, and the next run would put a second user message right behind it. Chat templates
//! that require strict user/assistant alternation (common on llama.cpp and vLLM) then reject
//! every later request of the thread. The record is hidden from chat surfaces (they already got
//! the run's error event) and carries the failure in `meta.extra["turn_failed"]`, so a surface
//! may still show it as an error.

use serde_json::json;

use crate::agent_api::ErrorCode;
use antler_store::messages::{AiMessage, Message, MessageMeta, new_id};

/// Key in the AI message's `meta.extra`: `{"code": …, "message": …}`.
pub const TURN_FAILED_KEY: &str = "turn_failed";

/// The record closing a failed turn, or `None` when the turn already ends with an answer (a
/// failure after the final answer, e.g. in an `after_agent` hook, leaves nothing open).
pub(crate) fn failed_turn_record(
    messages: &[Message],
    code: ErrorCode,
    message: &str,
) -> Option<AiMessage> {
    let answered = matches!(messages.last(), Some(Message::Ai(ai)) if ai.tool_calls.is_empty());
    if answered || messages.is_empty() {
        return None;
    }
    let mut meta = MessageMeta {
        hide_from_ui: true,
        ..Default::default()
    };
    meta.extra.insert(
        TURN_FAILED_KEY.to_string(),
        json!({"code": code, "message": message}),
    );
    Some(AiMessage {
        id: new_id("ai").into(),
        // What the model reads on later turns: short, without endpoint details.
        content: format!(
            "[This turn failed before an answer was given ({code}). If the user asks again, \
             answer the request anew.]"
        )
        .into(),
        meta,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use antler_store::messages::ToolCall;

    fn record(messages: &[Message]) -> Option<AiMessage> {
        let detail = "could not reach model 'm' at http://127.0.0.1:1/v1";
        failed_turn_record(messages, ErrorCode::ModelUnavailable, detail)
    }

    #[test]
    fn an_unanswered_question_gets_a_hidden_record() {
        let record = record(&[Message::human("hi")]).unwrap();
        assert!(record.meta.hide_from_ui);
        assert!(record.tool_calls.is_empty());
        assert_eq!(
            record.meta.extra[TURN_FAILED_KEY]["code"],
            "model_unavailable"
        );
        assert!(record.content.contains("model_unavailable"));
        assert!(!record.content.contains("127.0.0.1"), "{}", record.content);
    }

    #[test]
    fn open_tool_calls_need_a_record_and_a_final_answer_does_not() {
        let calling = Message::Ai(AiMessage {
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "ls".into(),
                args: serde_json::json!({}),
                args_error: None,
            }],
            ..Default::default()
        });
        assert!(record(&[Message::human("hi"), calling]).is_some());
        let answered = [Message::human("hi"), Message::ai("hello")];
        assert!(record(&answered).is_none());
        assert!(record(&[]).is_none());
    }
}
