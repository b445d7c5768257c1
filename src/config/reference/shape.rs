//! Reading the config's JSON schema as the reference needs it: which keys hold another struct
//! (a section of their own), and a short type text for the others.

use serde_json::{Map, Value};

use crate::config::reference::{Leaf, default_text};

/// Set with `#[schemars(extend("x-required" = true))]` on a key validation requires.
const REQUIRED_MARK: &str = "x-required";

/// The type text of a `Secret`.
const SECRET_TYPE: &str = "secret string";

/// A key that holds a struct, a list of structs or a map of structs: its own section.
pub(crate) struct Nested<'a> {
    /// `gateway`, `gateway.api_tokens[]`, `pricing.<name>`.
    pub(crate) path: String,
    /// The struct's schema (definitions resolved).
    pub(crate) schema: &'a Value,
    /// The key's doc comment.
    pub(crate) description: Option<String>,
    /// The struct type's own doc comment, when it says something else.
    pub(crate) type_description: Option<String>,
    /// The key's default (the parent's `Default` serialized): its fields' defaults, which may
    /// differ from the struct type's own `Default`.
    pub(crate) default: Option<&'a Value>,
}

/// The schema's named definitions, to resolve `$ref`s.
pub(crate) struct Schemas<'a> {
    definitions: Option<&'a Map<String, Value>>,
}

impl<'a> Schemas<'a> {
    pub(crate) fn new(root: &'a Value) -> Self {
        Self {
            definitions: root.get("$defs").and_then(Value::as_object),
        }
    }

    /// The keys of the struct `schema` under `prefix`: value rows, then nested sections.
    pub(crate) fn split(
        &self,
        schema: &'a Value,
        prefix: &str,
        inherited: Option<&'a Value>,
    ) -> (Vec<Leaf>, Vec<Nested<'a>>) {
        let schema = self.resolve(schema);
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut leaves = Vec::new();
        let mut nested = Vec::new();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return (leaves, nested);
        };
        // Sorted here, not by the map: serde_json's `preserve_order` (a feature any dependency
        // may turn on) would otherwise change the page.
        let mut properties: Vec<(&String, &'a Value)> = properties.iter().collect();
        properties.sort_by_key(|(key, _)| *key);
        for (key, property) in properties {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            let description = text(property, "description");
            let inherited = inherited.and_then(|parent| parent.get(key));
            let default = inherited.or_else(|| property.get("default"));
            if let Some((suffix, target)) = self.nested(property) {
                let type_description =
                    text(target, "description").filter(|own| Some(own) != description.as_ref());
                nested.push(Nested {
                    path: format!("{path}{suffix}"),
                    schema: target,
                    description,
                    type_description,
                    default: default.filter(|_| suffix.is_empty()),
                });
                continue;
            }
            // `x-required` marks a key the checks insist on although its type has a default (a
            // model's `name`); a default the parent gives (`summarization.keep`) still shows.
            let must_set = required.contains(&key.as_str())
                || property.get(REQUIRED_MARK) == Some(&Value::Bool(true));
            let default = match (inherited, default) {
                (Some(value), _) => default_text(value),
                (None, _) if must_set => "*required*".into(),
                (None, Some(value)) => default_text(value),
                (None, None) => "unset".into(),
            };
            let notes = self.variant_notes(property);
            let description = [description.unwrap_or_default(), notes]
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            leaves.push(Leaf {
                path,
                type_text: self.type_text(property),
                default,
                description,
            });
        }
        (leaves, nested)
    }

    /// Keys of `root` and of every definition whose type is a secret string.
    pub(crate) fn secret_keys(&self, root: &'a Value) -> std::collections::BTreeSet<String> {
        let structs =
            std::iter::once(root).chain(self.definitions.into_iter().flat_map(Map::values));
        structs
            .filter_map(|schema| schema.get("properties").and_then(Value::as_object))
            .flatten()
            .filter(|(_, property)| self.type_text(property) == SECRET_TYPE)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// `Some(("", struct))`, `Some(("[]", struct))` or `Some((".<name>", struct))` when the key
    /// holds a struct, a list of them or a map of them.
    fn nested(&self, property: &'a Value) -> Option<(&'static str, &'a Value)> {
        let schema = self.resolve(self.without_null(property));
        if is_struct(schema) {
            return Some(("", schema));
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("array") => {
                let items = self.resolve(schema.get("items")?);
                is_struct(items).then_some(("[]", items))
            }
            Some("object") if schema.get("properties").is_none() => {
                let values = self.resolve(schema.get("additionalProperties")?);
                is_struct(values).then_some((".<name>", values))
            }
            _ => None,
        }
    }

    fn resolve(&self, schema: &'a Value) -> &'a Value {
        let target = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.strip_prefix("#/$defs/"))
            .and_then(|name| self.definitions?.get(name));
        match target {
            Some(target) => self.resolve(target),
            None => schema,
        }
    }

    /// An `Option`'s schema (`anyOf: [T, null]`) as `T`.
    fn without_null(&self, schema: &'a Value) -> &'a Value {
        let Some(alternatives) = schema.get("anyOf").and_then(Value::as_array) else {
            return schema;
        };
        let mut others = alternatives.iter().filter(|alt| !is_null(alt));
        match (others.next(), others.next()) {
            (Some(only), None) if alternatives.len() == 2 => only,
            _ => schema,
        }
    }

    /// A short type: `integer`, `list of string`, `one of `a`, `b``, `secret string` …
    pub(crate) fn type_text(&self, schema: &'a Value) -> String {
        let schema = self.resolve(self.without_null(schema));
        if let Some(values) = self.enum_values(schema) {
            return format!("one of {}", values.join(", "));
        }
        if let Some(alternatives) = alternatives(schema) {
            return alternatives
                .iter()
                .filter(|alt| !is_null(alt))
                .map(|alt| self.type_text(alt))
                .collect::<Vec<_>>()
                .join(" or ");
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect(),
            _ => Vec::new(),
        };
        let texts: Vec<String> = types.iter().map(|t| self.named_type(t, schema)).collect();
        if texts.is_empty() {
            "any".into()
        } else {
            texts.join(" or ")
        }
    }

    fn named_type(&self, name: &str, schema: &'a Value) -> String {
        match name {
            "string" if schema.get("format").and_then(Value::as_str) == Some("secret") => {
                SECRET_TYPE.into()
            }
            "array" => match schema.get("items") {
                Some(items) => format!("list of {}", self.type_text(items)),
                None => "list".into(),
            },
            "object" => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    let mut keys: Vec<String> =
                        properties.keys().map(|k| format!("`{k}`")).collect();
                    keys.sort();
                    format!("map of {}", keys.join(", "))
                } else {
                    match schema.get("additionalProperties") {
                        Some(values @ Value::Object(_)) => {
                            format!("map of name → {}", self.type_text(values))
                        }
                        _ => "map".into(),
                    }
                }
            }
            other => other.into(),
        }
    }

    /// The values of a string enum (`enum: [...]`, or `oneOf` of `const`s when the variants
    /// have doc comments), as code.
    fn enum_values(&self, schema: &'a Value) -> Option<Vec<String>> {
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return Some(values.iter().map(code).collect());
        }
        let mut values = Vec::new();
        for alternative in alternatives(schema)? {
            let alternative = self.resolve(alternative);
            if let Some(value) = alternative.get("const") {
                values.push(code(value));
            } else {
                values.extend(self.enum_values(alternative)?);
            }
        }
        Some(values)
    }

    /// "`a`: what a means." for each documented enum variant.
    fn variant_notes(&self, schema: &'a Value) -> String {
        let schema = self.resolve(self.without_null(schema));
        let Some(alternatives) = alternatives(schema) else {
            return String::new();
        };
        alternatives
            .iter()
            .filter_map(|alt| {
                let alt = self.resolve(alt);
                Some(format!(
                    "`{}`: {}",
                    alt.get("const")?.as_str()?,
                    text(alt, "description")?
                ))
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn alternatives(schema: &Value) -> Option<&Vec<Value>> {
    schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
}

fn is_struct(schema: &Value) -> bool {
    schema.get("properties").is_some() && alternatives(schema).is_none()
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

fn text(schema: &Value, key: &str) -> Option<String> {
    schema.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn code(value: &Value) -> String {
    match value {
        Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    }
}
