//! OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, DeepSeek, OpenRouter…).

use std::collections::BTreeMap;

use async_trait::async_trait;
use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::ModelConfig;
use crate::model::http::{Endpoint, SseDecoder, decode_sse, parse_json};
use crate::model::openai_request::request_body;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest, ModelStream};
use antler_store::messages::{AiMessage, FinishReason, ToolCall, Usage};

/// A Chat Completions endpoint: `POST {base_url}/chat/completions` with `stream: true`.
pub struct OpenAiModel {
    endpoint: Endpoint,
    url: String,
    config: ModelConfig,
    client: reqwest::Client,
}

impl OpenAiModel {
    /// `config.base_url` includes the version path (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1`).
    pub fn new(config: &ModelConfig, client: reqwest::Client) -> Self {
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Self {
            endpoint: Endpoint::for_model(config),
            url,
            config: config.clone(),
            client,
        }
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request_body(&self.config, request);
        let mut http = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(crate::model::http::unkept_body(body));
        if let Some(key) = self.endpoint.key() {
            http = http.bearer_auth(key);
        }
        let response = self.endpoint.send(http).await?;
        Ok(decode_sse(
            &self.endpoint,
            response,
            ChunkDecoder::new(&self.config.name),
        ))
    }
}

#[derive(Debug, Default, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// DeepSeek and vLLM name it `reasoning_content`; Ollama and OpenRouter `reasoning`.
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
    /// `prompt_tokens_details.cached_tokens`: the prompt's part served from the cache.
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates Chat Completions chunks into one [`AiMessage`].
pub(crate) struct ChunkDecoder {
    model: String,
    content: String,
    reasoning: String,
    /// Keyed by the fragment's `index`: ids and names arrive only in the first fragment.
    calls: BTreeMap<usize, PartialCall>,
    last_index: Option<usize>,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
}

impl ChunkDecoder {
    pub(crate) fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            content: String::new(),
            reasoning: String::new(),
            calls: BTreeMap::new(),
            last_index: None,
            usage: None,
            finish_reason: None,
        }
    }

    fn add_call_fragment(&mut self, fragment: ToolCallDelta) {
        // Some servers omit `index`: a fragment with a new id starts a call, others continue one.
        let index = fragment
            .index
            .unwrap_or_else(|| match (&fragment.id, self.last_index) {
                (Some(id), _) if !self.calls.values().any(|c| &c.id == id) => self.calls.len(),
                (_, Some(last)) => last,
                (_, None) => 0,
            });
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn message(&mut self) -> AiMessage {
        let tool_calls = std::mem::take(&mut self.calls)
            .into_values()
            .map(|call| finish_call(call.id, call.name, &call.arguments))
            .collect();
        AiMessage {
            content: std::mem::take(&mut self.content).into(),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason.clone(),
            model: Some(self.model.as_str().into()),
            ..Default::default()
        }
    }
}

/// A finished tool call. Invalid JSON is kept raw with the parse error so the loop can answer
/// the call with an error the model can read, instead of failing the whole turn.
pub(crate) fn finish_call(id: String, name: String, arguments: &str) -> ToolCall {
    let id = if id.is_empty() {
        antler_store::messages::new_id("call")
    } else {
        id
    };
    if arguments.trim().is_empty() {
        return ToolCall {
            id,
            name,
            args: Value::Object(Map::new()),
            args_error: None,
        };
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(args) => ToolCall {
            id,
            name,
            args,
            args_error: None,
        },
        Err(error) => ToolCall {
            id,
            name,
            args: Value::String(arguments.to_string()),
            args_error: Some(format!("the arguments are not valid JSON: {error}")),
        },
    }
}

impl SseDecoder for ChunkDecoder {
    fn feed(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(vec![ModelEvent::Completed(self.message())]);
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk: Chunk = parse_json(&self.model, data)?;
        if let Some(error) = chunk.error {
            let detail = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(ModelError::Provider {
                model: self.model.clone(),
                detail,
            });
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                total_tokens: usage
                    .total_tokens
                    .max(usage.prompt_tokens + usage.completion_tokens),
                cached_input_tokens: usage
                    .prompt_tokens_details
                    .and_then(|details| details.cached_tokens)
                    .unwrap_or(0),
            });
        }
        let mut events = Vec::new();
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta {
                if let Some(reasoning) = delta.reasoning_content.or(delta.reasoning)
                    && !reasoning.is_empty()
                {
                    self.reasoning.push_str(&reasoning);
                    events.push(ModelEvent::ReasoningDelta(reasoning));
                }
                if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                    self.content.push_str(&text);
                    events.push(ModelEvent::TextDelta(text));
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    self.add_call_fragment(fragment);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(FinishReason::from_provider(&reason));
            }
        }
        Ok(events)
    }

    fn finish_early(&mut self) -> Result<AiMessage, ModelError> {
        // Some compatible servers close after the finish chunk without `[DONE]`; that is complete.
        if self.finish_reason.is_some() {
            return Ok(self.message());
        }
        Err(ModelError::Stream {
            model: self.model.clone(),
            detail: "the connection closed before the answer was finished (no finish_reason or \
                     [DONE])"
                .into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::http::{decode_events, sse_event};

    fn data(json: Value) -> Event {
        sse_event("message", &json.to_string())
    }

    #[test]
    fn decoder_reassembles_fragments_by_index() {
        let mut decoder = ChunkDecoder::new("local");
        let events = decode_events(
            &mut decoder,
            [
                data(json!({"choices": [{"delta": {"role": "assistant", "content": null}}]})),
                data(json!({"choices": [{"delta": {"reasoning_content": "hmm"}}]})),
                data(json!({"choices": [{"delta": {"tool_calls": [
                    {"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"x\""}},
                    {"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}]}}]})),
                data(
                    json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}}]}),
                ),
                data(
                    json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{nope"}}]}}]}),
                ),
                data(
                    json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "timings": {}}),
                ),
                data(
                    json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 2}}}),
                ),
                sse_event("message", "[DONE]"),
            ],
        );
        assert_eq!(
            events[0].as_ref().unwrap(),
            &ModelEvent::ReasoningDelta("hmm".into())
        );
        let Ok(ModelEvent::Completed(message)) = events.last().unwrap() else {
            panic!("expected completion, got {events:?}");
        };
        assert_eq!(message.tool_calls[0].args, json!({"x": 1}));
        assert_eq!(message.tool_calls[1].args, Value::String("{nope".into()));
        assert!(message.tool_calls[1].args_error.is_some());
        assert_eq!(message.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(message.usage.unwrap().total_tokens, 7);
        assert_eq!(message.usage.unwrap().cached_input_tokens, 2);
        assert_eq!(message.reasoning.as_deref(), Some("hmm"));
    }

    #[test]
    fn decoder_reports_bad_chunks_errors_and_truncation() {
        let bad = decode_events(&mut ChunkDecoder::new("m"), [sse_event("message", "{nope")]);
        assert!(matches!(bad[0], Err(ModelError::Malformed { .. })));
        let error = decode_events(
            &mut ChunkDecoder::new("m"),
            [data(json!({"error": {"message": "overloaded"}}))],
        );
        assert!(
            matches!(&error[0], Err(ModelError::Provider { detail, .. }) if detail == "overloaded")
        );
        let cut = decode_events(
            &mut ChunkDecoder::new("m"),
            [data(json!({"choices": [{"delta": {"content": "hi"}}]}))],
        );
        assert!(matches!(
            cut.last().unwrap(),
            Err(ModelError::Stream { .. })
        ));
        let no_done = decode_events(
            &mut ChunkDecoder::new("m"),
            [data(
                json!({"choices": [{"delta": {"content": "hi"}, "finish_reason": "length"}]}),
            )],
        );
        assert!(
            matches!(no_done.last().unwrap(), Ok(ModelEvent::Completed(m)) if m.content == "hi")
        );
    }
}
