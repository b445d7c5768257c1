//! Conversation messages: the unit the agent loop, the checkpoints and every surface share.
//!
//! Shapes follow LangChain's message model (system / human / ai / tool with stable ids) so that
//! DeerFlow clients reading `/state` see familiar JSON, but only the fields Antler uses exist.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod history;
mod json_cache;
mod sender;
mod text;
mod wire;
pub use history::{History, WeakHistory};
pub(crate) use json_cache::KEPT_SLOT_BYTES;
pub use sender::{SENDER_ID, SENDER_NAME, Sender, sender_label};
pub use text::Text;

/// One message in a thread. `type` is the JSON tag (`system`, `human`, `ai`, `tool`); read by
/// hand in one pass (`wire`), written by the derive.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Message {
    System(SystemMessage),
    Human(HumanMessage),
    Ai(AiMessage),
    Tool(ToolMessage),
}

/// Extra data carried by a message that is not part of its content.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageMeta {
    /// Context injected by the harness (reminders, memory, warnings): kept out of chat replies.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hide_from_ui: bool,
    /// Free-form extras (`additional_kwargs` in DeerFlow), e.g. uploaded files of a human turn.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl MessageMeta {
    /// Nothing to carry: the message's JSON leaves `meta` out (readers default it), which spares
    /// a key and an object per message in every `/state`, `/runs/wait` and checkpoint record.
    pub fn is_empty(&self) -> bool {
        let MessageMeta {
            hide_from_ui,
            extra,
        } = self;
        !hide_from_ui && extra.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemMessage {
    pub id: Text,
    pub content: Text,
    #[serde(default, skip_serializing_if = "MessageMeta::is_empty")]
    pub meta: MessageMeta,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HumanMessage {
    pub id: Text,
    pub content: Text,
    /// Set on harness-authored human messages (e.g. `loop_warning`) so they can be told apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Inline images for vision models (base64), only ever present in a model request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageData>,
    #[serde(default, skip_serializing_if = "MessageMeta::is_empty")]
    pub meta: MessageMeta,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageData {
    pub mime_type: String,
    pub base64: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AiMessage {
    pub id: Text,
    pub content: Text,
    /// Thinking / reasoning text when the provider streams it separately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Opaque provider data that must be echoed back (Anthropic thinking signatures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Shared text, not a `String`: a long history's copies (a run's first change to it, the
    /// request's system-message coalescing) cloned this with an allocation per answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Text>,
    #[serde(default, skip_serializing_if = "MessageMeta::is_empty")]
    pub meta: MessageMeta,
}

/// A tool invocation requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Parsed JSON arguments; when the model sent invalid JSON this holds the raw text as a string.
    pub args: Value,
    /// Why `args` could not be parsed, if it could not: the call is answered with an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_error: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    #[default]
    Success,
    Error,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolMessage {
    pub id: Text,
    pub tool_call_id: String,
    pub name: String,
    pub content: Text,
    #[serde(default)]
    pub status: ToolStatus,
    /// Structured payload for surfaces (e.g. the clarification request), never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Value>,
    #[serde(default, skip_serializing_if = "MessageMeta::is_empty")]
    pub meta: MessageMeta,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The part of `input_tokens` the provider served from its prompt cache (billed at the
    /// cached-input price); absent in records written before it was read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
    }
}

/// Why the model stopped, normalised across providers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Refusal,
    #[serde(untagged)]
    Other(String),
}

impl FinishReason {
    /// Maps OpenAI `finish_reason` and Anthropic `stop_reason` strings.
    pub fn from_provider(raw: &str) -> Self {
        match raw {
            "stop" | "end_turn" | "stop_sequence" => Self::Stop,
            "tool_calls" | "tool_use" | "function_call" => Self::ToolCalls,
            "length" | "max_tokens" => Self::Length,
            "content_filter" => Self::ContentFilter,
            "refusal" => Self::Refusal,
            other => Self::Other(other.to_string()),
        }
    }

    /// A provider safety stop (the model refused or its output was filtered).
    pub fn is_safety(&self) -> bool {
        matches!(self, Self::ContentFilter | Self::Refusal)
    }
}

/// About how many bytes `messages` take as JSON (text plus a typical envelope per message).
pub fn json_size_hint(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| {
            let reasoning = m
                .as_ai()
                .and_then(|ai| ai.reasoning.as_ref())
                .map_or(0, String::len);
            // Escapes make the text a little longer; ids, types and meta add about this much.
            m.content().len() + m.content().len() / 16 + reasoning + 160
        })
        .sum()
}

/// Whether two message ids are the same, asked for every message of a thread by the checkpoint
/// walk and by every upsert. A kept message shares its id text with the saved one (the run's
/// history was copied from the cached state), so the pointers usually answer; otherwise ids
/// end in random hex, so the last byte tells most apart before the bytes are compared.
pub fn same_id(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b)
        || (a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b)
}

/// A fresh message id; uuid-based so ids never collide across runs and restarts.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

impl Message {
    pub fn id(&self) -> &str {
        self.id_text()
    }

    /// The id as shared text (a clone shares its body, so `same_id` answers by pointer).
    pub fn id_text(&self) -> &Text {
        match self {
            Message::System(m) => &m.id,
            Message::Human(m) => &m.id,
            Message::Ai(m) => &m.id,
            Message::Tool(m) => &m.id,
        }
    }

    pub fn set_id(&mut self, id: String) {
        match self {
            Message::System(m) => m.id = id.into(),
            Message::Human(m) => m.id = id.into(),
            Message::Ai(m) => m.id = id.into(),
            Message::Tool(m) => m.id = id.into(),
        }
    }

    pub fn content(&self) -> &str {
        match self {
            Message::System(m) => &m.content,
            Message::Human(m) => &m.content,
            Message::Ai(m) => &m.content,
            Message::Tool(m) => &m.content,
        }
    }

    pub fn meta(&self) -> &MessageMeta {
        match self {
            Message::System(m) => &m.meta,
            Message::Human(m) => &m.meta,
            Message::Ai(m) => &m.meta,
            Message::Tool(m) => &m.meta,
        }
    }

    pub fn is_hidden(&self) -> bool {
        self.meta().hide_from_ui
    }

    pub fn as_ai(&self) -> Option<&AiMessage> {
        match self {
            Message::Ai(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_tool(&self) -> Option<&ToolMessage> {
        match self {
            Message::Tool(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_human(&self) -> Option<&HumanMessage> {
        match self {
            Message::Human(m) => Some(m),
            _ => None,
        }
    }

    /// A visible human message typed by a person (not harness-injected context).
    pub fn is_genuine_human(&self) -> bool {
        matches!(self, Message::Human(h) if !h.meta.hide_from_ui && h.name.is_none())
    }

    pub fn system(content: impl Into<Text>) -> Self {
        Message::System(SystemMessage {
            id: new_id("sys").into(),
            content: content.into(),
            meta: MessageMeta::default(),
        })
    }

    pub fn human(content: impl Into<Text>) -> Self {
        Message::Human(HumanMessage {
            id: new_id("human").into(),
            content: content.into(),
            ..Default::default()
        })
    }

    pub fn ai(content: impl Into<Text>) -> Self {
        Message::Ai(AiMessage {
            id: new_id("ai").into(),
            content: content.into(),
            ..Default::default()
        })
    }
}

impl ToolMessage {
    pub fn success(call: &ToolCall, content: impl Into<Text>) -> Self {
        Self {
            id: new_id("tool").into(),
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content: content.into(),
            status: ToolStatus::Success,
            artifact: None,
            meta: MessageMeta::default(),
        }
    }

    pub fn error(call: &ToolCall, content: impl Into<Text>) -> Self {
        Self {
            status: ToolStatus::Error,
            ..Self::success(call, content)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_json_uses_type_tag() {
        let m = Message::Human(HumanMessage {
            id: "h1".into(),
            content: "hi".into(),
            ..Default::default()
        });
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["type"], "human");
        assert_eq!(v["id"], "h1");
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn same_id_compares_the_text() {
        let id = new_id("ai");
        let copy = id.clone();
        assert!(same_id(&id, &id) && same_id(&id, &copy));
        assert!(!same_id(&id, &new_id("ai")));
        assert!(!same_id("a1", "b1") && !same_id("a1", "a12") && !same_id("", "a"));
        assert!(same_id("", ""));
    }

    #[test]
    fn meta_is_written_only_when_it_carries_something() {
        let plain = Message::human("hi");
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("meta").is_none(), "{json}");
        let old_record =
            serde_json::json!({"type": "human", "id": "h", "content": "hi", "meta": {}});
        let back: Message = serde_json::from_value(old_record).unwrap();
        assert_eq!(back.meta(), &MessageMeta::default());

        let mut hidden = Message::system("reminder");
        if let Message::System(system) = &mut hidden {
            system.meta.hide_from_ui = true;
        }
        let json = serde_json::to_value(&hidden).unwrap();
        assert_eq!(json["meta"], serde_json::json!({"hide_from_ui": true}));
        assert_eq!(serde_json::from_value::<Message>(json).unwrap(), hidden);
    }

    #[test]
    fn finish_reason_maps_both_providers() {
        assert_eq!(FinishReason::from_provider("end_turn"), FinishReason::Stop);
        assert_eq!(
            FinishReason::from_provider("tool_use"),
            FinishReason::ToolCalls
        );
        assert_eq!(
            FinishReason::from_provider("max_tokens"),
            FinishReason::Length
        );
        assert!(FinishReason::from_provider("refusal").is_safety());
        assert_eq!(
            FinishReason::from_provider("pause_turn"),
            FinishReason::Other("pause_turn".into())
        );
        let json = serde_json::to_string(&FinishReason::Other("x".into())).unwrap();
        assert_eq!(json, "\"x\"");
    }
}
