//! Reading a [`Message`] in one pass.
//!
//! Why: serde's derive for an internally tagged enum (`"type": "human"` inside the object)
//! first buffers the whole object into its private content tree, because the tag may come
//! after the fields, then reads the variant from that tree: an allocation per key and value,
//! twice the work. A thread is folded from its log by reading every message; with the derive a
//! message cost ~8,800 instructions and folding was half a turn's instructions when the state
//! cache could not hold every active thread (callgrind, 200 threads in rotation). Here the
//! object is read once into the union of the variants' fields, then the tag picks the variant.
//! The JSON written is unchanged (the derive's `Serialize`); what is read is the same, with
//! one difference: a field of another variant is ignored only when it has that field's type
//! (the derive skipped it unread). Missing required fields and unknown types are errors.

use serde::de::Error;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::messages::{
    AiMessage, FinishReason, HumanMessage, ImageData, Message, MessageMeta, SystemMessage, Text,
    ToolCall, ToolMessage, ToolStatus, Usage,
};

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    System,
    Human,
    Ai,
    Tool,
}

/// Every field any variant has; `Option` where a variant requires it, so its absence can be
/// reported by name.
#[derive(Deserialize)]
struct Wire {
    #[serde(rename = "type")]
    kind: Kind,
    id: Option<Text>,
    content: Option<Text>,
    #[serde(default)]
    meta: MessageMeta,
    // human
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    images: Vec<ImageData>,
    // ai
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    reasoning_signature: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    finish_reason: Option<FinishReason>,
    #[serde(default)]
    model: Option<Text>,
    // tool
    tool_call_id: Option<String>,
    #[serde(default)]
    status: ToolStatus,
    #[serde(default)]
    artifact: Option<Value>,
}

fn required<T, E: Error>(value: Option<T>, field: &'static str) -> Result<T, E> {
    value.ok_or_else(|| E::missing_field(field))
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let id = required(wire.id, "id")?;
        let content = required(wire.content, "content")?;
        Ok(match wire.kind {
            Kind::System => Message::System(SystemMessage {
                id,
                content,
                meta: wire.meta,
            }),
            Kind::Human => Message::Human(HumanMessage {
                id,
                content,
                name: wire.name,
                images: wire.images,
                meta: wire.meta,
            }),
            Kind::Ai => Message::Ai(AiMessage {
                id,
                content,
                reasoning: wire.reasoning,
                reasoning_signature: wire.reasoning_signature,
                tool_calls: wire.tool_calls,
                usage: wire.usage,
                finish_reason: wire.finish_reason,
                model: wire.model,
                meta: wire.meta,
            }),
            Kind::Tool => Message::Tool(ToolMessage {
                id,
                tool_call_id: required(wire.tool_call_id, "tool_call_id")?,
                name: required(wire.name, "name")?,
                content,
                status: wire.status,
                artifact: wire.artifact,
                meta: wire.meta,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What the derive for the tagged enum reads, to compare with.
    #[derive(Deserialize, PartialEq, Debug)]
    #[serde(tag = "type", rename_all = "lowercase")]
    enum Derived {
        System(SystemMessage),
        Human(HumanMessage),
        Ai(AiMessage),
        Tool(ToolMessage),
    }

    impl From<Derived> for Message {
        fn from(derived: Derived) -> Self {
            match derived {
                Derived::System(m) => Message::System(m),
                Derived::Human(m) => Message::Human(m),
                Derived::Ai(m) => Message::Ai(m),
                Derived::Tool(m) => Message::Tool(m),
            }
        }
    }

    fn both(json: &Value) -> (Result<Message, String>, Result<Message, String>) {
        (
            serde_json::from_value::<Message>(json.clone()).map_err(|e| e.to_string()),
            serde_json::from_value::<Derived>(json.clone())
                .map(Message::from)
                .map_err(|e| e.to_string()),
        )
    }

    #[test]
    fn reads_what_the_derive_reads() {
        let call = json!({"id": "c1", "name": "bash", "args": {"command": "ls"}});
        let cases = [
            json!({"type": "system", "id": "s", "content": "be brief"}),
            json!({"id": "h", "content": "hi", "type": "human", "name": "loop_warning",
                   "images": [{"mime_type": "image/png", "base64": "AA=="}],
                   "meta": {"hide_from_ui": true, "extra": {"files": [1]}}}),
            json!({"type": "ai", "id": "a", "content": "", "reasoning": "r",
                   "reasoning_signature": "sig", "tool_calls": [call], "model": "m",
                   "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
                   "finish_reason": "tool_calls"}),
            json!({"type": "ai", "id": "a2", "content": "x", "finish_reason": "weird"}),
            json!({"type": "tool", "id": "t", "tool_call_id": "c1", "name": "bash",
                   "content": "out", "status": "error", "artifact": {"k": 1}}),
            json!({"type": "tool", "id": "t2", "tool_call_id": "c1", "name": "bash",
                   "content": "out"}),
            // Fields of another variant and unknown fields are ignored.
            json!({"type": "system", "id": "s2", "content": "c", "tool_call_id": "x",
                   "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
                   "unknown": [1, 2]}),
        ];
        for case in cases {
            let (ours, derived) = both(&case);
            assert!(ours.is_ok(), "{case}: {ours:?}");
            assert_eq!(ours, derived, "{case}");
            let message = ours.unwrap();
            let again: Message =
                serde_json::from_str(&serde_json::to_string(&message).unwrap()).unwrap();
            assert_eq!(again, message, "round trip of {case}");
        }
    }

    #[test]
    fn refuses_what_the_derive_refuses() {
        let cases = [
            json!({"type": "human", "content": "no id"}),
            json!({"type": "ai", "id": "a"}),
            json!({"type": "tool", "id": "t", "name": "bash", "content": "no call id"}),
            json!({"type": "tool", "id": "t", "tool_call_id": "c", "content": "no name"}),
            json!({"type": "robot", "id": "r", "content": "?"}),
            json!({"id": "untyped", "content": "?"}),
            json!({"type": "human", "id": 7, "content": "?"}),
        ];
        for case in cases {
            let (ours, derived) = both(&case);
            assert!(derived.is_err(), "the derive accepts {case}");
            assert!(ours.is_err(), "{case} was read as {ours:?}");
        }
        let missing = serde_json::from_value::<Message>(json!({"type": "human", "content": ""}))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("`id`"), "{missing}");
    }
}
