//! Decoding the env-resolved value tree into [`AppConfig`] while collecting every unknown key and
//! type error.
//!
//! serde stops at the first error, yet the operator should see every problem at once. So a
//! failing value is recorded, replaced by a placeholder that decodes (absent, `""`, `0`, `{}` …),
//! and decoding is retried. Paths that were patched are returned so semantic validation does not
//! also complain about the placeholders.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;

use crate::config::AppConfig;
use crate::config::env::EnvResolution;
use crate::config::problem::{ConfigProblem, KeyPath, Segment, is_secret};

/// The outcome of [`decode`].
#[derive(Debug)]
pub(crate) struct Decoded {
    /// `None` when the tree could not be patched into something decodable.
    pub(crate) config: Option<AppConfig>,
    pub(crate) problems: Vec<ConfigProblem>,
    /// Key paths replaced by placeholders; problems at or under them are not real.
    pub(crate) patched: Vec<String>,
}

/// Each retry fixes one value, so this bounds the number of problems reported per file.
const MAX_ATTEMPTS: usize = 100;

const UNKNOWN_KEY: &str = "unknown key; check its spelling (unknown keys are rejected so a typo cannot silently disable a setting)";

#[derive(Clone, Copy, Debug)]
enum Placeholder {
    Absent,
    EmptyString,
    Zero,
    False,
    EmptyMap,
    EmptyList,
    Null,
}

const PLACEHOLDERS: [Placeholder; 7] = [
    Placeholder::Absent,
    Placeholder::EmptyString,
    Placeholder::Zero,
    Placeholder::False,
    Placeholder::EmptyMap,
    Placeholder::EmptyList,
    Placeholder::Null,
];

impl Placeholder {
    fn value(self) -> Option<Value> {
        match self {
            Self::Absent => None,
            Self::EmptyString => Some(Value::String(String::new())),
            Self::Zero => Some(Value::from(0)),
            Self::False => Some(Value::Bool(false)),
            Self::EmptyMap => Some(Value::Object(serde_json::Map::new())),
            Self::EmptyList => Some(Value::Array(Vec::new())),
            Self::Null => Some(Value::Null),
        }
    }
}

/// Decodes `tree`; `resolution` carries the env failures (reported first) and substituted paths.
pub(crate) fn decode(tree: Value, resolution: EnvResolution) -> Decoded {
    let mut decoder = Decoder {
        tree,
        substituted: resolution.substituted.into_iter().collect(),
        problems: Vec::new(),
        unknown: BTreeSet::new(),
        patches: Vec::new(),
        patched: Vec::new(),
    };
    let mut viable = true;
    for (path, message) in resolution.failures {
        viable &= decoder.report(path, message);
    }
    let config = if viable { decoder.run() } else { None };
    let mut problems = decoder.problems;
    problems.extend(
        decoder
            .unknown
            .iter()
            .map(|path| (path.clone(), UNKNOWN_KEY.to_owned())),
    );
    problems.sort_by(|a, b| a.0.cmp(&b.0));
    Decoded {
        config,
        problems: problems
            .into_iter()
            .map(|(path, message)| ConfigProblem::new(path.to_string(), message))
            .collect(),
        patched: decoder.patched.iter().map(KeyPath::to_string).collect(),
    }
}

struct Patch {
    path: KeyPath,
    next_placeholder: usize,
}

struct Decoder {
    tree: Value,
    substituted: HashSet<KeyPath>,
    problems: Vec<(KeyPath, String)>,
    unknown: BTreeSet<KeyPath>,
    patches: Vec<Patch>,
    patched: Vec<KeyPath>,
}

struct Failure {
    path: Option<KeyPath>,
    message: String,
}

impl Decoder {
    fn run(&mut self) -> Option<AppConfig> {
        for _ in 0..MAX_ATTEMPTS {
            let failure = match self.attempt() {
                Ok(config) => return Some(config),
                Err(failure) => failure,
            };
            let Some(path) = failure.path else {
                self.problems.push((KeyPath::root(), failure.message));
                return None;
            };
            // Redact first: a missing-field error is located at the enclosing struct, so it is
            // never mistaken for a secret's value.
            let message = redact(&path, failure.message);
            let (path, message) = locate_missing_field(path, message);
            if let Some(index) = self.covering_patch(&path) {
                // Our own placeholder did not fit the expected type: try the next one.
                if !self.apply_next(index) {
                    return None;
                }
                continue;
            }
            if self.substituted.remove(&path) && self.coerce(&path) {
                continue;
            }
            if !self.report(path, message) {
                return None;
            }
        }
        self.problems.push((
            KeyPath::root(),
            "too many problems to list; fix the ones above and check again".to_owned(),
        ));
        None
    }

    fn attempt(&mut self) -> Result<AppConfig, Failure> {
        let mut track = serde_path_to_error::Track::new();
        let mut ignored = Vec::new();
        let deserializer = serde_path_to_error::Deserializer::new(&self.tree, &mut track);
        let result: Result<AppConfig, serde_json::Error> =
            serde_ignored::deserialize(deserializer, |path| ignored.push(ignored_path(&path)));
        self.unknown.extend(ignored);
        result.map_err(|error| Failure {
            path: tracked_path(&track.path()),
            message: plain_types(&error.to_string()),
        })
    }

    /// Records a problem and patches its value so decoding can continue. `false` = give up.
    fn report(&mut self, path: KeyPath, message: String) -> bool {
        self.problems.push((path.clone(), message));
        if path.is_root() {
            return false;
        }
        self.patches.push(Patch {
            path,
            next_placeholder: 0,
        });
        self.apply_next(self.patches.len() - 1)
    }

    /// The deepest patch at or above `path`.
    fn covering_patch(&self, path: &KeyPath) -> Option<usize> {
        self.patches
            .iter()
            .enumerate()
            .filter(|(_, patch)| path.starts_with(&patch.path))
            .max_by_key(|(_, patch)| patch.path.depth())
            .map(|(index, _)| index)
    }

    /// Puts the patch's next placeholder in place; when none is left, patches the parent instead.
    fn apply_next(&mut self, index: usize) -> bool {
        let path = self.patches[index].path.clone();
        let Some(parent_path) = path.parent() else {
            return false;
        };
        while let Some(placeholder) = PLACEHOLDERS.get(self.patches[index].next_placeholder) {
            self.patches[index].next_placeholder += 1;
            let Some(parent) = parent_path.get_mut(&mut self.tree) else {
                return false;
            };
            let applied = match (path.last(), placeholder.value(), parent) {
                (Some(Segment::Key(key)), None, Value::Object(map)) => {
                    map.remove(key.as_str()).is_some()
                }
                (Some(Segment::Key(key)), Some(value), Value::Object(map)) => {
                    map.insert(key.clone(), value);
                    true
                }
                (Some(Segment::Index(position)), Some(value), Value::Array(items)) => {
                    match items.get_mut(*position) {
                        Some(slot) => {
                            *slot = value;
                            true
                        }
                        None => false,
                    }
                }
                _ => false,
            };
            if applied {
                self.patched.push(path);
                return true;
            }
        }
        // Nothing fits at this key: replace the enclosing value instead (no new problem).
        self.patches
            .retain(|patch| !patch.path.starts_with(&parent_path));
        if parent_path.is_root() {
            return false;
        }
        self.patches.push(Patch {
            path: parent_path,
            next_placeholder: 0,
        });
        self.apply_next(self.patches.len() - 1)
    }

    /// `timeout: ${TIMEOUT:-30}` yields the string "30"; give it the scalar type YAML would have.
    fn coerce(&mut self, path: &KeyPath) -> bool {
        let Some(node) = path.get_mut(&mut self.tree) else {
            return false;
        };
        let Value::String(text) = node else {
            return false;
        };
        let scalar = match text.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            other => {
                if let Ok(integer) = other.parse::<i64>() {
                    Value::from(integer)
                } else if let Ok(integer) = other.parse::<u64>() {
                    Value::from(integer)
                } else if let Some(number) = other
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                {
                    Value::Number(number)
                } else {
                    return false;
                }
            }
        };
        *node = scalar;
        true
    }
}

/// serde reports a missing field at the enclosing struct; point at the field itself.
fn locate_missing_field(path: KeyPath, message: String) -> (KeyPath, String) {
    let field = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'));
    match field {
        Some(field) => (
            path.key(field),
            "required key is missing; add it".to_owned(),
        ),
        None => (path, message),
    }
}

/// serde names Rust types (`expected usize`); an operator reads "a whole number".
fn plain_types(message: &str) -> String {
    const NAMES: &[(&str, &str)] = &[
        ("usize", "a whole number (0 or more)"),
        ("u64", "a whole number (0 or more)"),
        ("u32", "a whole number (0 or more)"),
        ("u16", "a whole number from 0 to 65535"),
        ("u8", "a whole number from 0 to 255"),
        ("isize", "a whole number"),
        ("i64", "a whole number"),
        ("i32", "a whole number"),
        ("f64", "a number"),
        ("f32", "a number"),
    ];
    let Some((head, expected)) = message.rsplit_once("expected ") else {
        return message.to_owned();
    };
    match NAMES.iter().find(|(rust, _)| *rust == expected.trim()) {
        Some((_, plain)) => format!("{head}expected {plain}"),
        None => message.to_owned(),
    }
}

fn redact(path: &KeyPath, message: String) -> String {
    if is_secret(path) {
        "invalid value (not shown: this key holds a secret); expected a string".to_owned()
    } else {
        message
    }
}

fn tracked_path(path: &serde_path_to_error::Path) -> Option<KeyPath> {
    use serde_path_to_error::Segment as Tracked;
    let mut segments = Vec::new();
    for segment in path.iter() {
        match segment {
            Tracked::Map { key } => segments.push(Segment::Key(key.clone())),
            Tracked::Seq { index } => segments.push(Segment::Index(*index)),
            Tracked::Enum { variant } => segments.push(Segment::Key(variant.clone())),
            Tracked::Unknown => return None,
        }
    }
    Some(KeyPath::from_segments(segments))
}

fn ignored_path(path: &serde_ignored::Path<'_>) -> KeyPath {
    fn collect(path: &serde_ignored::Path<'_>, segments: &mut Vec<Segment>) {
        match path {
            serde_ignored::Path::Root => {}
            serde_ignored::Path::Seq { parent, index } => {
                collect(parent, segments);
                segments.push(Segment::Index(*index));
            }
            serde_ignored::Path::Map { parent, key } => {
                collect(parent, segments);
                segments.push(Segment::Key(key.clone()));
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => collect(parent, segments),
        }
    }
    let mut segments = Vec::new();
    collect(path, &mut segments);
    KeyPath::from_segments(segments)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::problem::SECRET_KEYS;

    #[test]
    fn rust_type_names_become_plain_words() {
        let decoded = decode_json(json!({
            "gateway": {"backlog": "many", "max_connections": -1},
            "uploads": {"max_file_size": 1.5},
        }));
        let messages: Vec<&str> = decoded
            .problems
            .iter()
            .map(|p| p.message.as_str())
            .collect();
        assert_eq!(decoded.problems.len(), 3, "{messages:?}");
        for message in &messages {
            assert!(
                message.ends_with("expected a whole number (0 or more)"),
                "{message}"
            );
            assert!(
                !message.contains("usize") && !message.contains("u64"),
                "{message}"
            );
        }
        assert_eq!(
            plain_types("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            plain_types("unknown variant `x`, expected `a` or `b`"),
            "unknown variant `x`, expected `a` or `b`"
        );
    }

    #[test]
    fn every_secret_key_of_the_schema_is_redacted() {
        let keys = crate::config::reference::secret_keys();
        assert!(keys.contains("bot_token"), "{keys:?}");
        for key in &keys {
            assert!(
                SECRET_KEYS.contains(&key.as_str()),
                "`{key}` holds a Secret: add it to SECRET_KEYS"
            );
        }
    }

    fn decode_json(tree: Value) -> Decoded {
        decode(tree, EnvResolution::default())
    }

    fn paths(decoded: &Decoded) -> Vec<String> {
        decoded.problems.iter().map(|p| p.path.clone()).collect()
    }

    #[test]
    fn collects_every_type_error_and_unknown_key() {
        let decoded = decode_json(json!({
            "recursion_limit": "many",
            "log_format": "xml",
            "models": [{"name": "a", "timeout": "slow", "tempreature": 1}],
            "gateway": {"api_tokenz": [], "api_tokens": [{"user": "bob"}]}
        }));
        assert_eq!(
            paths(&decoded),
            [
                "gateway.api_tokens[0].token",
                "gateway.api_tokenz",
                "log_format",
                "models[0].tempreature",
                "models[0].timeout",
                "recursion_limit",
            ]
        );
        assert!(
            decoded.config.is_some(),
            "placeholders make the rest decodable"
        );
        assert!(
            decoded
                .patched
                .contains(&"gateway.api_tokens[0].token".to_owned())
        );
    }

    #[test]
    fn wrong_shaped_list_element_is_reported_once() {
        let decoded = decode_json(json!({"models": ["just-a-name", {"name": "b"}]}));
        assert_eq!(paths(&decoded), ["models[0]"]);
        let config = decoded.config.expect("patched config");
        assert_eq!(config.models[1].name, "b");
    }

    #[test]
    fn secret_type_errors_do_not_echo_the_value() {
        let decoded = decode_json(json!({"models": [{"name": "a", "api_key": 98765}]}));
        assert_eq!(paths(&decoded), ["models[0].api_key"]);
        assert!(!decoded.problems[0].message.contains("98765"));
    }

    #[test]
    fn missing_required_key_is_reported_at_the_key() {
        let decoded = decode_json(json!({"gateway": {"api_tokens": [{"user": "bob"}]}}));
        assert_eq!(decoded.problems.len(), 1);
        assert_eq!(
            decoded.problems[0].to_string(),
            "gateway.api_tokens[0].token: required key is missing; add it"
        );
    }

    #[test]
    fn env_substituted_numbers_are_coerced() {
        let resolution = EnvResolution {
            substituted: vec![KeyPath::root().key("recursion_limit")],
            ..Default::default()
        };
        let decoded = decode(json!({"recursion_limit": "42"}), resolution);
        assert!(decoded.problems.is_empty(), "{:?}", decoded.problems);
        assert_eq!(decoded.config.expect("config").recursion_limit, 42);
    }

    #[test]
    fn literal_strings_are_not_coerced() {
        let decoded = decode_json(json!({"recursion_limit": "42"}));
        assert_eq!(paths(&decoded), ["recursion_limit"]);
    }
}
