//! Anthropic Messages API provider: `content_block_*` streaming, tool_use and thinking blocks.

use std::collections::BTreeMap;

use async_trait::async_trait;
use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::Value;

use crate::config::ModelConfig;
use crate::model::anthropic_request::request_body;
use crate::model::http::{Endpoint, SseDecoder, decode_sse, parse_json};
use crate::model::openai::finish_call;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest, ModelStream};
use antler_store::messages::{AiMessage, FinishReason, ToolCall, Usage};

const API_VERSION: &str = "2023-06-01";

/// An Anthropic Messages endpoint: `POST {base_url}/v1/messages` with `stream: true`.
pub struct AnthropicModel {
    endpoint: Endpoint,
    url: String,
    config: ModelConfig,
    client: reqwest::Client,
}

impl AnthropicModel {
    /// `config.base_url` is the API root (`https://api.anthropic.com`); a trailing `/v1` is
    /// accepted too, since users copy it from OpenAI-style configs.
    pub fn new(config: &ModelConfig, client: reqwest::Client) -> Self {
        let root = config.base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        Self {
            endpoint: Endpoint::for_model(config),
            url: format!("{root}/v1/messages"),
            config: config.clone(),
            client,
        }
    }
}

#[async_trait]
impl ChatModel for AnthropicModel {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request_body(&self.config, request);
        let mut http = self
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(crate::model::http::unkept_body(body));
        if let Some(key) = self.endpoint.key() {
            http = http.header("x-api-key", key);
        }
        let response = self.endpoint.send(http).await?;
        Ok(decode_sse(
            &self.endpoint,
            response,
            EventDecoder::new(&self.config.name),
        ))
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        #[serde(default)]
        message: Value,
    },
    ContentBlockStart {
        index: usize,
        #[serde(default)]
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        #[serde(default)]
        delta: Value,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: Value,
        #[serde(default)]
        usage: Value,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping` and event types added after this was written.
    #[serde(other)]
    Other,
}

enum Block {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
        json: String,
        start_input: Value,
    },
    Other,
}

/// Accumulates Messages API events into one [`AiMessage`].
pub(crate) struct EventDecoder {
    model: String,
    content: String,
    reasoning: String,
    signature: Option<String>,
    blocks: BTreeMap<usize, Block>,
    tool_calls: Vec<ToolCall>,
    usage: Usage,
    stop_reason: Option<FinishReason>,
}

impl EventDecoder {
    pub(crate) fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            content: String::new(),
            reasoning: String::new(),
            signature: None,
            blocks: BTreeMap::new(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: None,
        }
    }

    fn close_block(&mut self, index: usize) {
        if let Some(Block::ToolUse {
            id,
            name,
            json,
            start_input,
        }) = self.blocks.remove(&index)
        {
            // Without deltas the whole input came in `content_block_start`.
            let call = if json.trim().is_empty() && start_input.is_object() {
                finish_call(id, name, &start_input.to_string())
            } else {
                finish_call(id, name, &json)
            };
            self.tool_calls.push(call);
        }
    }

    fn message(&mut self) -> AiMessage {
        let open: Vec<usize> = self.blocks.keys().copied().collect();
        for index in open {
            self.close_block(index);
        }
        let mut usage = self.usage;
        usage.total_tokens = usage.input_tokens + usage.output_tokens;
        AiMessage {
            content: std::mem::take(&mut self.content).into(),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            reasoning_signature: self.signature.take(),
            tool_calls: std::mem::take(&mut self.tool_calls),
            usage: Some(usage),
            finish_reason: self.stop_reason.clone(),
            model: Some(self.model.as_str().into()),
            ..Default::default()
        }
    }

    fn read_usage(&mut self, usage: &Value) {
        let tokens = |key: &str| usage.get(key).and_then(Value::as_u64);
        // Cached prompt tokens are billed input too; they are reported separately.
        let input = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .filter_map(|key| tokens(key))
        .reduce(|a, b| a + b);
        if let Some(input) = input.filter(|n| *n > 0) {
            self.usage.input_tokens = input;
        }
        if let Some(output) = tokens("output_tokens") {
            self.usage.output_tokens = output;
        }
        if let Some(cached) = tokens("cache_read_input_tokens") {
            self.usage.cached_input_tokens = cached;
        }
    }

    fn delta(&mut self, index: usize, delta: &Value) -> Option<ModelEvent> {
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match delta.get("type").and_then(Value::as_str)? {
            "text_delta" if !text("text").is_empty() => {
                self.content.push_str(text("text"));
                Some(ModelEvent::TextDelta(text("text").to_string()))
            }
            "thinking_delta" if !text("thinking").is_empty() => {
                self.reasoning.push_str(text("thinking"));
                Some(ModelEvent::ReasoningDelta(text("thinking").to_string()))
            }
            "signature_delta" => {
                self.signature = Some(text("signature").to_string());
                None
            }
            "input_json_delta" => {
                if let Some(Block::ToolUse { json, .. }) = self.blocks.get_mut(&index) {
                    json.push_str(text("partial_json"));
                }
                None
            }
            _ => None,
        }
    }
}

impl SseDecoder for EventDecoder {
    fn feed(&mut self, event: &Event) -> Result<Vec<ModelEvent>, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let parsed: StreamEvent = parse_json(&self.model, data)?;
        let mut events = Vec::new();
        match parsed {
            StreamEvent::MessageStart { message } => self.read_usage(&message["usage"]),
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let field = |key: &str| content_block[key].as_str().unwrap_or_default().to_string();
                let block = match content_block["type"].as_str() {
                    Some("text") => Block::Text,
                    Some("thinking") => Block::Thinking,
                    Some("tool_use") => Block::ToolUse {
                        id: field("id"),
                        name: field("name"),
                        json: String::new(),
                        start_input: content_block["input"].clone(),
                    },
                    _ => Block::Other,
                };
                if let (Block::Text, Some(text)) = (&block, content_block["text"].as_str())
                    && !text.is_empty()
                {
                    self.content.push_str(text);
                    events.push(ModelEvent::TextDelta(text.to_string()));
                }
                if let (Block::Thinking, Some(thinking)) =
                    (&block, content_block["thinking"].as_str())
                    && !thinking.is_empty()
                {
                    self.reasoning.push_str(thinking);
                    events.push(ModelEvent::ReasoningDelta(thinking.to_string()));
                }
                self.blocks.insert(index, block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                events.extend(self.delta(index, &delta));
            }
            StreamEvent::ContentBlockStop { index } => self.close_block(index),
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta["stop_reason"].as_str() {
                    self.stop_reason = Some(FinishReason::from_provider(reason));
                }
                self.read_usage(&usage);
            }
            StreamEvent::MessageStop => events.push(ModelEvent::Completed(self.message())),
            StreamEvent::Error { error } => {
                let kind = error["type"].as_str().unwrap_or("error");
                let message = error["message"].as_str().unwrap_or("no message");
                return Err(ModelError::Provider {
                    model: self.model.clone(),
                    detail: format!("{kind}: {message}"),
                });
            }
            StreamEvent::Other => {}
        }
        Ok(events)
    }

    fn finish_early(&mut self) -> Result<AiMessage, ModelError> {
        if self.stop_reason.is_some() {
            return Ok(self.message());
        }
        Err(ModelError::Stream {
            model: self.model.clone(),
            detail: "the connection closed before message_stop".into(),
        })
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
