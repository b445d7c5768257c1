//! Environment sources and `$NAME` / `${NAME:-default}` resolution on the raw config tree.
//!
//! The environment is read through [`EnvSource`] so tests hand in a [`MapEnv`] and never mutate
//! the process environment (which is shared by every test thread).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::config::problem::{KeyPath, is_secret};

/// Where `$NAME` references in the config are looked up.
pub trait EnvSource {
    /// The value of `name`, or `None` when it is not set.
    fn get(&self, name: &str) -> Option<String>;
}

/// The real process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn get(&self, name: &str) -> Option<String> {
        // A value that is not valid UTF-8 cannot be a YAML string either; treat it as unset so
        // the error names the variable instead of silently using a lossy copy.
        std::env::var(name).ok()
    }
}

/// A fixed map of variables, for tests and embedders.
#[derive(Clone, Debug, Default)]
pub struct MapEnv {
    vars: HashMap<String, String>,
}

impl MapEnv {
    /// An empty environment: every variable is unset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder form of [`MapEnv::set`].
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set(name, value);
        self
    }

    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(name.into(), value.into());
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for MapEnv {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self {
            vars: iter
                .into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        }
    }
}

impl EnvSource for MapEnv {
    fn get(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }
}

impl<T: EnvSource + ?Sized> EnvSource for Arc<T> {
    fn get(&self, name: &str) -> Option<String> {
        (**self).get(name)
    }
}

impl<T: EnvSource + ?Sized> EnvSource for &T {
    fn get(&self, name: &str) -> Option<String> {
        (**self).get(name)
    }
}

/// A whole-string environment reference found in the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EnvReference<'a> {
    pub(crate) name: &'a str,
    /// `Some` for `${NAME:-default}` (possibly empty), `None` for `$NAME` / `${NAME}`.
    pub(crate) default: Option<&'a str>,
}

/// Parses a whole string as an env reference.
///
/// A string that starts with `$$` is no reference: [`resolve_tree`] reads it as the literal
/// text with one `$` fewer (the way to write a secret that really starts with `$`).
///
/// `Ok(None)` means "a plain string" (including things like `$5` or `a $B`: only whole-string
/// references are substituted). A string that starts with `${` but is not well formed is an
/// error, since it was clearly meant as a reference and using it literally would hide the typo.
pub(crate) fn parse_reference(text: &str) -> Result<Option<EnvReference<'_>>, String> {
    if let Some(braced) = text.strip_prefix("${") {
        let Some(inner) = braced.strip_suffix('}') else {
            return Err(malformed(text));
        };
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_variable_name(name) {
            return Err(malformed(text));
        }
        return Ok(Some(EnvReference { name, default }));
    }
    match text.strip_prefix('$') {
        Some(name) if is_variable_name(name) => Ok(Some(EnvReference {
            name,
            default: None,
        })),
        _ => Ok(None),
    }
}

/// What [`resolve_tree`] did: which string values came from the environment and which failed.
#[derive(Debug, Default)]
pub(crate) struct EnvResolution {
    /// Values replaced from the environment (they may later be coerced to numbers/booleans).
    pub(crate) substituted: Vec<KeyPath>,
    /// The variable each substituted value was read from, so messages about a value can name
    /// the variable to change (`ANTLER_MODEL_API_KEY` rather than `models[0].api_key`).
    pub(crate) variables: Vec<(KeyPath, String)>,
    /// References that could not be resolved, with the message to report.
    pub(crate) failures: Vec<(KeyPath, String)>,
}

/// Replaces every whole-string env reference in `tree`, recording failures by key path.
pub(crate) fn resolve_tree(tree: &mut Value, env: &dyn EnvSource) -> EnvResolution {
    let mut resolution = EnvResolution::default();
    resolve_node(tree, &KeyPath::root(), env, &mut resolution);
    resolution
}

fn resolve_node(node: &mut Value, path: &KeyPath, env: &dyn EnvSource, out: &mut EnvResolution) {
    match node {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                resolve_node(child, &path.key(key), env, out);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter_mut().enumerate() {
                resolve_node(child, &path.index(index), env, out);
            }
        }
        Value::String(text) => {
            if let Some(literal) = text.strip_prefix("$$") {
                // The escape: a literal value that starts with `$` (`$$uper` is `$uper`).
                *text = format!("${literal}");
                return;
            }
            let secret = is_secret(path);
            match parse_reference(text) {
                Ok(None) => {}
                Ok(Some(reference)) => match lookup(reference, env) {
                    Ok(value) => {
                        out.variables
                            .push((path.clone(), reference.name.to_owned()));
                        *text = value;
                        out.substituted.push(path.clone());
                    }
                    Err(_) if secret => out.failures.push((path.clone(), SECRET_UNSET.into())),
                    Err(message) => out.failures.push((path.clone(), message)),
                },
                Err(_) if secret => out.failures.push((path.clone(), SECRET_MALFORMED.into())),
                Err(message) => out.failures.push((path.clone(), message)),
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A secret key's reference that names an unset variable. The name is not repeated: a literal
/// key that happens to start with `$` (`$uperSecret42`) reads as a reference, and its "name"
/// would be most of the secret.
const SECRET_UNSET: &str = "refers to an environment variable that is not set (its name is not \
     shown: this key holds a secret); set the variable named after the `$` where antler starts \
     (the shell, the service's environment file, or .env for Docker Compose), or write a \
     literal value that starts with `$` as `$$` followed by the rest";

/// A secret key's malformed `${…}` reference, without its text.
const SECRET_MALFORMED: &str = "is a malformed environment reference (not shown: this key holds \
     a secret); write $NAME, ${NAME} or ${NAME:-default}, or a literal value that starts with \
     `$` as `$$` followed by the rest";

fn lookup(reference: EnvReference<'_>, env: &dyn EnvSource) -> Result<String, String> {
    match (env.get(reference.name), reference.default) {
        // Shell semantics of `:-`: an empty value also falls back to the default.
        (Some(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.to_owned()),
        (None, None) => Err(format!(
            "environment variable {name} is not set; set it or write ${{{name}:-default}}",
            name = reference.name
        )),
    }
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(first) if first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn malformed(text: &str) -> String {
    // The text is a reference, never a secret value, so echoing it helps without leaking.
    format!(
        "malformed environment reference `{text}`; write $NAME, ${{NAME}} or ${{NAME:-default}}"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    type Expected = Option<(&'static str, Option<&'static str>)>;

    #[test]
    fn parses_reference_forms() {
        let cases: &[(&str, Expected)] = &[
            ("$HOME", Some(("HOME", None))),
            ("${HOME}", Some(("HOME", None))),
            ("${A_1:-x:y}", Some(("A_1", Some("x:y")))),
            ("${EMPTY:-}", Some(("EMPTY", Some("")))),
            ("plain", None),
            ("$5", None),
            ("a $B", None),
            ("$A-b", None),
            ("$", None),
        ];
        for (text, expected) in cases {
            let parsed = parse_reference(text).map(|r| r.map(|r| (r.name, r.default)));
            assert_eq!(parsed, Ok(*expected), "{text}");
        }
    }

    #[test]
    fn malformed_braced_reference_is_an_error() {
        for text in ["${A", "${}", "${1A}", "${A:-x"] {
            assert!(parse_reference(text).is_err(), "{text}");
        }
    }

    #[test]
    fn resolves_tree_with_paths() {
        let env = MapEnv::new().with("KEY", "sk-1").with("EMPTY", "");
        let mut tree = json!({
            "models": [{"api_key": "$KEY", "model": "${EMPTY:-m}", "base_url": "${NOPE}"}],
            "n": 3
        });
        let resolution = resolve_tree(&mut tree, &env);
        assert_eq!(tree["models"][0]["api_key"], "sk-1");
        assert_eq!(tree["models"][0]["model"], "m");
        assert_eq!(resolution.substituted.len(), 2);
        assert_eq!(resolution.failures.len(), 1);
        let (path, message) = &resolution.failures[0];
        assert_eq!(path.to_string(), "models[0].base_url");
        assert!(message.contains("environment variable NOPE is not set"));
    }

    /// A secret key's reference that fails is reported without its text: a literal key that
    /// starts with `$` reads as a reference whose "name" is most of the key.
    #[test]
    fn a_secret_key_never_echoes_its_reference() {
        let env = MapEnv::new();
        let mut tree = json!({
            "models": [{"api_key": "$uperSecret42", "model": "$uperModel"}],
            "channels": {"slack": {"bot_token": "${xoxb-oops"}}
        });
        let resolution = resolve_tree(&mut tree, &env);
        let failures: Vec<(String, String)> = resolution
            .failures
            .iter()
            .map(|(path, message)| (path.to_string(), message.clone()))
            .collect();
        assert_eq!(failures.len(), 3, "{failures:?}");
        for (path, message) in &failures {
            if path == "models[0].model" {
                // Not a secret: the variable is named, which is what helps there.
                assert!(message.contains("uperModel"), "{message}");
                continue;
            }
            assert!(!message.contains("uperSecret42"), "{path}: {message}");
            assert!(!message.contains("xoxb"), "{path}: {message}");
            assert!(message.contains("$$"), "the escape is offered: {message}");
        }
    }

    #[test]
    fn a_doubled_dollar_is_a_literal_dollar() {
        let env = MapEnv::new().with("uperSecret42", "from-env");
        let mut tree = json!({"a": "$$uperSecret42", "b": "$${X}", "c": "$$", "d": "a$$b"});
        let resolution = resolve_tree(&mut tree, &env);
        assert!(resolution.failures.is_empty());
        assert!(resolution.substituted.is_empty());
        assert_eq!(
            tree,
            json!({"a": "$uperSecret42", "b": "${X}", "c": "$", "d": "a$$b"})
        );
    }

    #[test]
    fn substituted_values_remember_their_variable() {
        let env = MapEnv::new().with("ANTLER_MODEL_API_KEY", "sk");
        let mut tree =
            json!({"models": [{"api_key": "${ANTLER_MODEL_API_KEY:-}", "model": "${M:-m}"}]});
        let resolution = resolve_tree(&mut tree, &env);
        let variables: Vec<(String, &str)> = resolution
            .variables
            .iter()
            .map(|(path, name)| (path.to_string(), name.as_str()))
            .collect();
        assert_eq!(
            variables,
            [
                ("models[0].api_key".to_string(), "ANTLER_MODEL_API_KEY"),
                ("models[0].model".to_string(), "M"),
            ]
        );
    }

    #[test]
    fn a_missing_secret_gets_no_default_suggested() {
        let mut tree = json!({"gateway": {"api_tokens": [{"token": "$ANTLER_API_TOKEN"}]},
                              "models": [{"model": "$ANTLER_MODEL"}]});
        let resolution = resolve_tree(&mut tree, &MapEnv::new());
        let messages: Vec<(String, &str)> = resolution
            .failures
            .iter()
            .map(|(path, message)| (path.to_string(), message.as_str()))
            .collect();
        let secret = &messages[0];
        assert_eq!(secret.0, "gateway.api_tokens[0].token");
        // Not named either (a literal secret may read as a reference), but where to set it is.
        assert!(!secret.1.contains("ANTLER_API_TOKEN"), "{}", secret.1);
        assert!(secret.1.contains(".env for Docker Compose"), "{}", secret.1);
        assert!(!secret.1.contains(":-"), "{}", secret.1);
        assert!(
            messages[1].1.contains("${ANTLER_MODEL:-default}"),
            "{}",
            messages[1].1
        );
    }

    #[test]
    fn set_but_empty_plain_reference_stays_empty() {
        let env = MapEnv::new().with("EMPTY", "");
        let mut tree = json!({"a": "$EMPTY"});
        let resolution = resolve_tree(&mut tree, &env);
        assert!(resolution.failures.is_empty());
        assert_eq!(tree["a"], "");
    }
}
