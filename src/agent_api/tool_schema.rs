//! A tool's argument schema as every OpenAI-compatible server takes it: generated from the
//! argument struct by schemars, then reduced to plain JSON Schema in one place.
//!
//! Properties keep the struct's order (serde_json's `preserve_order`): `write_file` asks for
//! `description` first, and an alphabetical list put it third. The struct's own doc comment is
//! ours, not the model's (the tool has its description). Nullability is said by leaving a field
//! out of `required`, not with `["integer", "null"]` or a `null` alternative, and schemars'
//! integer formats (`uint`, `uint32`, `double`, …) are not JSON Schema formats: some servers
//! (vLLM's guided decoding, Gemini's OpenAI endpoint) refuse a schema carrying them.

use schemars::JsonSchema;
use serde_json::{Map, Value};

/// JSON Schema for an argument struct, inlined (no `$ref`s, which providers reject) and plain.
pub(crate) fn generate<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft07().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(root) = value.as_object_mut() {
        for internal in ["$schema", "title", "description"] {
            root.shift_remove(internal);
        }
    }
    make_plain(&mut value);
    value
}

/// Rewrites `schema` (and every schema inside it) into plain JSON Schema: a nullable type, a
/// `null` alternative or enum value, and a `null` default go, and so do numeric formats.
pub fn make_plain(schema: &mut Value) {
    let Some(node) = schema.as_object_mut() else {
        return;
    };
    drop_null_type(node);
    drop_null_alternative(node);
    if let Some(Value::Array(values)) = node.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if node.get("default").is_some_and(Value::is_null) {
        node.shift_remove("default");
    }
    if let Some(Value::String(description)) = node.get_mut("description") {
        *description = unwrap_lines(description);
    }
    let numeric = matches!(
        node.get("type").and_then(Value::as_str),
        Some("integer" | "number")
    );
    if numeric {
        node.shift_remove("format");
    }
    for (key, child) in node.iter_mut() {
        match key.as_str() {
            "properties" | "definitions" | "$defs" | "patternProperties" => {
                if let Some(children) = child.as_object_mut() {
                    children.values_mut().for_each(make_plain);
                }
            }
            "items" | "additionalProperties" | "not" | "contains" => match child {
                Value::Array(items) => items.iter_mut().for_each(make_plain),
                other => make_plain(other),
            },
            "anyOf" | "oneOf" | "allOf" => {
                if let Some(alternatives) = child.as_array_mut() {
                    alternatives.iter_mut().for_each(make_plain);
                }
            }
            _ => {}
        }
    }
}

/// A doc comment's paragraph as one line: schemars keeps the source's line breaks, which read
/// as breaks in mid-sentence.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `"type": ["integer", "null"]` → `"type": "integer"`.
fn drop_null_type(node: &mut Map<String, Value>) {
    let Some(Value::Array(types)) = node.get_mut("type") else {
        return;
    };
    types.retain(|t| t != "null");
    if types.len() == 1 {
        let only = types.remove(0);
        node.insert("type".into(), only);
    }
}

/// `"anyOf": [{…}, {"type": "null"}]` → the one alternative, merged into this schema (its
/// description, if any, kept).
fn drop_null_alternative(node: &mut Map<String, Value>) {
    let Some(Value::Array(alternatives)) = node.get_mut("anyOf") else {
        return;
    };
    alternatives.retain(|a| a.get("type").and_then(Value::as_str) != Some("null"));
    if alternatives.len() != 1 {
        return;
    }
    let Some(Value::Object(only)) = alternatives.pop() else {
        return;
    };
    node.shift_remove("anyOf");
    for (key, value) in only {
        node.entry(key).or_insert(value);
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// Arguments of a test tool (internal: must not reach the model).
    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// Say why
        /// first.
        description: Option<String>,
        /// Where.
        path: String,
        /// Lines to skip.
        #[serde(default)]
        offset: Option<u32>,
        /// How many.
        count: u64,
        /// A ratio.
        ratio: Option<f64>,
        /// Which way.
        #[serde(default)]
        mode: Option<Mode>,
        /// Extra paths.
        #[serde(default)]
        more: Option<Vec<String>>,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
        Slow,
    }

    #[test]
    fn schemas_keep_the_declared_order_and_are_plain_json_schema() {
        let schema = generate::<Args>();
        let properties = schema["properties"].as_object().unwrap();
        let order: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(
            order,
            [
                "description",
                "path",
                "offset",
                "count",
                "ratio",
                "mode",
                "more"
            ]
        );
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "description": {"description": "Say why first.", "type": "string"},
                    "path": {"description": "Where.", "type": "string"},
                    "offset": {"description": "Lines to skip.", "type": "integer", "minimum": 0},
                    "count": {"description": "How many.", "type": "integer", "minimum": 0},
                    "ratio": {"description": "A ratio.", "type": "number"},
                    "mode": {"description": "Which way.", "type": "string", "enum": ["fast", "slow"]},
                    "more": {"description": "Extra paths.", "type": "array", "items": {"type": "string"}},
                },
                "required": ["path", "count"],
            })
        );
        let text = schema.to_string();
        assert!(
            !text.contains("Arguments of") && !text.contains("null"),
            "{text}"
        );
    }
}
