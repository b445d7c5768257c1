//! [`Text`]: the body of a message, shared instead of copied.
//!
//! A long thread's history is read on every turn: loaded from the state cache, handed to the
//! middlewares, put in the model request, compared with the previous checkpoint and returned
//! by `/runs/wait`. With the bodies behind an `Arc` those are reference-count increments and
//! pointer comparisons instead of copying and comparing hundreds of kilobytes per turn. Bodies
//! never change once written; an edit replaces the whole `Text`.
//!
//! Each body also keeps its JSON string form once it has been serialized: the same text goes
//! out in every later model request and state answer, and escaping it again each time was the
//! largest cost of a turn on a long thread. Messages are only ever serialized as JSON (store
//! records, HTTP, SSE, model requests), which is what makes handing serde_json the finished
//! string sound.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// An immutable, cheaply cloned string. Reads as `&str` through `Deref`.
#[derive(Clone)]
pub struct Text(Arc<Body>);

struct Body {
    text: Box<str>,
    /// The text as a JSON string literal, made at the first serialization.
    json: OnceLock<Box<RawValue>>,
}

impl Text {
    fn new(text: Box<str>) -> Self {
        Text(Arc::new(Body {
            text,
            json: OnceLock::new(),
        }))
    }

    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// Appends by replacing the body (other holders keep the old one).
    pub fn push_str(&mut self, more: &str) {
        let mut text = String::with_capacity(self.len() + more.len());
        text.push_str(self);
        text.push_str(more);
        *self = Text::from(text);
    }

    /// Inserts at byte `at` by replacing the body; panics off a char boundary like `String`.
    pub fn insert_str(&mut self, at: usize, inserted: &str) {
        let mut text = self.to_string();
        text.insert_str(at, inserted);
        *self = Text::from(text);
    }

    /// Whether both are the same shared body (not merely equal text).
    pub fn shares_body_with(&self, other: &Text) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The text as a JSON string literal (quoted and escaped), kept after the first call.
    pub fn json_literal(&self) -> &str {
        self.json().get()
    }

    fn json(&self) -> &RawValue {
        self.0.json.get_or_init(|| {
            let literal = serde_json::to_string(self.as_str()).expect("a str always serializes");
            RawValue::from_string(literal).expect("an escaped str is a valid JSON literal")
        })
    }
}

impl Default for Text {
    fn default() -> Self {
        Text::new(Box::from(""))
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0.text
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        // The common case when a history is compared with its previous checkpoint.
        self.shares_body_with(other) || self.0.text == other.0.text
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        *self.0.text == *other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        *self.0.text == **other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0.text == **other
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0.text, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0.text, f)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text::new(text.into_boxed_str())
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text::new(Box::from(text))
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `Box<str>` takes a borrowed string without an intermediate `String` when it can.
        Box::<str>::deserialize(deserializer).map(Text::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_body_and_compare_as_text() {
        let text = Text::from("hello".to_string());
        let copy = text.clone();
        assert!(copy.shares_body_with(&text));
        assert_eq!(copy, text);
        let equal = Text::from("hello");
        assert!(!equal.shares_body_with(&text));
        assert_eq!(equal, text);
        assert_ne!(Text::from("other"), text);
        assert_eq!(text, "hello");
        assert_eq!(text.len(), 5);
        assert_eq!(Text::default(), "");
    }

    #[test]
    fn serializes_as_a_plain_json_string() {
        let text = Text::from("line \"one\"\nline two");
        let json = serde_json::to_string(&text).unwrap();
        assert_eq!(json, r#""line \"one\"\nline two""#);
        let back: Text = serde_json::from_str(&json).unwrap();
        assert_eq!(back, text);
        let value: Text = serde_json::from_value(serde_json::json!("from a value")).unwrap();
        assert_eq!(value, "from a value");
        // Through a `Value` too (the JSON form is parsed back into a string there).
        assert_eq!(
            serde_json::to_value(&text).unwrap(),
            serde_json::json!("line \"one\"\nline two")
        );
    }

    #[test]
    fn the_json_form_is_made_once_and_shared_by_clones() {
        let text = Text::from("tab\there");
        assert!(
            text.0.json.get().is_none(),
            "made only when first serialized"
        );
        let copy = text.clone();
        assert_eq!(text.json().get(), r#""tab\there""#);
        assert!(std::ptr::eq(text.json(), copy.json()));
        assert_eq!(copy.0.json.get().map(|json| json.get().len()), Some(11));
        let edited = {
            let mut edited = copy.clone();
            edited.push_str("!");
            edited
        };
        assert_eq!(serde_json::to_string(&edited).unwrap(), r#""tab\there!""#);
        assert_eq!(serde_json::to_string(&copy).unwrap(), r#""tab\there""#);
        let unicode = Text::from("héllo \u{1F600} \u{0007}");
        let json = serde_json::to_string(&unicode).unwrap();
        assert_eq!(
            serde_json::from_str::<String>(&json).unwrap(),
            unicode.as_str()
        );
    }
}
