//! `SKILL.md` front matter: parsing and the validation rules every skill must pass (the public
//! Anthropic skills format, so existing skills install unchanged).

use std::collections::BTreeMap;

use serde_json::Value;

/// Longest skill name accepted.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description accepted.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Every key a front matter may hold; anything else is a validation error naming the key.
pub const ALLOWED_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
    "compatibility",
    "version",
    "author",
];

/// A skill's validated front matter and the Markdown body after it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkillMeta {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    /// Tools the skill may use while it is activated; `None` leaves the agent's tools as they are.
    pub allowed_tools: Option<Vec<String>>,
    pub metadata: Option<Value>,
    pub compatibility: Option<String>,
    pub version: Option<String>,
    pub author: Option<String>,
}

/// Why a `SKILL.md` is not a valid skill. Each message says what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkillFormatError {
    #[error(
        "SKILL.md has no front matter; start it with a '---' line, the YAML keys name and description, and another '---' line"
    )]
    NoFrontMatter,
    #[error(
        "the front matter has no closing '---' line; end the YAML header with a line of three dashes"
    )]
    Unclosed,
    #[error("the front matter is not valid YAML ({0}); fix the header syntax")]
    Yaml(String),
    #[error("the front matter must be a YAML mapping of keys to values")]
    NotAMapping,
    #[error(
        "unknown front matter key '{0}'; allowed keys are name, description, license, allowed-tools, metadata, compatibility, version, author"
    )]
    UnknownKey(String),
    #[error("the front matter has no '{0}'; add it")]
    Missing(&'static str),
    #[error("'{0}' must be a string")]
    NotAString(&'static str),
    #[error("name '{name}' is {chars} characters long; use at most 64")]
    NameTooLong { name: String, chars: usize },
    #[error("name '{0}' must be hyphen-case: lowercase letters, digits and hyphens only")]
    NameNotHyphenCase(String),
    #[error("name '{0}' must not start or end with a hyphen or contain '--'")]
    NameHyphens(String),
    #[error("the description is {0} characters long; shorten it to at most 1024")]
    DescriptionTooLong(usize),
    #[error("the description must not contain '<' or '>'; reword it without angle brackets")]
    DescriptionAngleBrackets,
    #[error("the description must not be empty; say what the skill does and when to use it")]
    DescriptionEmpty,
    #[error("'allowed-tools' must be a list of tool names or one comma- or space-separated string")]
    AllowedTools,
    #[error("'metadata' must be a mapping")]
    Metadata,
}

/// Parses and validates the front matter of `text` (a whole `SKILL.md`); returns the metadata
/// and the body after the header.
pub fn parse_skill_md(text: &str) -> Result<(SkillMeta, &str), SkillFormatError> {
    let (yaml, body) = split(text)?;
    let map: BTreeMap<String, Value> = match serde_saphyr::from_str::<Value>(yaml) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        Ok(Value::Null) => BTreeMap::new(),
        Ok(_) => return Err(SkillFormatError::NotAMapping),
        Err(error) => return Err(SkillFormatError::Yaml(one_line(&error.to_string()))),
    };
    // Keys are checked before values so a misspelt key is named even when others are fine.
    if let Some(key) = map.keys().find(|k| !ALLOWED_KEYS.contains(&k.as_str())) {
        return Err(SkillFormatError::UnknownKey(key.clone()));
    }
    let name = required_string(&map, "name")?;
    validate_name(&name)?;
    let description = required_string(&map, "description")?;
    validate_description(&description)?;
    let metadata = match map.get("metadata") {
        None | Some(Value::Null) => None,
        Some(value @ Value::Object(_)) => Some(value.clone()),
        Some(_) => return Err(SkillFormatError::Metadata),
    };
    Ok((
        SkillMeta {
            name,
            description,
            license: optional_scalar(&map, "license")?,
            allowed_tools: allowed_tools(map.get("allowed-tools"))?,
            metadata,
            compatibility: optional_scalar(&map, "compatibility")?,
            version: optional_scalar(&map, "version")?,
            author: optional_scalar(&map, "author")?,
        },
        body,
    ))
}

/// Hyphen-case, at most 64 characters, no leading, trailing or doubled hyphen.
pub fn validate_name(name: &str) -> Result<(), SkillFormatError> {
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(SkillFormatError::NameTooLong {
            name: name.to_string(),
            chars,
        });
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(SkillFormatError::NameNotHyphenCase(name.to_string()));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(SkillFormatError::NameHyphens(name.to_string()));
    }
    Ok(())
}

fn validate_description(description: &str) -> Result<(), SkillFormatError> {
    if description.trim().is_empty() {
        return Err(SkillFormatError::DescriptionEmpty);
    }
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(SkillFormatError::DescriptionTooLong(chars));
    }
    if description.contains(['<', '>']) {
        return Err(SkillFormatError::DescriptionAngleBrackets);
    }
    Ok(())
}

/// The YAML between a leading `---` line and the next `---` line, and the rest.
fn split(text: &str) -> Result<(&str, &str), SkillFormatError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').ok_or(SkillFormatError::NoFrontMatter)?;
    if text[..first_end].trim_end() != "---" {
        return Err(SkillFormatError::NoFrontMatter);
    }
    let rest = &text[first_end + 1..];
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(SkillFormatError::Unclosed)
}

fn required_string(
    map: &BTreeMap<String, Value>,
    key: &'static str,
) -> Result<String, SkillFormatError> {
    match map.get(key) {
        None | Some(Value::Null) => Err(SkillFormatError::Missing(key)),
        Some(Value::String(text)) => Ok(text.trim().to_string()),
        Some(_) => Err(SkillFormatError::NotAString(key)),
    }
}

/// A string, or a number (`version: 1.0` is a float to YAML), as text.
fn optional_scalar(
    map: &BTreeMap<String, Value>,
    key: &'static str,
) -> Result<Option<String>, SkillFormatError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.trim().to_string())),
        Some(Value::Number(number)) => Ok(Some(number.to_string())),
        Some(_) => Err(SkillFormatError::NotAString(key)),
    }
}

/// Claude Code writes `allowed-tools: Read, Grep`; the Agent Skills spec a space-separated
/// string; DeerFlow a list. All three are accepted.
fn allowed_tools(value: Option<&Value>) -> Result<Option<Vec<String>>, SkillFormatError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(
            text.split([',', ' ', '\t'])
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        )),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(name) if !name.trim().is_empty() => Ok(name.trim().to_string()),
                _ => Err(SkillFormatError::AllowedTools),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(SkillFormatError::AllowedTools),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
#[path = "front_matter_tests.rs"]
mod tests;
