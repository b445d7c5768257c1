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

use std::borrow::Borrow;
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
    pub fn json(&self) -> &RawValue {
        self.0.json.get_or_init(|| {
            // A `str` always serializes, and its escaped form is always a valid literal.
            let literal = serde_json::to_string(&*self.0.text).unwrap_or_else(|_| "\"\"".into());
            RawValue::from_string(literal)
                .unwrap_or_else(|_| RawValue::from_string("\"\"".into()).expect("a literal"))
        })
    }

    /// Bytes held, counting the JSON form once it exists (for cache weights).
    pub fn held_bytes(&self) -> usize {
        self.0.text.len() + self.0.json.get().map_or(0, |json| json.get().len())
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

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0.text
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0.text
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        // The common case when a history is compared with its previous checkpoint.
        self.shares_body_with(other) || self.0.text == other.0.text
    }
}

impl Eq for Text {}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

// Hashes as the `str` it borrows as, so a `Text` key is found by a `&str` lookup.
impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
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

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        *self == *other.0.text
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        **self == *other.0.text
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        **self == *other.0.text
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

impl From<&String> for Text {
    fn from(text: &String) -> Self {
        Text::new(Box::from(text.as_str()))
    }
}

impl From<std::borrow::Cow<'_, str>> for Text {
    fn from(text: std::borrow::Cow<'_, str>) -> Self {
        Text::new(text.into_owned().into_boxed_str())
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.0.text.to_string()
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
        assert_eq!("hello", text);
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
        assert_eq!(text.held_bytes(), 8);
        let copy = text.clone();
        assert_eq!(text.json().get(), r#""tab\there""#);
        assert!(std::ptr::eq(text.json(), copy.json()));
        assert_eq!(copy.held_bytes(), 8 + 11);
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
