//! The body of a streaming Messages request, serialized from borrowed parts of the
//! [`ModelRequest`]: the history and the tool schemas are read in place instead of being
//! copied into `serde_json::Value`s once more per model call.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::config::ModelConfig;
use crate::model::{ModelRequest, SystemPrompt, ToolChoice, ToolSpec};
use antler_store::messages::{AiMessage, ImageData, Message, Text, ToolStatus};

/// The Messages API requires `max_tokens`; this is used when neither config nor request set it.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The JSON body of one streaming Messages request.
pub(crate) fn request_body(config: &ModelConfig, request: &ModelRequest) -> bytes::Bytes {
    let (system, messages) = convert_messages(request);
    let mut max_tokens = request
        .max_tokens
        .or(config.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut thinking = None;
    let mut temperature = None;
    if request.thinking_enabled && config.supports_thinking {
        let budget = thinking_budget(request.reasoning_effort.as_deref(), max_tokens);
        // The budget must stay below max_tokens, or the API rejects the request.
        max_tokens = max_tokens.max(budget + MIN_THINKING_BUDGET);
        thinking = Some(Thinking {
            r#type: "enabled",
            budget_tokens: budget,
        });
    } else {
        // With thinking on the API only accepts the default temperature, so it is left out.
        temperature = request.temperature.or(config.temperature);
    }
    let has_tools = !request.tools.is_empty();
    let body = Body {
        model: &config.model,
        messages,
        stream: true,
        system,
        thinking,
        temperature,
        max_tokens,
        tools: has_tools.then_some(Tools(&request.tools)),
        tool_choice: request
            .tool_choice
            .as_ref()
            .filter(|_| has_tools)
            .map(Choice),
    };
    request.body_json(&body)
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<Turn<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<SystemPrompt<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
}

#[derive(Serialize)]
struct Thinking {
    r#type: &'static str,
    budget_tokens: u32,
}

fn thinking_budget(effort: Option<&str>, max_tokens: u32) -> u32 {
    match effort {
        Some("low" | "minimal") => MIN_THINKING_BUDGET,
        Some("medium") => 4096,
        Some("high") => 16384,
        _ => (max_tokens / 2).max(MIN_THINKING_BUDGET),
    }
}

/// One entry of `messages`.
#[derive(Serialize)]
pub(crate) struct Turn<'a> {
    role: &'static str,
    content: Content<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a Text),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Image {
        source: ImageSource<'a>,
    },
    Text {
        text: &'a Text,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a Text,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    r#type: &'static str,
    media_type: &'a str,
    data: &'a str,
}

impl<'a> ImageSource<'a> {
    fn of(image: &'a ImageData) -> Self {
        Self {
            r#type: "base64",
            media_type: &image.mime_type,
            data: &image.base64,
        }
    }
}

/// A tool call's arguments; anything but an object is sent as `{}`, which the API requires.
struct Input<'a>(&'a Value);

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(_) => self.0.serialize(serializer),
            _ => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// The top-level `system` text and the `messages` array of a Messages request.
pub(crate) fn convert_messages(
    request: &ModelRequest,
) -> (Option<SystemPrompt<'_>>, Vec<Turn<'_>>) {
    let mut system: Vec<&str> = request.system_parts().collect();
    let mut out: Vec<Turn<'_>> = Vec::with_capacity(request.messages.len());
    let mut last_is_tool_results = false;
    for message in request.conversation() {
        let is_tool = matches!(message, Message::Tool(_));
        match message {
            // The Messages API has no system role inside the conversation.
            Message::System(m) => system.push(&m.content),
            Message::Human(m) if m.images.is_empty() => out.push(Turn {
                role: "user",
                content: Content::Text(&m.content),
            }),
            Message::Human(m) => {
                let mut blocks: Vec<Block<'_>> = m
                    .images
                    .iter()
                    .map(|image| Block::Image {
                        source: ImageSource::of(image),
                    })
                    .collect();
                blocks.push(Block::Text { text: &m.content });
                out.push(Turn {
                    role: "user",
                    content: Content::Blocks(blocks),
                });
            }
            Message::Ai(m) => {
                let blocks = ai_blocks(m);
                // An empty assistant turn is rejected by the API and carries nothing.
                if !blocks.is_empty() {
                    out.push(Turn {
                        role: "assistant",
                        content: Content::Blocks(blocks),
                    });
                }
            }
            Message::Tool(m) => {
                let block = Block::ToolResult {
                    tool_use_id: &m.tool_call_id,
                    content: &m.content,
                    is_error: m.status == ToolStatus::Error,
                };
                // All results of one assistant turn belong in a single user message.
                match out.last_mut() {
                    Some(Turn {
                        content: Content::Blocks(blocks),
                        ..
                    }) if last_is_tool_results => blocks.push(block),
                    _ => out.push(Turn {
                        role: "user",
                        content: Content::Blocks(vec![block]),
                    }),
                }
            }
        }
        if !matches!(message, Message::System(_)) {
            last_is_tool_results = is_tool;
        }
    }
    system.retain(|part| !part.is_empty());
    ((!system.is_empty()).then_some(SystemPrompt(system)), out)
}

fn ai_blocks(message: &AiMessage) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    // Thinking must be echoed with its signature for tool-use turns; unsigned text cannot be.
    if let (Some(thinking), Some(signature)) = (&message.reasoning, &message.reasoning_signature) {
        blocks.push(Block::Thinking {
            thinking,
            signature,
        });
    }
    if !message.content.is_empty() {
        blocks.push(Block::Text {
            text: &message.content,
        });
    }
    for call in &message.tool_calls {
        blocks.push(Block::ToolUse {
            id: &call.id,
            name: &call.name,
            input: Input(&call.args),
        });
    }
    blocks
}

struct Tools<'a>(&'a [std::sync::Arc<ToolSpec>]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            name: &'a str,
            description: &'a str,
            input_schema: &'a crate::model::Schema,
        }
        serializer.collect_seq(self.0.iter().map(|tool| Tool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.parameters,
        }))
    }
}

struct Choice<'a>(&'a ToolChoice);

impl Serialize for Choice<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (kind, name) = match self.0 {
            ToolChoice::Auto => ("auto", None),
            ToolChoice::None => ("none", None),
            ToolChoice::Required => ("any", None),
            ToolChoice::Named(name) => ("tool", Some(name)),
        };
        let mut map = serializer.serialize_map(Some(1 + usize::from(name.is_some())))?;
        map.serialize_entry("type", kind)?;
        if let Some(name) = name {
            map.serialize_entry("name", name)?;
        }
        map.end()
    }
}
