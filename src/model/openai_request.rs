//! The body of a streaming Chat Completions request, serialized straight from the
//! [`ModelRequest`]: no intermediate JSON tree, so the history and the tool schemas are read
//! in place instead of being copied into `serde_json::Value`s once more per model call.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::config::ModelConfig;
use crate::model::{ModelRequest, SystemPrompt, ToolChoice, ToolSpec};
use antler_store::messages::{AiMessage, HumanMessage, Message, Text, ToolCall};

/// The JSON body of one streaming Chat Completions request: the model, the conversation,
/// then the settings. The settings object is written after the conversation with its opening
/// brace turned into the comma that joins them.
pub(crate) fn request_body(config: &ModelConfig, request: &ModelRequest) -> bytes::Bytes {
    request.body_with(|out| {
        // Writing borrowed strings and `Value`s into a `Vec` cannot fail.
        out.extend_from_slice(b"{\"model\":");
        let _ = serde_json::to_writer(&mut *out, &config.model);
        out.extend_from_slice(b",\"messages\":");
        write_messages(out, request);
        let settings = out.len();
        let _ = serde_json::to_writer(&mut *out, &Settings::new(config, request));
        out[settings] = b',';
    })
}

#[derive(Serialize)]
struct Settings<'a> {
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    // Servers reject `tool_choice` without `tools`, so both are sent or neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Tools<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
}

impl<'a> Settings<'a> {
    fn new(config: &'a ModelConfig, request: &'a ModelRequest) -> Self {
        let has_tools = !request.tools.is_empty();
        Self {
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_tokens: request.max_tokens.or(config.max_tokens),
            temperature: request.temperature.or(config.temperature),
            reasoning_effort: request
                .reasoning_effort
                .as_deref()
                .filter(|_| request.thinking_enabled && config.supports_thinking),
            tools: has_tools.then_some(Tools(&request.tools)),
            tool_choice: request
                .tool_choice
                .as_ref()
                .filter(|_| has_tools)
                .map(Choice),
        }
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

struct Tools<'a>(&'a [std::sync::Arc<ToolSpec>]);

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tool<'a> {
            r#type: &'static str,
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a crate::model::Schema,
        }
        serializer.collect_seq(self.0.iter().map(|tool| Tool {
            r#type: "function",
            function: Function {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }))
    }
}

struct Choice<'a>(&'a ToolChoice);

impl Serialize for Choice<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ToolChoice::Auto => serializer.serialize_str("auto"),
            ToolChoice::None => serializer.serialize_str("none"),
            ToolChoice::Required => serializer.serialize_str("required"),
            ToolChoice::Named(name) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "function")?;
                map.serialize_entry("function", &Name { name })?;
                map.end()
            }
        }
    }
}

#[derive(Serialize)]
struct Name<'a> {
    name: &'a str,
}

/// The conversation in Chat Completions form: the system prompt first, then every message.
///
/// A message that is a role and a text body only is written as constant fragments around the
/// body's kept JSON literal. Through serde_json each such message cost ~750 instructions, most
/// of them escape scans of its two keys and its role: ~0.9 M per model call at 1,000 messages
/// (callgrind), a third of such a turn. Everything else, and every escape, is serde_json's.
fn write_messages(out: &mut Vec<u8>, request: &ModelRequest) {
    out.push(b'[');
    let system: Vec<&str> = request.system_parts().collect();
    if !system.is_empty() {
        element(
            out,
            &SystemMessage {
                role: "system",
                content: SystemPrompt(system),
            },
        );
    }
    for message in request.conversation() {
        match message {
            Message::System(m) => plain(out, "system", &m.content),
            Message::Human(m) if m.images.is_empty() => plain(out, "user", &m.content),
            Message::Human(m) => element(out, &WithImages(m)),
            Message::Ai(m) if m.tool_calls.is_empty() => plain(out, "assistant", &m.content),
            Message::Ai(m) => element(out, &Assistant(m)),
            Message::Tool(m) => element(
                out,
                &ToolResult {
                    role: "tool",
                    tool_call_id: &m.tool_call_id,
                    content: &m.content,
                },
            ),
        }
    }
    // Every element ends with a comma: the last one's closes the array.
    match out.last_mut() {
        Some(last @ b',') => *last = b']',
        _ => out.push(b']'),
    }
}

/// `{"role":…,"content":…},` with the role a fixed word (nothing to escape) and the content
/// the text's JSON literal.
fn plain(out: &mut Vec<u8>, role: &'static str, content: &Text) {
    out.extend_from_slice(b"{\"role\":\"");
    out.extend_from_slice(role.as_bytes());
    out.extend_from_slice(b"\",\"content\":");
    out.extend_from_slice(content.json_literal().as_bytes());
    out.extend_from_slice(b"},");
}

fn element(out: &mut Vec<u8>, value: &impl Serialize) {
    let _ = serde_json::to_writer(&mut *out, value);
    out.push(b',');
}

/// The system prompt as a message.
#[derive(Serialize)]
struct SystemMessage<'a> {
    role: &'static str,
    content: SystemPrompt<'a>,
}

#[derive(Serialize)]
struct ToolResult<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: &'a Text,
}

/// A human message with images: a text part, then one `image_url` part per image.
struct WithImages<'a>(&'a HumanMessage);

impl Serialize for WithImages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Parts<'a>(&'a HumanMessage);
        impl Serialize for Parts<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(self.0.images.len() + 1))?;
                seq.serialize_element(&TextPart {
                    r#type: "text",
                    text: &self.0.content,
                })?;
                for image in &self.0.images {
                    let url = format!("data:{};base64,{}", image.mime_type, image.base64);
                    seq.serialize_element(&ImagePart {
                        r#type: "image_url",
                        image_url: Url { url: &url },
                    })?;
                }
                seq.end()
            }
        }
        #[derive(Serialize)]
        struct TextPart<'a> {
            r#type: &'static str,
            text: &'a Text,
        }
        #[derive(Serialize)]
        struct ImagePart<'a> {
            r#type: &'static str,
            image_url: Url<'a>,
        }
        #[derive(Serialize)]
        struct Url<'a> {
            url: &'a str,
        }
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry("content", &Parts(self.0))?;
        map.end()
    }
}

/// An assistant turn with tool calls (one without is `plain`): `null` content is the
/// documented form for a pure tool-call turn.
struct Assistant<'a>(&'a AiMessage);

impl Serialize for Assistant<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let message = self.0;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("role", "assistant")?;
        if message.content.is_empty() {
            map.serialize_entry("content", &())?;
        } else {
            map.serialize_entry("content", &message.content)?;
        }
        map.serialize_entry("tool_calls", &Calls(&message.tool_calls))?;
        map.end()
    }
}

struct Calls<'a>(&'a [ToolCall]);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Call<'a> {
            id: &'a str,
            r#type: &'static str,
            function: Function<'a>,
        }
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: Arguments<'a>,
        }
        serializer.collect_seq(self.0.iter().map(|call| Call {
            id: &call.id,
            r#type: "function",
            function: Function {
                name: &call.name,
                arguments: Arguments(call),
            },
        }))
    }
}

/// Arguments travel as a JSON string; unparseable ones are echoed exactly as the model sent
/// them.
struct Arguments<'a>(&'a ToolCall);

impl Serialize for Arguments<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (&self.0.args, &self.0.args_error) {
            (Value::String(raw), Some(_)) => serializer.serialize_str(raw),
            // `Value`'s `Display` is its compact JSON text.
            (args, _) => serializer.collect_str(args),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Secret;
    use antler_store::messages::{ImageData, ToolMessage};

    fn config() -> ModelConfig {
        ModelConfig {
            name: "local".into(),
            model: "qwen".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: Some(Secret::new("")),
            max_tokens: Some(100),
            temperature: Some(0.2),
            ..Default::default()
        }
    }

    fn body(config: &ModelConfig, request: &ModelRequest) -> Value {
        serde_json::from_slice(&request_body(config, request)).unwrap()
    }

    #[test]
    fn history_converts_to_chat_completions_messages() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            args: json!({"path": "a.txt"}),
            args_error: None,
        };
        let bad = ToolCall {
            id: "call_2".into(),
            name: "bash".into(),
            args: Value::String("{oops".into()),
            args_error: Some("bad".into()),
        };
        let request = ModelRequest {
            system: Some("be brief".into()),
            messages: vec![
                Message::Human(HumanMessage {
                    content: "look".into(),
                    images: vec![ImageData {
                        mime_type: "image/png".into(),
                        base64: "AAA=".into(),
                    }],
                    ..Default::default()
                }),
                Message::Ai(AiMessage {
                    tool_calls: vec![call.clone(), bad.clone()],
                    ..Default::default()
                }),
                Message::Tool(ToolMessage::success(&call, "hello")),
                Message::Tool(ToolMessage::error(&bad, "invalid arguments")),
                Message::ai("done"),
            ]
            .into(),
            ..Default::default()
        };
        let body = body(&config(), &request);
        let messages = &body["messages"];
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            messages[1],
            json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA="}}]})
        );
        assert_eq!(messages[2]["content"], Value::Null);
        assert_eq!(
            messages[2]["tool_calls"][0],
            json!({"id": "call_1", "type": "function", "function": {
                "name": "read_file", "arguments": r#"{"path":"a.txt"}"#}})
        );
        assert_eq!(
            messages[2]["tool_calls"][1]["function"]["arguments"],
            "{oops"
        );
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "hello"})
        );
        assert_eq!(messages[4]["tool_call_id"], "call_2");
        assert_eq!(messages[5], json!({"role": "assistant", "content": "done"}));
        assert_eq!(messages.as_array().unwrap().len(), 6);
    }

    #[test]
    fn plain_messages_are_written_from_their_kept_literals() {
        let tricky = "quote \" backslash \\ tab \t newline \n nul \u{0} emoji \u{1f98c} </script>";
        let request = ModelRequest {
            messages: vec![
                Message::human(tricky),
                Message::ai(""),
                Message::system(tricky),
                Message::ai(tricky),
            ]
            .into(),
            ..Default::default()
        };
        let bytes = request_body(&config(), &request);
        let sent: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            sent["messages"],
            json!([
                {"role": "user", "content": tricky},
                {"role": "assistant", "content": ""},
                {"role": "system", "content": tricky},
                {"role": "assistant", "content": tricky},
            ])
        );
        assert_eq!(sent["model"], "qwen");
        assert_eq!(sent["max_tokens"], 100);
        // Byte for byte what serde_json writes, up to key order: compact, the same escapes.
        assert_eq!(bytes.len(), serde_json::to_vec(&sent).unwrap().len());

        let empty = body(&config(), &ModelRequest::default());
        assert_eq!(empty["messages"], json!([]));
        assert_eq!(empty["stream"], true);
    }

    #[test]
    fn merged_system_messages_are_left_out_and_others_stay_in_place() {
        let mut request = ModelRequest {
            system: Some("be brief".into()),
            messages: vec![
                Message::human("hi"),
                Message::system("a reminder"),
                Message::ai("hello"),
            ]
            .into(),
            ..Default::default()
        };
        let inline = body(&config(), &request);
        assert_eq!(
            inline["messages"][2],
            json!({"role": "system", "content": "a reminder"})
        );
        assert_eq!(inline["messages"].as_array().unwrap().len(), 4);

        // What the system-message coalescing leaves: the messages in place, marked merged.
        request.system_merged = true;
        let merged = body(&config(), &request);
        assert_eq!(
            merged["messages"],
            json!([
                {"role": "system", "content": "be brief\n\na reminder"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
            ])
        );
    }

    #[test]
    fn body_carries_settings_tools_and_overrides() {
        let request = ModelRequest {
            tools: vec![std::sync::Arc::new(ToolSpec {
                name: "read_file".into(),
                description: "reads".into(),
                parameters: json!({"type": "object"}).into(),
            })]
            .into(),
            tool_choice: Some(ToolChoice::Named("read_file".into())),
            max_tokens: Some(7),
            ..Default::default()
        };
        let body = body(&config(), &request);
        assert_eq!(body["model"], "qwen");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 7);
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {
                "name": "read_file", "description": "reads", "parameters": {"type": "object"}}}])
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "read_file"}})
        );
        assert!(body.get("reasoning_effort").is_none());
        let plain = body_of_plain();
        assert!(plain.get("tools").is_none() && plain.get("tool_choice").is_none());
        assert!(plain.get("max_tokens").is_none() && plain.get("temperature").is_none());
    }

    fn body_of_plain() -> Value {
        let config = ModelConfig {
            max_tokens: None,
            temperature: None,
            ..config()
        };
        body(
            &config,
            &ModelRequest {
                tool_choice: Some(ToolChoice::Auto),
                ..Default::default()
            },
        )
    }

    #[test]
    fn reasoning_effort_is_sent_only_to_thinking_models_with_thinking_on() {
        let request = ModelRequest {
            thinking_enabled: true,
            reasoning_effort: Some("high".into()),
            ..Default::default()
        };
        let thinking = ModelConfig {
            supports_thinking: true,
            ..config()
        };
        assert_eq!(body(&thinking, &request)["reasoning_effort"], "high");
        assert!(body(&config(), &request).get("reasoning_effort").is_none());
        let off = ModelRequest {
            thinking_enabled: false,
            ..request
        };
        assert!(body(&thinking, &off).get("reasoning_effort").is_none());
    }
}
