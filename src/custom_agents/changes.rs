//! What changed between two versions of an agent's files: a one-line summary for listings
//! ("SOUL.md +12/−3 lines; config: model changed") and a unified diff for reading.

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::custom_agents::file_names::{CONFIG_FILE, SOUL_FILE};

/// An agent's two files as text; `None` when a version lacks one.
#[derive(Clone, Copy, Debug, Default)]
pub struct AgentFiles<'a> {
    pub soul: Option<&'a str>,
    pub config_yaml: Option<&'a str>,
}

/// One line saying what a write changed, computed from the files themselves.
pub fn summarize(old: AgentFiles<'_>, new: AgentFiles<'_>) -> String {
    let mut parts = Vec::new();
    if old.soul.is_none() && old.config_yaml.is_none() {
        let lines = new.soul.map_or(0, |soul| soul.lines().count());
        return format!("created: {SOUL_FILE} {lines} {}", plural(lines, "line"));
    }
    match (old.soul, new.soul) {
        (Some(before), Some(after)) if before != after => {
            let (added, removed) = line_counts(before, after);
            parts.push(format!("{SOUL_FILE} +{added}/−{removed} lines"));
        }
        (None, Some(after)) => parts.push(format!(
            "{SOUL_FILE} added ({} lines)",
            after.lines().count()
        )),
        (Some(_), None) => parts.push(format!("{SOUL_FILE} removed")),
        _ => {}
    }
    match (old.config_yaml, new.config_yaml) {
        (Some(before), Some(after)) if before != after => {
            parts.push(config_change(before, after));
        }
        (None, Some(_)) => parts.push(format!("{CONFIG_FILE} added")),
        (Some(_), None) => parts.push(format!("{CONFIG_FILE} removed")),
        _ => {}
    }
    if parts.is_empty() {
        "no change".to_string()
    } else {
        parts.join("; ")
    }
}

/// A unified diff of both files from `old` to `new` (empty when they are the same); the
/// labels name the two sides in the file headers ("version 3", "current").
pub fn unified_diff(
    old: AgentFiles<'_>,
    new: AgentFiles<'_>,
    old_label: &str,
    new_label: &str,
) -> String {
    let mut out = String::new();
    for (file, before, after) in [
        (SOUL_FILE, old.soul, new.soul),
        (CONFIG_FILE, old.config_yaml, new.config_yaml),
    ] {
        let (before, after) = (before.unwrap_or_default(), after.unwrap_or_default());
        if before == after {
            continue;
        }
        let diff = TextDiff::from_lines(before, after);
        let text = diff
            .unified_diff()
            .context_radius(3)
            .header(
                &format!("{file} ({old_label})"),
                &format!("{file} ({new_label})"),
            )
            .missing_newline_hint(false)
            .to_string();
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// Lines added and removed.
fn line_counts(before: &str, after: &str) -> (usize, usize) {
    let diff = TextDiff::from_lines(before, after);
    diff.iter_all_changes()
        .fold((0, 0), |(added, removed), change| match change.tag() {
            ChangeTag::Insert => (added + 1, removed),
            ChangeTag::Delete => (added, removed + 1),
            ChangeTag::Equal => (added, removed),
        })
}

/// The config keys a change touched ("config: model changed, skills added"); a file that does
/// not parse as a mapping is counted in lines instead.
fn config_change(before: &str, after: &str) -> String {
    let parse = |text: &str| match serde_saphyr::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    let (Some(before_map), Some(after_map)) = (parse(before), parse(after)) else {
        let (added, removed) = line_counts(before, after);
        return format!("{CONFIG_FILE} +{added}/−{removed} lines");
    };
    let mut keys: Vec<&String> = before_map.keys().chain(after_map.keys()).collect();
    keys.sort();
    keys.dedup();
    let changes: Vec<String> = keys
        .into_iter()
        .filter_map(|key| match (before_map.get(key), after_map.get(key)) {
            (Some(a), Some(b)) if a != b => Some(format!("{key} changed")),
            (None, Some(Value::Null)) | (Some(Value::Null), None) => None,
            (None, Some(_)) => Some(format!("{key} added")),
            (Some(_), None) => Some(format!("{key} removed")),
            _ => None,
        })
        .collect();
    if changes.is_empty() {
        "config: reformatted".to_string()
    } else {
        format!("config: {}", changes.join(", "))
    }
}

fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files<'a>(soul: Option<&'a str>, config_yaml: Option<&'a str>) -> AgentFiles<'a> {
        AgentFiles { soul, config_yaml }
    }

    #[test]
    fn the_summary_names_what_changed() {
        let config = "name: helper\ndescription: Helps\n";
        let cases = [
            (
                files(None, None),
                files(Some("# Helper\nBe kind.\n"), Some(config)),
                "created: SOUL.md 2 lines",
            ),
            (
                files(Some("a\nb\nc\n"), Some(config)),
                files(Some("a\nB\nc\nd\n"), Some(config)),
                "SOUL.md +2/−1 lines",
            ),
            (
                files(Some("a\n"), Some(config)),
                files(
                    Some("a\n"),
                    Some("name: helper\ndescription: Helps more\nmodel: big\n"),
                ),
                "config: description changed, model added",
            ),
            (
                files(Some("a\n"), Some(config)),
                files(Some("b\n"), Some("name: helper\n")),
                "SOUL.md +1/−1 lines; config: description removed",
            ),
            (
                files(Some("a\n"), Some(config)),
                files(Some("a\n"), Some("name: helper\ndescription:   Helps\n")),
                "config: reformatted",
            ),
            (
                files(Some("a\n"), Some(": [")),
                files(Some("a\n"), Some(": [\nx\n")),
                "config.yaml +2/−1 lines",
            ),
            (
                files(Some("a\n"), Some(config)),
                files(Some("a\n"), Some(config)),
                "no change",
            ),
        ];
        for (old, new, expected) in cases {
            assert_eq!(summarize(old, new), expected, "{old:?} → {new:?}");
        }
    }

    #[test]
    fn the_diff_has_a_section_per_changed_file() {
        let old = files(Some("# Helper\nBe kind.\n"), Some("name: helper\n"));
        let new = files(Some("# Helper\nBe strict.\n"), Some("name: helper\n"));
        assert_eq!(
            unified_diff(old, new, "version 1", "current"),
            "--- SOUL.md (version 1)\n+++ SOUL.md (current)\n@@ -1,2 +1,2 @@\n # Helper\n-Be kind.\n+Be strict.\n"
        );
        assert_eq!(unified_diff(old, old, "version 1", "current"), "");
    }
}
