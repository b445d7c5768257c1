//! Where a config problem is: `ConfigProblem` (what users read), `KeyPath` (how the loader
//! walks the tree) and which keys hold secrets (`is_secret`). A leaf, so the decoder, the
//! environment resolver and the validator share them without depending on the loader that
//! drives them, or on each other.

use std::fmt;

use serde_json::Value;

/// One problem in a config, located by its key path (`models[0].api_key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    pub path: String,
    pub message: String,
}

impl ConfigProblem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Keys whose values are secrets: their text (the value, or the variable a `$` reference
/// names, which may be a mistyped literal key such as `$uperSecret42`) is never echoed in a
/// problem. A test in `decode` checks that every `Secret` key of the schema is listed.
pub(crate) const SECRET_KEYS: &[&str] = &[
    "api_key",
    "token",
    "bot_token",
    "app_token",
    "signing_secret",
    "webhook_secret",
    "app_secret",
    "verification_token",
    "encrypt_key",
    // channels.webhook.endpoints.NAME.secret.
    "secret",
    // store.postgres.url: it holds the database password.
    "url",
];

/// Whether the value at `path` is a secret (its key is one of [`SECRET_KEYS`]): messages about
/// it must not show its text, nor suggest writing a default for it.
pub(crate) fn is_secret(path: &KeyPath) -> bool {
    matches!(path.last(), Some(Segment::Key(key)) if SECRET_KEYS.contains(&key.as_str()))
        || is_secret_map_value(path)
}

/// Maps whose every value is a secret, whatever its key: `telemetry.otlp.headers` (an
/// `Authorization` header is a credential).
const SECRET_MAPS: &[&[&str]] = &[&["telemetry", "otlp", "headers"]];

fn is_secret_map_value(path: &KeyPath) -> bool {
    let Some(parent) = path.parent() else {
        return false;
    };
    SECRET_MAPS.iter().any(|map| {
        parent.0.len() == map.len()
            && parent
                .0
                .iter()
                .zip(map.iter())
                .all(|(segment, key)| matches!(segment, Segment::Key(k) if k == key))
    })
}

/// Whether `path` is `ancestor` or lies under it (`models[0].name` is within `models[0]`).
pub(crate) fn is_within(path: &str, ancestor: &str) -> bool {
    match path.strip_prefix(ancestor) {
        Some(rest) => ancestor.is_empty() || rest.is_empty() || rest.starts_with(['.', '[']),
        None => false,
    }
}

/// A location in the config tree, printed as `gateway.api_tokens[0].token`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct KeyPath(Vec<Segment>);

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
}

impl KeyPath {
    pub(crate) fn root() -> Self {
        Self(Vec::new())
    }

    pub(crate) fn from_segments(segments: Vec<Segment>) -> Self {
        Self(segments)
    }

    pub(crate) fn key(&self, key: &str) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::Key(key.to_owned()));
        next
    }

    pub(crate) fn index(&self, index: usize) -> Self {
        let mut next = self.clone();
        next.0.push(Segment::Index(index));
        next
    }

    pub(crate) fn depth(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn parent(&self) -> Option<Self> {
        let mut parent = self.clone();
        parent.0.pop().map(|_| parent)
    }

    pub(crate) fn last(&self) -> Option<&Segment> {
        self.0.last()
    }

    pub(crate) fn starts_with(&self, ancestor: &KeyPath) -> bool {
        self.0.starts_with(&ancestor.0)
    }

    pub(crate) fn get_mut<'v>(&self, tree: &'v mut Value) -> Option<&'v mut Value> {
        self.0.iter().try_fold(tree, |node, segment| match segment {
            Segment::Key(key) => node.get_mut(key.as_str()),
            Segment::Index(index) => node.get_mut(*index),
        })
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(root)");
        }
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if position == 0 => f.write_str(key)?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_path_display() {
        let path = KeyPath::root().key("models").index(0).key("api_key");
        assert_eq!(path.to_string(), "models[0].api_key");
        assert_eq!(KeyPath::root().to_string(), "(root)");
    }

    #[test]
    fn within_respects_segment_boundaries() {
        assert!(is_within("models[0].name", "models[0]"));
        assert!(is_within("models[0]", "models[0]"));
        assert!(is_within("models[0]", "models"));
        assert!(!is_within("models[0]x", "models[0]"));
        assert!(!is_within("modelsx", "models"));
    }
}
