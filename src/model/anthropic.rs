//! Anthropic Messages API provider: `content_block_*` streaming, tool_use and thinking blocks.

use std::collections::BTreeMap;

use async_trait::async_trait;
use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::ModelConfig;
use crate::messages::{AiMessage, FinishReason, Message, ToolCall, ToolStatus, Usage};
use crate::model::http::{Endpoint, SseDecoder, decode_sse, parse_json};
use crate::model::openai::finish_call;
use crate::model::{ChatModel, ModelError, ModelEvent, ModelRequest, ModelStream, ToolChoice};

/// The Messages API requires `max_tokens`; this is used when neither config nor request set it.
const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;
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

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let body = request_body(&self.config, &request);
        let mut http = self
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .json(&body);
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

/// The JSON body of one streaming Messages request.
pub(crate) fn request_body(config: &ModelConfig, request: &ModelRequest) -> Value {
    let (system, messages) = convert_messages(request);
    let mut max_tokens = request
        .max_tokens
        .or(config.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = json!({"model": config.model, "messages": messages, "stream": true});
    if let Some(system) = system {
        body["system"] = json!(system);
    }
    if request.thinking_enabled && config.supports_thinking {
        let budget = thinking_budget(request.reasoning_effort.as_deref(), max_tokens);
        // The budget must stay below max_tokens, or the API rejects the request.
        max_tokens = max_tokens.max(budget + MIN_THINKING_BUDGET);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    } else if let Some(temperature) = request.temperature.or(config.temperature) {
        // With thinking on the API only accepts the default temperature, so it is left out.
        body["temperature"] = json!(temperature);
    }
    body["max_tokens"] = json!(max_tokens);
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body["tools"] = Value::Array(tools);
        if let Some(choice) = &request.tool_choice {
            body["tool_choice"] = match choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
            };
        }
    }
    body
}

fn thinking_budget(effort: Option<&str>, max_tokens: u32) -> u32 {
    match effort {
        Some("low" | "minimal") => MIN_THINKING_BUDGET,
        Some("medium") => 4096,
        Some("high") => 16384,
        _ => (max_tokens / 2).max(MIN_THINKING_BUDGET),
    }
}

/// The top-level `system` text and the `messages` array of a Messages request.
pub(crate) fn convert_messages(request: &ModelRequest) -> (Option<String>, Vec<Value>) {
    let mut system: Vec<&str> = request.system.as_deref().into_iter().collect();
    let mut out: Vec<Value> = Vec::with_capacity(request.messages.len());
    let mut last_is_tool_results = false;
    for message in &request.messages {
        let is_tool = matches!(message, Message::Tool(_));
        match message {
            // The Messages API has no system role inside the conversation.
            Message::System(m) => system.push(&m.content),
            Message::Human(m) if m.images.is_empty() => {
                out.push(json!({"role": "user", "content": m.content}));
            }
            Message::Human(m) => {
                let mut blocks: Vec<Value> = m
                    .images
                    .iter()
                    .map(|image| {
                        json!({"type": "image", "source": {
                            "type": "base64", "media_type": image.mime_type, "data": image.base64}})
                    })
                    .collect();
                blocks.push(json!({"type": "text", "text": m.content}));
                out.push(json!({"role": "user", "content": blocks}));
            }
            Message::Ai(m) => {
                let blocks = ai_blocks(m);
                // An empty assistant turn is rejected by the API and carries nothing.
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::Tool(m) => {
                let mut block = json!({"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content});
                if m.status == ToolStatus::Error {
                    block["is_error"] = json!(true);
                }
                // All results of one assistant turn belong in a single user message.
                match out.last_mut() {
                    Some(last) if last_is_tool_results => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => out.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
        if !matches!(message, Message::System(_)) {
            last_is_tool_results = is_tool;
        }
    }
    let system = system
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>();
    ((!system.is_empty()).then(|| system.join("\n\n")), out)
}

fn ai_blocks(message: &AiMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    // Thinking must be echoed with its signature for tool-use turns; unsigned text cannot be.
    if let (Some(thinking), Some(signature)) = (&message.reasoning, &message.reasoning_signature) {
        blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
    }
    if !message.content.is_empty() {
        blocks.push(json!({"type": "text", "text": message.content}));
    }
    for call in &message.tool_calls {
        let input = match &call.args {
            Value::Object(_) => call.args.clone(),
            _ => Value::Object(Map::new()),
        };
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
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
            content: std::mem::take(&mut self.content),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            reasoning_signature: self.signature.take(),
            tool_calls: std::mem::take(&mut self.tool_calls),
            usage: Some(usage),
            finish_reason: self.stop_reason.clone(),
            model: Some(self.model.clone()),
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
