//! A scripted OpenAI Chat Completions server (`POST /v1/chat/completions`), streaming or not,
//! with the model list (`GET /v1/models`) that health probes read.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::reply::{Reply, ReplyBody, StreamEnd, split_text};
use crate::sse::{sse_response, status_response, unscripted_response};
use crate::{SharedScript, scripting_api};

/// A fake OpenAI-compatible endpoint. `base_url()` ends in `/v1`, like `models[].base_url`.
pub struct FakeOpenAi {
    addr: SocketAddr,
    script: SharedScript,
    gate: Arc<Mutex<Gate>>,
}

/// What the server checks before it answers, as real servers do (off by default).
#[derive(Default)]
struct Gate {
    /// The model ids the list names and chat completions accept (`None`: `fake-model` is
    /// listed and any id is answered).
    models: Option<Vec<String>>,
    /// The key every request must carry as `Authorization: Bearer …`.
    api_key: Option<String>,
}

#[derive(Clone)]
struct ServerState {
    script: SharedScript,
    gate: Arc<Mutex<Gate>>,
}

scripting_api!(FakeOpenAi);

impl FakeOpenAi {
    pub async fn start() -> Self {
        let script = SharedScript::default();
        let gate = Arc::new(Mutex::new(Gate::default()));
        let state = ServerState {
            script: script.clone(),
            gate: gate.clone(),
        };
        let router = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/models", get(models))
            .with_state(state);
        let addr = crate::serve(router).await;
        Self { addr, script, gate }
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Serves only these model ids: `/v1/models` lists them, and a chat completion for another
    /// id answers 404 `model_not_found` with OpenAI's body.
    pub fn serve_models(&self, ids: &[&str]) -> &Self {
        self.lock_gate().models = Some(ids.iter().map(|id| id.to_string()).collect());
        self
    }

    /// Requires `Authorization: Bearer {key}` on every request; others get OpenAI's 401.
    pub fn require_api_key(&self, key: &str) -> &Self {
        self.lock_gate().api_key = Some(key.to_string());
        self
    }

    fn lock_gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Gate {
    /// OpenAI's answer to a missing or wrong key, if this request has one.
    fn refuses_key(&self, headers: &HeaderMap) -> Option<Response> {
        let wanted = self.api_key.as_deref()?;
        let sent = headers
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if sent == Some(wanted) {
            return None;
        }
        let shown: String = sent.unwrap_or("").chars().take(6).collect();
        let body = json!({"error": {
            "message": format!("Incorrect API key provided: {shown}***. You can find your API key at https://platform.openai.com/account/api-keys."),
            "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
        Some(status_response(401, body.to_string(), None, None, None))
    }

    /// OpenAI's answer to a model id it does not serve, if `model` is one.
    fn refuses_model(&self, model: &str) -> Option<Response> {
        let served = self.models.as_ref()?;
        if served.iter().any(|id| id == model) {
            return None;
        }
        let body = json!({"error": {
            "message": format!("The model `{model}` does not exist or you do not have access to it."),
            "type": "invalid_request_error", "param": null, "code": "model_not_found"}});
        Some(status_response(404, body.to_string(), None, None, None))
    }
}

async fn handle(State(state): State<ServerState>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refused = {
        let gate = state.gate.lock().unwrap_or_else(|p| p.into_inner());
        gate.refuses_key(&headers)
            .or_else(|| gate.refuses_model(request["model"].as_str().unwrap_or("")))
    };
    if let Some(refused) = refused {
        return refused;
    }
    let Some(reply) = state.script.take("/v1/chat/completions", &headers, &body) else {
        return unscripted_response();
    };
    let model = request["model"]
        .as_str()
        .unwrap_or("fake-model")
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
                json!({"error": {"message": format!("fake error {status}"), "type": "fake_error", "code": status}})
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
            // The role frame and the reasoning come before the text chunks.
            let first_chunk = 1 + usize::from(reply.reasoning.is_some());
            let hold = reply.hold_at(first_chunk, chunks.len());
            sse_response(frames(&reply, &model), reply.delay, hold)
        }
        ReplyBody::Stream { .. } => axum::Json(non_stream(&reply, &model)).into_response(),
    }
}

/// The list every OpenAI-compatible server answers; not scripted, so probing never consumes a
/// scripted reply.
async fn models(State(state): State<ServerState>, headers: HeaderMap) -> Response {
    let gate = state.gate.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(refused) = gate.refuses_key(&headers) {
        return refused;
    }
    let ids = gate
        .models
        .clone()
        .unwrap_or_else(|| vec!["fake-model".to_string()]);
    let data: Vec<Value> = ids
        .iter()
        .map(
            |id| json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "fake"}),
        )
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

fn finish_reason(reply: &Reply, has_calls: bool) -> String {
    match reply.finish.as_deref() {
        Some("refusal") => "content_filter".into(),
        Some(other) => other.into(),
        None if has_calls => "tool_calls".into(),
        None => "stop".into(),
    }
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

fn frames(reply: &Reply, model: &str) -> Vec<String> {
    let ReplyBody::Stream { chunks, calls, end } = &reply.body else {
        return Vec::new();
    };
    let mut frames = vec![chunk(
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    if let Some(reasoning) = &reply.reasoning {
        frames.push(chunk(model, json!({"reasoning_content": reasoning}), None));
    }
    for text in chunks {
        frames.push(chunk(model, json!({"content": text}), None));
    }
    match end {
        StreamEnd::Malformed => {
            frames.push("data: {\"choices\": [{\"delta\": {\"content\": \"oops\"\n\n".into());
            return frames;
        }
        StreamEnd::Error => {
            let error = json!({"error": {"message": "the upstream model crashed", "type": "server_error", "code": 500}});
            frames.push(format!("data: {error}\n\n"));
            return frames;
        }
        StreamEnd::Truncated => return frames,
        StreamEnd::Complete => {}
    }
    for (index, (name, args)) in calls.iter().enumerate() {
        let id = format!("call_fake_{index}");
        let start = json!({"tool_calls": [{"index": index, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]});
        frames.push(chunk(model, start, None));
        for fragment in split_text(&args.to_string(), reply.split_args) {
            let delta =
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]});
            frames.push(chunk(model, delta, None));
        }
    }
    let finish = finish_reason(reply, !calls.is_empty());
    frames.push(chunk(model, json!({}), Some(&finish)));
    let (input, output) = reply.usage;
    let usage = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": model, "choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
    });
    frames.push(format!("data: {usage}\n\n"));
    frames.push("data: [DONE]\n\n".into());
    frames
}

fn non_stream(reply: &Reply, model: &str) -> Value {
    let ReplyBody::Stream { chunks, calls, .. } = &reply.body else {
        return Value::Null;
    };
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, args))| {
            json!({"id": format!("call_fake_{index}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": chunks.concat()});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let (input, output) = reply.usage;
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply, !calls.is_empty())}],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
    })
}
