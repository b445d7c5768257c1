//! Unit tests of the Anthropic request conversion and stream decoding.
use serde_json::json;

use super::*;
use crate::model::anthropic_request::{DEFAULT_MAX_TOKENS, convert_messages};
use crate::model::http::{decode_events, sse_event};
use crate::model::{ToolChoice, ToolSpec};
use antler_store::messages::{HumanMessage, ImageData, Message, ToolMessage};

fn config(supports_thinking: bool) -> ModelConfig {
    ModelConfig {
        name: "claude".into(),
        provider: crate::config::Provider::Anthropic,
        model: "claude-x".into(),
        base_url: "https://api.anthropic.com/v1/".into(),
        temperature: Some(0.3),
        supports_thinking,
        ..Default::default()
    }
}

#[test]
fn history_merges_tool_results_and_echoes_signed_thinking() {
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "read_file".into(),
        args: json!({"path": id}),
        args_error: None,
    };
    let request = ModelRequest {
        system: Some("be brief".into()),
        messages: vec![
            Message::system("extra context"),
            Message::Human(HumanMessage {
                content: "see".into(),
                images: vec![ImageData {
                    mime_type: "image/jpeg".into(),
                    base64: "BBB=".into(),
                }],
                ..Default::default()
            }),
            Message::Ai(AiMessage {
                reasoning: Some("think".into()),
                reasoning_signature: Some("sig".into()),
                tool_calls: vec![call("a"), call("b")],
                ..Default::default()
            }),
            Message::Tool(ToolMessage::success(&call("a"), "A")),
            Message::Tool(ToolMessage::error(&call("b"), "no such file")),
            Message::Ai(AiMessage::default()),
            Message::human("thanks"),
        ]
        .into(),
        ..Default::default()
    };
    let (system, messages) = convert_messages(&request);
    assert_eq!(
        system.map(|s| s.to_string()).as_deref(),
        Some("be brief\n\nextra context")
    );
    // What the system-message coalescing leaves: the messages in place, marked merged.
    let mut merged = request.clone();
    merged.system_merged = true;
    let (merged_system, merged_messages) = convert_messages(&merged);
    assert_eq!(
        merged_system.map(|s| s.to_string()).as_deref(),
        Some("be brief\n\nextra context"),
        "merged system messages are not written twice"
    );
    assert_eq!(
        serde_json::to_value(&merged_messages).unwrap(),
        serde_json::to_value(&messages).unwrap()
    );
    let messages = serde_json::to_value(&messages).unwrap();
    let messages = messages.as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[0]["content"][0]["source"]["media_type"],
        "image/jpeg"
    );
    assert_eq!(messages[0]["content"][1]["text"], "see");
    let ai = &messages[1]["content"];
    assert_eq!(
        ai[0],
        json!({"type": "thinking", "thinking": "think", "signature": "sig"})
    );
    assert_eq!(ai[1]["type"], "tool_use");
    assert_eq!(ai[2]["input"], json!({"path": "b"}));
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].get("is_error"), None);
    assert_eq!(results[1]["is_error"], true);
    assert_eq!(messages[3], json!({"role": "user", "content": "thanks"}));
}

fn body_of(config: &ModelConfig, request: &ModelRequest) -> Value {
    serde_json::from_slice(&request_body(config, request)).unwrap()
}

#[test]
fn body_enables_thinking_only_when_supported_and_requested() {
    let request = ModelRequest {
        thinking_enabled: true,
        tools: vec![std::sync::Arc::new(ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}).into(),
        })]
        .into(),
        tool_choice: Some(ToolChoice::Required),
        ..Default::default()
    };
    let body = body_of(&config(true), &request);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS);
    assert!(body.get("temperature").is_none());
    assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    let plain = body_of(&config(false), &request);
    assert!(plain.get("thinking").is_none());
    assert_eq!(plain["temperature"], 0.3);
    let model = AnthropicModel::new(&config(false), reqwest::Client::new());
    assert_eq!(model.url, "https://api.anthropic.com/v1/messages");
}

fn event(name: &str, data: Value) -> Event {
    sse_event(name, &data.to_string())
}

#[test]
fn decoder_assembles_blocks_usage_and_stop_reason() {
    let delta = |index: usize, delta: Value| {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    };
    let mut decoder = EventDecoder::new("claude");
    let events = decode_events(
        &mut decoder,
        [
            event(
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "cache_read_input_tokens": 3, "output_tokens": 1}}}),
            ),
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            ),
            delta(0, json!({"type": "thinking_delta", "thinking": "hmm"})),
            delta(0, json!({"type": "signature_delta", "signature": "s1"})),
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            event("ping", json!({"type": "ping"})),
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
            ),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "{\"a\":"}),
            ),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "[1]}"}),
            ),
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
            ),
            event("message_stop", json!({"type": "message_stop"})),
        ],
    );
    assert_eq!(
        events[0].as_ref().unwrap(),
        &ModelEvent::ReasoningDelta("hmm".into())
    );
    let Ok(ModelEvent::Completed(message)) = events.last().unwrap() else {
        panic!("expected completion, got {events:?}");
    };
    assert_eq!(message.tool_calls[0].args, json!({"a": [1]}));
    assert_eq!(message.reasoning_signature.as_deref(), Some("s1"));
    assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
    let usage = message.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (15, 9, 24)
    );
    assert_eq!(usage.cached_input_tokens, 3);
}
