//! A scripted Anthropic Messages server (`POST /v1/messages`): SSE with `event:` + `data:` lines.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::reply::{Reply, ReplyBody, StreamEnd, split_text};
use crate::sse::{sse_response, status_response, unscripted_response};
use crate::{SharedScript, scripting_api};

/// The signature the fake attaches to thinking blocks (clients must echo it back).
pub const FAKE_SIGNATURE: &str = "sig-fake-0001";

/// A fake Anthropic endpoint. `base_url()` has no `/v1`, like `https://api.anthropic.com`.
pub struct FakeAnthropic {
    addr: SocketAddr,
    script: SharedScript,
}

scripting_api!(FakeAnthropic);

impl FakeAnthropic {
    pub async fn start() -> Self {
        let script = SharedScript::default();
        let router = Router::new()
            .route("/v1/messages", post(handle))
            .with_state(script.clone());
        let addr = crate::serve(router).await;
        Self { addr, script }
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn handle(State(script): State<SharedScript>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(reply) = script.take("/v1/messages", &headers, &body) else {
        return unscripted_response();
    };
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = request["model"]
        .as_str()
        .unwrap_or("fake-claude")
        .to_string();
    let streaming = request["stream"].as_bool().unwrap_or(false);
    match &reply.body {
        ReplyBody::Status {
            status,
            body,
            retry_after,
            retry_after_ms,
            location,
        } => {
            let body = body.clone().unwrap_or_else(|| {
                json!({"type": "error", "error": {"type": "api_error", "message": format!("fake error {status}")}})
                    .to_string()
            });
            status_response(
                *status,
                body,
                *retry_after,
                *retry_after_ms,
                location.as_deref(),
            )
        }
        ReplyBody::Stream { chunks, .. } if streaming => {
            // message_start and ping, the thinking block (start, two deltas, stop), then the
            // text block's start come before the text chunks.
            let thinking = if reply.reasoning.is_some() { 4 } else { 0 };
            let hold = reply.hold_at(2 + thinking + 1, chunks.len());
            sse_response(frames(&reply, &model), reply.delay, hold)
        }
        ReplyBody::Stream { .. } => axum::Json(non_stream(&reply, &model)).into_response(),
    }
}

fn stop_reason(reply: &Reply, has_calls: bool) -> String {
    match reply.finish.as_deref() {
        Some("stop") => "end_turn".into(),
        Some("length") => "max_tokens".into(),
        Some("tool_calls") => "tool_use".into(),
        Some(other) => other.into(),
        None if has_calls => "tool_use".into(),
        None => "end_turn".into(),
    }
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn block_events(frames: &mut Vec<String>, index: usize, block: Value, deltas: Vec<Value>) {
    frames.push(event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    ));
    for delta in deltas {
        frames.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }
    frames.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
}

fn frames(reply: &Reply, model: &str) -> Vec<String> {
    let ReplyBody::Stream { chunks, calls, end } = &reply.body else {
        return Vec::new();
    };
    let (input, output) = reply.usage;
    let mut frames = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": 1}}}),
        ),
        event("ping", json!({"type": "ping"})),
    ];
    let mut index = 0;
    if let Some(reasoning) = &reply.reasoning {
        let deltas = vec![
            json!({"type": "thinking_delta", "thinking": reasoning}),
            json!({"type": "signature_delta", "signature": FAKE_SIGNATURE}),
        ];
        block_events(
            &mut frames,
            index,
            json!({"type": "thinking", "thinking": ""}),
            deltas,
        );
        index += 1;
    }
    if *end != StreamEnd::Complete {
        frames.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for text in chunks {
            frames.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
            ));
        }
        match end {
            StreamEnd::Malformed => frames.push(
                "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": \n\n".into(),
            ),
            StreamEnd::Error => frames.push(event(
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            )),
            StreamEnd::Truncated | StreamEnd::Complete => {}
        }
        return frames;
    }
    if !chunks.is_empty() {
        let deltas = chunks
            .iter()
            .map(|text| json!({"type": "text_delta", "text": text}))
            .collect();
        block_events(
            &mut frames,
            index,
            json!({"type": "text", "text": ""}),
            deltas,
        );
        index += 1;
    }
    for (call_index, (name, args)) in calls.iter().enumerate() {
        let block = json!({"type": "tool_use", "id": format!("toolu_fake_{call_index}"), "name": name, "input": {}});
        let deltas = split_text(&args.to_string(), reply.split_args)
            .into_iter()
            .map(|fragment| json!({"type": "input_json_delta", "partial_json": fragment}))
            .collect();
        block_events(&mut frames, index, block, deltas);
        index += 1;
    }
    frames.push(event(
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(reply, !calls.is_empty()), "stop_sequence": null},
            "usage": {"output_tokens": output}}),
    ));
    frames.push(event("message_stop", json!({"type": "message_stop"})));
    frames
}

fn non_stream(reply: &Reply, model: &str) -> Value {
    let ReplyBody::Stream { chunks, calls, .. } = &reply.body else {
        return Value::Null;
    };
    let mut content = Vec::new();
    if let Some(reasoning) = &reply.reasoning {
        content
            .push(json!({"type": "thinking", "thinking": reasoning, "signature": FAKE_SIGNATURE}));
    }
    if !chunks.is_empty() {
        content.push(json!({"type": "text", "text": chunks.concat()}));
    }
    for (index, (name, args)) in calls.iter().enumerate() {
        content.push(json!({"type": "tool_use", "id": format!("toolu_fake_{index}"), "name": name, "input": args}));
    }
    let (input, output) = reply.usage;
    json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(reply, !calls.is_empty()), "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output},
    })
}
