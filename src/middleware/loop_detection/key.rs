//! The identity of a batch of tool calls: what counts as "the same call again" for loop detection.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use antler_store::messages::ToolCall;

/// Arguments that identify what a generic tool call is about (others, like timeouts, are noise).
const SALIENT_ARGS: [&str; 7] = ["path", "url", "query", "command", "pattern", "glob", "cmd"];
/// `read_file` calls within the same 200-line bucket read "the same place".
const READ_FILE_BUCKET_LINES: i64 = 200;

/// Hash (12 hex chars) of the sorted `name:key` list of a response's tool calls, so the same
/// calls in a different order hash the same.
pub fn calls_hash(calls: &[ToolCall]) -> String {
    let mut keys: Vec<String> = calls
        .iter()
        .map(|c| format!("{}:{}", c.name, call_key(&c.name, &c.args)))
        .collect();
    keys.sort();
    let digest = Sha256::digest(keys.join("\n").as_bytes());
    hex::encode(digest)[..12].to_string()
}

/// The part of a call's arguments that identifies it.
pub fn call_key(name: &str, args: &Value) -> String {
    // Some models send the arguments object as a JSON string.
    let parsed;
    let args = match args {
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(value) => {
                parsed = value;
                &parsed
            }
            Err(_) => args,
        },
        _ => args,
    };
    match name {
        "read_file" => read_file_key(args),
        "write_file" | "str_replace" => canonical_json(args),
        _ => {
            let salient: Map<String, Value> = match args {
                Value::Object(map) => SALIENT_ARGS
                    .iter()
                    .filter_map(|k| map.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect(),
                _ => Map::new(),
            };
            if salient.is_empty() {
                canonical_json(args)
            } else {
                canonical_json(&Value::Object(salient))
            }
        }
    }
}

fn read_file_key(args: &Value) -> String {
    let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
    let start = args.get("start_line").and_then(as_line);
    let end = args.get("end_line").and_then(as_line);
    if start.is_none() && end.is_none() {
        return format!("{path}:all");
    }
    let start = start.unwrap_or(1);
    let end = end.unwrap_or(start);
    let (low, high) = if start <= end {
        (start, end)
    } else {
        (end, start)
    };
    let bucket = |line: i64| (line.max(1) - 1).div_euclid(READ_FILE_BUCKET_LINES);
    format!("{path}:{}-{}", bucket(low), bucket(high))
}

fn as_line(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
}

/// JSON with object keys sorted at every level, so key order never changes the hash.
fn canonical_json(value: &Value) -> String {
    fn sort(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sort(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "x".into(),
            name: name.into(),
            args,
            args_error: None,
        }
    }

    #[test]
    fn generic_calls_key_on_salient_args_only() {
        let a = call_key("bash", &json!({"command": "ls", "timeout": 5}));
        let b = call_key("bash", &json!({"command": "ls", "timeout": 9}));
        assert_eq!(a, b);
        assert_ne!(a, call_key("bash", &json!({"command": "pwd"})));
        assert_eq!(
            call_key("x", &json!({"b": 1, "a": 2})),
            call_key("x", &json!({"a": 2, "b": 1}))
        );
    }

    #[test]
    fn string_args_are_parsed() {
        assert_eq!(
            call_key("web_search", &json!("{\"query\": \"rust\", \"n\": 3}")),
            call_key("web_search", &json!({"query": "rust"}))
        );
    }

    #[test]
    fn read_file_uses_line_buckets() {
        let key = |s: i64, e: i64| {
            call_key(
                "read_file",
                &json!({"path": "/a", "start_line": s, "end_line": e}),
            )
        };
        assert_eq!(key(1, 150), key(10, 200));
        assert_ne!(key(1, 150), key(201, 300));
        assert_eq!(key(1, 150), "/a:0-0");
        assert_eq!(call_key("read_file", &json!({"path": "/a"})), "/a:all");
    }

    #[test]
    fn write_file_keys_on_full_args() {
        assert_ne!(
            call_key("write_file", &json!({"path": "/a", "content": "1"})),
            call_key("write_file", &json!({"path": "/a", "content": "2"}))
        );
    }

    #[test]
    fn hash_is_twelve_hex_chars() {
        let hash = calls_hash(&[call("ls", json!({"path": "/"}))]);
        assert_eq!(hash.len(), 12);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
