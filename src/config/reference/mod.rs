//! The configuration reference (`docs/configuration.md`, printed by `antler config reference`):
//! Markdown generated from the JSON schema of [`AppConfig`], so the config structs' doc comments
//! are its only source and their `Default` values (which the schema carries) its defaults.

mod shape;

use std::fmt::Write;

use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::config::AppConfig;
use shape::{Nested, Schemas};

/// The command that regenerates the checked-in reference; the staleness test prints it.
pub const REGENERATE_COMMAND: &str =
    "cargo run --quiet -- config reference > docs/configuration.md";

/// Where the reference is checked in, relative to the repository root.
pub const REFERENCE_PATH: &str = "docs/configuration.md";

/// The whole reference as Markdown.
pub fn render() -> String {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<AppConfig>();
    let root = schema.as_value();
    let schemas = Schemas::new(root);
    let mut out = String::new();
    out.push_str(&intro());
    let (leaves, nested) = schemas.split(root, "", None);
    out.push_str("\n## Top-level keys\n\n");
    push_table(&mut out, &leaves);
    for section in &nested {
        push_section(&mut out, &schemas, section, 2);
    }
    out
}

fn intro() -> String {
    format!(
        "# Configuration reference\n\
         \n\
         <!-- Generated from the config structs' doc comments; do not edit by hand. \
         Regenerate with: {REGENERATE_COMMAND} -->\n\
         \n\
         Antler reads one YAML file: `--config PATH`, else `$ANTLER_CONFIG`, else \
         `./config.yaml`, else `$ANTLER_HOME/config.yaml`, else the shipped `config.yaml` built \
         into the binary. `antler config check [PATH]` validates a file and lists every problem \
         with its key path (exit 64) before anything starts.\n\
         \n\
         - Every key is optional unless its default says *required*; the default is what applies \
         when the key is absent (`unset` = no value).\n\
         - Any string may be an environment reference, `$NAME` or `${{NAME:-fallback}}`, \
         resolved at load; write secrets (*secret string*) that way so they stay out of the \
         file. A value that really starts with `$` is written `$$…`. Secrets are never logged \
         or printed, not even the name of an unset variable they refer to.\n\
         - Unknown keys are errors, so a typo cannot silently turn a setting off.\n\
         - In key paths, `<name>` is a map key you choose (`pricing.<name>`) and `[]` each item \
         of a list (`models[].name`).\n\
         \n\
         This page is generated from the config structs' doc comments by \
         `antler config reference`; a test fails when it is stale. Regenerate it with \
         `{REGENERATE_COMMAND}`.\n"
    )
}

fn push_section(out: &mut String, schemas: &Schemas<'_>, section: &Nested<'_>, level: usize) {
    let hashes = "#".repeat(level.min(4));
    let _ = writeln!(out, "\n{hashes} `{}`\n", section.path);
    for text in [&section.description, &section.type_description]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(out, "{}\n", one_line(text));
    }
    let (leaves, nested) = schemas.split(section.schema, &section.path, section.default);
    if !leaves.is_empty() {
        push_table(out, &leaves);
    }
    for child in &nested {
        push_section(out, schemas, child, level + 1);
    }
}

/// One table row per key that holds a value rather than another struct.
pub(crate) struct Leaf {
    pub(crate) path: String,
    pub(crate) type_text: String,
    pub(crate) default: String,
    pub(crate) description: String,
}

fn push_table(out: &mut String, leaves: &[Leaf]) {
    out.push_str("| Key | Type | Default | Description |\n|---|---|---|---|\n");
    for leaf in leaves {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            leaf.path,
            cell(&leaf.type_text),
            cell(&leaf.default),
            cell(&leaf.description)
        );
    }
}

/// The names of every key that holds a secret, wherever it is in the tree.
pub fn secret_keys() -> std::collections::BTreeSet<String> {
    let schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<AppConfig>();
    Schemas::new(schema.as_value()).secret_keys(schema.as_value())
}

/// Doc comments as one paragraph: line breaks become spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: one line, `|` escaped.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

/// A default value as the reader would write it.
pub(crate) fn default_text(value: &Value) -> String {
    match value {
        Value::Null => "unset".into(),
        Value::String(text) if text.is_empty() => "`\"\"`".into(),
        Value::String(text) => format!("`{text}`"),
        other => format!("`{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_and_key_path_appears() {
        let text = render();
        for expected in [
            "## Top-level keys",
            "| `log_level` |",
            "## `gateway`",
            "| `gateway.listen` | string | `127.0.0.1:8787` |",
            "`gateway.api_tokens[]`",
            "| `gateway.api_tokens[].token` | secret string | *required* |",
            "`channels.telegram`",
            "| `channels.telegram.bot_token` | secret string | unset |",
            "`subagents.custom_agents.<name>`",
            "| `sandbox.provider` | one of `auto`, `bwrap`, `local`, `docker` | `auto` |",
            // Required by the checks although the type has a default.
            "| `models[].name` | string | *required* |",
            // The parent's default wins over the field type's own (`EnabledConfig` is off).
            "| `token_usage.enabled` | boolean | `true` |",
            "| `tool_search.enabled` | boolean | `false` |",
            "| `summarization.keep.type` | one of `tokens`, `messages`, `fraction` | `messages` |",
            "| `pricing` | map of `currency`, `models` or map of name → map of `cached_input`, `input`, `output` |",
            "| `channels.discord.reactions` | boolean or map of `done`, `failed`, `received` |",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
    }

    #[test]
    fn cells_stay_on_one_line_and_escape_pipes() {
        assert_eq!(cell("a|b\n c"), "a\\|b c");
        assert_eq!(default_text(&Value::Null), "unset");
        assert_eq!(default_text(&Value::from("")), "`\"\"`");
        assert_eq!(default_text(&serde_json::json!([])), "`[]`");
    }
}
