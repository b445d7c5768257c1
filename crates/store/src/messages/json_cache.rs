//! [`JsonCache`]: the JSON form of a history's messages, kept between serializations.
//!
//! Why: a long thread's whole history goes out in every `/runs/wait` answer, `/state` read and
//! streamed values event. Message bodies keep their JSON string form already (`Text`), but the
//! envelope around them (`type`, `id`, `content`, the usage counters, the finish reason…) was
//! written key by key every time, and serde_json scans each key and short value for escapes:
//! about ten short strings per message, a third of a turn's instructions at 1,000 messages
//! (callgrind). A message made only of shared text and small values keeps its serialized form
//! here, checked against the message before every use (same text bodies, same values), so an
//! edited or replaced message is serialized afresh. Messages with anything else (tool calls,
//! meta, images, reasoning) are written directly, as before. Like `Text`, this relies on
//! messages only ever being serialized as JSON.

use std::sync::{Mutex, TryLockError};

use serde::Serializer;
use serde::ser::SerializeSeq;
use serde_json::value::RawValue;

use crate::messages::{AiMessage, FinishReason, HumanMessage, Message, SystemMessage, Text, Usage};

/// Kept forms by position in the list: a history only grows at its end between turns, so
/// positions stay aligned; a position whose message changed is checked, missed and redone.
#[derive(Default)]
pub(crate) struct JsonCache(Mutex<Positions>);

#[derive(Default)]
struct Positions {
    /// Serialized before: forms are kept from the second time on. A history written once (a
    /// thread folded again because the state cache could not hold it, as in a soak over more
    /// threads than fit) would otherwise pay for keeping every message and never use it.
    warm: bool,
    kept: Vec<Option<Kept>>,
}

/// What each position takes besides the JSON text itself (for the state cache's weight).
pub(crate) const KEPT_SLOT_BYTES: usize = std::mem::size_of::<Option<Kept>>();

struct Kept {
    key: Fields<Text>,
    json: Box<RawValue>,
}

/// A message's fields as far as its JSON form depends on them. Borrowed from the message to
/// check a kept form; owned in the kept form's key, which holds the text bodies (not just their
/// addresses) so a pointer comparison can never match a new body that reused a freed one's
/// memory.
struct Fields<T> {
    kind: Kind,
    id: T,
    content: T,
    model: Option<T>,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    System,
    Human,
    Ai,
}

impl<'a> Fields<&'a Text> {
    /// The fields of `message` if its form can be kept. Destructures every field, so a field
    /// added to a message type is a compile error here until it is either compared or excluded.
    fn of(message: &'a Message) -> Option<Self> {
        match message {
            Message::System(SystemMessage { id, content, meta }) => {
                meta.is_empty().then_some(Fields {
                    kind: Kind::System,
                    id,
                    content,
                    model: None,
                    usage: None,
                    finish_reason: None,
                })
            }
            Message::Human(HumanMessage {
                id,
                content,
                name,
                images,
                meta,
            }) => (name.is_none() && images.is_empty() && meta.is_empty()).then_some(Fields {
                kind: Kind::Human,
                id,
                content,
                model: None,
                usage: None,
                finish_reason: None,
            }),
            Message::Ai(AiMessage {
                id,
                content,
                reasoning,
                reasoning_signature,
                tool_calls,
                usage,
                finish_reason,
                model,
                meta,
            }) => {
                // A provider's own finish reason is free text: written directly.
                let plain = reasoning.is_none()
                    && reasoning_signature.is_none()
                    && tool_calls.is_empty()
                    && meta.is_empty()
                    && !matches!(finish_reason, Some(FinishReason::Other(_)));
                plain.then(|| Fields {
                    kind: Kind::Ai,
                    id,
                    content,
                    model: model.as_ref(),
                    usage: *usage,
                    finish_reason: finish_reason.clone(),
                })
            }
            // Tool results carry owned strings and free-form artifacts: written directly.
            Message::Tool(_) => None,
        }
    }

    fn to_owned_key(&self) -> Fields<Text> {
        Fields {
            kind: self.kind,
            id: self.id.clone(),
            content: self.content.clone(),
            model: self.model.cloned(),
            usage: self.usage,
            finish_reason: self.finish_reason.clone(),
        }
    }
}

impl Fields<Text> {
    fn matches(&self, fields: &Fields<&Text>) -> bool {
        self.kind == fields.kind
            && self.finish_reason == fields.finish_reason
            && self.usage == fields.usage
            && self.id.shares_body_with(fields.id)
            && self.content.shares_body_with(fields.content)
            && match (&self.model, fields.model) {
                (None, None) => true,
                (Some(kept), Some(model)) => kept.shares_body_with(model),
                _ => false,
            }
    }
}

impl JsonCache {
    /// Writes `messages` as a JSON array, from kept forms where they still match.
    pub(crate) fn serialize<S: Serializer>(
        &self,
        messages: &[Message],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut positions = match self.0.try_lock() {
            Ok(positions) => positions,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            // Another serialization of this history is using the cache: write directly
            // rather than wait for it.
            Err(TryLockError::WouldBlock) => return serializer.collect_seq(messages),
        };
        if !positions.warm {
            positions.warm = true;
            drop(positions);
            return serializer.collect_seq(messages);
        }
        let kept = &mut positions.kept;
        kept.resize_with(messages.len(), || None);
        let mut seq = serializer.serialize_seq(Some(messages.len()))?;
        for (message, slot) in messages.iter().zip(kept.iter_mut()) {
            let Some(fields) = Fields::of(message) else {
                *slot = None;
                seq.serialize_element(message)?;
                continue;
            };
            if !slot.as_ref().is_some_and(|k| k.key.matches(&fields)) {
                *slot = serde_json::value::to_raw_value(message)
                    .ok()
                    .map(|json| Kept {
                        key: fields.to_owned_key(),
                        json,
                    });
            }
            match slot {
                Some(kept) => seq.serialize_element(&kept.json)?,
                None => seq.serialize_element(message)?,
            }
        }
        seq.end()
    }

    /// Bytes held by kept forms.
    #[cfg(test)]
    pub(crate) fn kept_bytes(&self) -> usize {
        let positions = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        positions
            .kept
            .iter()
            .flatten()
            .map(|kept| kept.json.get().len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;
    use serde_json::json;

    use super::*;
    use crate::messages::{MessageMeta, ToolCall, ToolMessage};

    /// Serializes `messages` through `cache`, the way `History` does.
    struct Through<'a>(&'a JsonCache, &'a [Message]);

    impl Serialize for Through<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            self.0.serialize(self.1, serializer)
        }
    }

    fn cached(cache: &JsonCache, messages: &[Message]) -> String {
        serde_json::to_string(&Through(cache, messages)).unwrap()
    }

    fn direct(messages: &[Message]) -> String {
        serde_json::to_string(messages).unwrap()
    }

    fn every_kind() -> Vec<Message> {
        let call = ToolCall {
            id: "call-1".into(),
            name: "bash".into(),
            args: json!({"command": "ls"}),
            args_error: None,
        };
        let mut answer = Message::ai("done \"quoted\"\n");
        if let Message::Ai(ai) = &mut answer {
            ai.usage = Some(Usage {
                input_tokens: 3,
                output_tokens: 4,
                total_tokens: 7,
                ..Default::default()
            });
            ai.finish_reason = Some(FinishReason::Stop);
            ai.model = Some("gpt-x".into());
        }
        let mut calling = Message::ai("");
        if let Message::Ai(ai) = &mut calling {
            ai.tool_calls = vec![call.clone()];
        }
        let mut hidden = Message::human("reminder");
        if let Message::Human(human) = &mut hidden {
            human.meta = MessageMeta {
                hide_from_ui: true,
                ..MessageMeta::default()
            };
        }
        vec![
            Message::system("be brief"),
            Message::human("héllo \u{1F600}"),
            hidden,
            calling,
            Message::Tool(ToolMessage::success(&call, "a.txt")),
            answer,
        ]
    }

    #[test]
    fn writes_what_direct_serialization_writes_cold_and_warm() {
        let messages = every_kind();
        let cache = JsonCache::default();
        assert_eq!(cached(&cache, &messages), direct(&messages), "first");
        assert_eq!(
            cache.kept_bytes(),
            0,
            "nothing kept from a first serialization"
        );
        assert_eq!(cached(&cache, &messages), direct(&messages), "cold");
        assert!(cache.kept_bytes() > 0, "plain messages were kept");
        assert_eq!(cached(&cache, &messages), direct(&messages), "warm");
    }

    #[test]
    fn a_changed_message_is_written_afresh() {
        let mut messages = every_kind();
        let cache = JsonCache::default();
        cached(&cache, &messages);
        cached(&cache, &messages);
        // Every field a kept form depends on, changed in place.
        if let Message::Human(human) = &mut messages[1] {
            human.content.push_str(" again");
        }
        if let Message::Ai(ai) = &mut messages[5] {
            ai.usage = Some(Usage::default());
            ai.finish_reason = Some(FinishReason::Length);
            ai.model = None;
        }
        if let Message::System(system) = &mut messages[0] {
            system.meta.extra.insert("k".into(), json!(1));
        }
        messages[2].set_id("renamed".into());
        assert_eq!(cached(&cache, &messages), direct(&messages));
        // Back to plain: kept again, and still right.
        if let Message::System(system) = &mut messages[0] {
            system.meta = MessageMeta::default();
        }
        assert_eq!(cached(&cache, &messages), direct(&messages));
        assert_eq!(cached(&cache, &messages), direct(&messages));
    }

    #[test]
    fn follows_the_list_as_it_grows_shrinks_and_diverges() {
        let cache = JsonCache::default();
        let mut longer = every_kind();
        longer.push(Message::human("next"));
        let shorter = every_kind();
        assert_eq!(cached(&cache, &longer), direct(&longer));
        assert_eq!(cached(&cache, &longer), direct(&longer));
        assert_eq!(cached(&cache, &shorter), direct(&shorter));
        let other: Vec<Message> = every_kind().into_iter().rev().collect();
        for _ in 0..2 {
            assert_eq!(cached(&cache, &other), direct(&other));
            assert_eq!(cached(&cache, &longer), direct(&longer));
        }
        assert_eq!(cached(&cache, &[]), "[]");
        assert_eq!(cache.kept_bytes(), 0, "nothing kept past the list's end");
    }

    #[test]
    fn other_serializers_read_the_same_values() {
        let messages = every_kind();
        let cache = JsonCache::default();
        cached(&cache, &messages);
        cached(&cache, &messages);
        assert_eq!(
            serde_json::to_value(Through(&cache, &messages)).unwrap(),
            serde_json::to_value(&messages).unwrap()
        );
        assert_eq!(
            serde_json::to_string_pretty(&Through(&cache, &messages))
                .map(|text| serde_json::from_str::<serde_json::Value>(&text).unwrap())
                .unwrap(),
            serde_json::to_value(&messages).unwrap()
        );
    }
}
