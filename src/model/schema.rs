//! [`Schema`]: a tool's JSON Schema with its JSON text made once.
//!
//! Every model request carries every tool's schema. Serialized from the `Value` tree each time,
//! the nine built-in tools cost ~70 K instructions and ~1,000 allocations per model call
//! (callgrind, a fresh thread's turn: 5 % of it); written from the kept text, they are a copy.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// Reads as the schema's `Value`; serializes as the JSON text made when it was built.
#[derive(Clone)]
pub struct Schema(Arc<Body>);

struct Body {
    value: Value,
    json: Box<RawValue>,
}

impl From<Value> for Schema {
    fn from(value: Value) -> Self {
        let json = serde_json::value::to_raw_value(&value).expect("a Value always serializes");
        Schema(Arc::new(Body { value, json }))
    }
}

impl Deref for Schema {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0.value
    }
}

impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.json.serialize(serializer)
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0.value, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_as_the_value_would() {
        let value = json!({"type": "object", "properties": {"path": {"type": "string", "description": "a \"quoted\"\npath"}}, "required": ["path"]});
        let schema = Schema::from(value.clone());
        assert_eq!(
            serde_json::to_string(&schema).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        assert_eq!(serde_json::to_value(&schema).unwrap(), value);
        assert_eq!(*schema, value);
        assert_eq!(schema, Schema::from(value));
    }
}
