//! Answers a server's `elicitation/create` (SEP-1034) without a person: Antler either declines,
//! or accepts with the defaults the form itself declares.
//!
//! Why defaults only: nothing in a model's run or in `antler mcp probe` can ask a person
//! mid-call, and inventing a value for a field the server needs would be worse than declining.
//! A form is accepted only when every required field has a default; its other defaulted fields
//! are filled in too (string, integer, number, boolean and enum defaults are all plain JSON
//! values, taken as the server wrote them).

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// How a server's `elicitation/create` is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ElicitationPolicy {
    /// The capability is not declared (the daemon: no person to ask mid-turn).
    #[default]
    Unsupported,
    /// Declared, and every request declined.
    Decline,
    /// Declared, and a request accepted with the form's defaults when every required field
    /// has one (declined otherwise).
    AcceptDefaults,
}

/// Why a form cannot be filled from its defaults.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum FormError {
    #[error("the required field `{0}` has no default")]
    RequiredWithoutDefault(String),
    #[error("the requested schema is not an object with properties")]
    NotAnObject,
}

/// The answer to one `elicitation/create` under `policy`.
pub(crate) fn answer(policy: ElicitationPolicy, request: &ElicitRequestParams) -> ElicitResult {
    let decline = ElicitResult::new(ElicitationAction::Decline);
    match (policy, request) {
        (ElicitationPolicy::Unsupported | ElicitationPolicy::Decline, _) => decline,
        (
            ElicitationPolicy::AcceptDefaults,
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            },
        ) => {
            let schema = match serde_json::to_value(requested_schema) {
                Ok(schema) => schema,
                Err(error) => {
                    tracing::info!(%error, "Declining an MCP elicitation: its schema does not serialize");
                    return decline;
                }
            };
            match fill_defaults(&schema) {
                Ok(content) => ElicitResult::new(ElicitationAction::Accept)
                    .with_content(Value::Object(content)),
                Err(error) => {
                    tracing::info!(%error, "Declining an MCP elicitation");
                    decline
                }
            }
        }
        // A URL form needs a person at a browser.
        (ElicitationPolicy::AcceptDefaults, _) => {
            tracing::info!("Declining an MCP elicitation: URL elicitation needs a person");
            decline
        }
    }
}

/// The form's content from its defaults: every property with a `default`, provided every
/// required property has one.
pub(crate) fn fill_defaults(schema: &Value) -> Result<Map<String, Value>, FormError> {
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .ok_or(FormError::NotAnObject)?;
    let content: Map<String, Value> = properties
        .iter()
        .filter_map(|(name, property)| Some((name.clone(), property.get("default")?.clone())))
        .collect();
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !content.contains_key(name) {
            return Err(FormError::RequiredWithoutDefault(name.to_string()));
        }
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The conformance suite's SEP-1034 form: one default of each kind, nothing required.
    fn every_kind() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true}
            },
            "required": []
        })
    }

    #[test]
    fn forms_are_filled_from_their_defaults_or_refused() {
        let cases: Vec<(&str, Value, Result<Value, FormError>)> = vec![
            (
                "every kind of default",
                every_kind(),
                Ok(json!({"name": "John Doe", "age": 30, "score": 95.5,
                          "status": "active", "verified": true})),
            ),
            (
                "required fields with defaults, optional field without",
                json!({"type": "object",
                       "properties": {"a": {"type": "string", "default": "x"},
                                      "b": {"type": "integer"}},
                       "required": ["a"]}),
                Ok(json!({"a": "x"})),
            ),
            (
                "a required field without a default",
                json!({"type": "object",
                       "properties": {"a": {"type": "string", "default": "x"},
                                      "email": {"type": "string"}},
                       "required": ["a", "email"]}),
                Err(FormError::RequiredWithoutDefault("email".into())),
            ),
            (
                "no required list",
                json!({"type": "object", "properties": {"n": {"type": "number"}}}),
                Ok(json!({})),
            ),
            (
                "not an object",
                json!({"type": "string"}),
                Err(FormError::NotAnObject),
            ),
        ];
        for (name, schema, expected) in cases {
            let got = fill_defaults(&schema).map(Value::Object);
            assert_eq!(got, expected, "{name}");
        }
    }

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({
            "mode": "form",
            "message": "please accept",
            "requestedSchema": schema
        }))
        .unwrap()
    }

    #[test]
    fn the_policy_decides_between_declining_and_the_defaults() {
        let request = form(every_kind());
        let accepted = answer(ElicitationPolicy::AcceptDefaults, &request);
        assert_eq!(accepted.action, ElicitationAction::Accept);
        assert_eq!(
            accepted.content,
            Some(json!({"name": "John Doe", "age": 30, "score": 95.5,
                        "status": "active", "verified": true}))
        );
        for policy in [ElicitationPolicy::Decline, ElicitationPolicy::Unsupported] {
            let declined = answer(policy, &request);
            assert_eq!(declined.action, ElicitationAction::Decline, "{policy:?}");
            assert_eq!(declined.content, None);
        }
        let missing = form(json!({"type": "object",
                                  "properties": {"code": {"type": "string"}},
                                  "required": ["code"]}));
        let declined = answer(ElicitationPolicy::AcceptDefaults, &missing);
        assert_eq!(declined.action, ElicitationAction::Decline);
    }

    #[test]
    fn a_request_without_a_mode_is_a_form() {
        // 2025-06-18 servers (and the conformance suite) send no `mode`.
        let request: ElicitRequestParams = serde_json::from_value(json!({
            "message": "please accept",
            "requestedSchema": every_kind()
        }))
        .unwrap();
        let accepted = answer(ElicitationPolicy::AcceptDefaults, &request);
        assert_eq!(accepted.action, ElicitationAction::Accept);
    }
}
