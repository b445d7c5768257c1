//! [`Text`]: the body of a message, shared instead of copied.
//!
//! A long thread's history is read on every turn: loaded from the state cache, handed to the
//! middlewares, put in the model request and compared with the previous checkpoint. With the
//! bodies behind an `Arc` those are reference-count increments and pointer comparisons instead
//! of copying and comparing hundreds of kilobytes per turn. Bodies never change once written;
//! an edit replaces the whole `Text`.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable, cheaply cloned string. Reads as `&str` through `Deref`.
#[derive(Clone, Eq, PartialOrd, Ord)]
pub struct Text(Arc<str>);

impl Text {
    pub fn as_str(&self) -> &str {
        &self.0
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
}

impl Default for Text {
    fn default() -> Self {
        Text(Arc::from(""))
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        // The common case when a history is compared with its previous checkpoint.
        self.shares_body_with(other) || *self.0 == *other.0
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
        &*self.0 == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        **self == *other.0
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text(Arc::from(text))
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text(Arc::from(text))
    }
}

impl From<&String> for Text {
    fn from(text: &String) -> Self {
        Text(Arc::from(text.as_str()))
    }
}

impl From<std::borrow::Cow<'_, str>> for Text {
    fn from(text: std::borrow::Cow<'_, str>) -> Self {
        Text(Arc::from(text))
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.0.to_string()
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `Box<str>` takes a borrowed string without an intermediate `String` when it can.
        Box::<str>::deserialize(deserializer).map(|text| Text(Arc::from(text)))
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
    }
}
