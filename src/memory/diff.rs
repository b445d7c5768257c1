//! `/memory diff <n>`: what memory version n changed against version n−1, fact by fact with
//! their text, and the summaries it rewrote, so a user can judge one change before reverting.
//!
//! `/memory history` counts (`+2 facts, workContext changed`); this names. Both read the
//! versions of the asker's own scope only, so another user's version numbers mean nothing here.

use std::collections::HashMap;

use crate::memory::MemoryError;
use crate::memory::document::{Fact, MemoryDocument};
use crate::memory::history::{MemoryVersion, section_names};
use crate::memory::repo::{MemoryRepo, MemoryScope};

/// The most of one summary a diff line shows; the rest is elided.
const SECTION_CHARS: usize = 600;

/// Facts and summaries that differ between two documents; facts are matched by id.
#[derive(Debug, Default, PartialEq)]
pub struct VersionDiff {
    pub added: Vec<Fact>,
    pub removed: Vec<Fact>,
    /// (before, after) of facts whose content, category or confidence changed.
    pub edited: Vec<(Fact, Fact)>,
    /// (JSON name, before, after) of the summaries whose text changed.
    pub sections: Vec<(&'static str, String, String)>,
}

impl VersionDiff {
    pub fn between(before: &MemoryDocument, after: &MemoryDocument) -> Self {
        let old: HashMap<&str, &Fact> = before.facts.iter().map(|f| (f.id.as_str(), f)).collect();
        let new: HashMap<&str, &Fact> = after.facts.iter().map(|f| (f.id.as_str(), f)).collect();
        let added = after
            .facts
            .iter()
            .filter(|fact| !old.contains_key(fact.id.as_str()))
            .cloned()
            .collect();
        let removed = before
            .facts
            .iter()
            .filter(|fact| !new.contains_key(fact.id.as_str()))
            .cloned()
            .collect();
        let edited = after
            .facts
            .iter()
            .filter_map(|fact| {
                let was = old.get(fact.id.as_str())?;
                let differs = (&was.content, was.category, was.confidence)
                    != (&fact.content, fact.category, fact.confidence);
                differs.then(|| ((*was).clone(), fact.clone()))
            })
            .collect();
        let sections = section_names(before)
            .into_iter()
            .zip(section_names(after))
            .filter(|((_, a), (_, b))| a.summary != b.summary)
            .map(|((name, a), (_, b))| (name, a.summary.clone(), b.summary.clone()))
            .collect();
        Self {
            added,
            removed,
            edited,
            sections,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.edited.is_empty()
            && self.sections.is_empty()
    }

    /// The diff as chat lines: `+ added`, `− removed`, `~ old → new`, then the summaries.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.added.is_empty() {
            lines.push(format!("Added ({}):", self.added.len()));
            lines.extend(self.added.iter().map(|f| format!("+ {}", fact_line(f))));
        }
        if !self.removed.is_empty() {
            lines.push(format!("Removed ({}):", self.removed.len()));
            lines.extend(self.removed.iter().map(|f| format!("− {}", fact_line(f))));
        }
        if !self.edited.is_empty() {
            lines.push(format!("Edited ({}):", self.edited.len()));
            lines.extend(self.edited.iter().map(|(was, now)| edit_line(was, now)));
        }
        if !self.sections.is_empty() {
            lines.push(format!("Summaries changed ({}):", self.sections.len()));
            for (name, was, now) in &self.sections {
                lines.push(format!("• {name}: {} → {}", quoted(was), quoted(now)));
            }
        }
        lines
    }
}

/// `/memory diff <n>`: version n against version n−1 of the asker's memory (version 1 against
/// an empty memory).
pub fn diff_reply(repo: &MemoryRepo, scope: &MemoryScope, argument: &str) -> String {
    let Ok(number) = argument.trim().trim_start_matches('#').parse::<u64>() else {
        return "Usage: /memory diff <number> (numbers from /memory history).".into();
    };
    let version = match repo.version(scope, number) {
        Ok(version) => version,
        Err(MemoryError::VersionNotFound { .. }) => {
            return format!("No version {number}. List the kept versions with /memory history.");
        }
        Err(error) => return failed(scope, &error),
    };
    let before = match number.checked_sub(1).filter(|n| *n > 0) {
        None => MemoryDocument::default(),
        Some(previous) => match repo.version(scope, previous) {
            Ok(previous) => previous.document,
            Err(MemoryError::VersionNotFound { .. }) => {
                return format!(
                    "{} Version {previous} is no longer kept (memory.history_limit keeps the \
                     last {}), so only the count is known: {}.",
                    heading(&version),
                    repo.history_limit(),
                    version.changes.describe()
                );
            }
            Err(error) => return failed(scope, &error),
        },
    };
    let diff = VersionDiff::between(&before, &version.document);
    let mut lines = vec![heading(&version)];
    if diff.is_empty() {
        lines.push("No fact or summary changed.".into());
    } else {
        lines.extend(diff.lines());
    }
    if number > 1 {
        lines.push(format!(
            "/memory revert {} puts back your memory as it was before this version.",
            number - 1
        ));
    }
    lines.join("\n")
}

/// `Version 6 · 2026-12-06 04:00:00 UTC · chat /memory revert 2 (back to version 2), against
/// version 5:`
fn heading(version: &MemoryVersion) -> String {
    let at = version.at.replace('T', " ").replace('Z', " UTC");
    let restores = version
        .restores
        .map(|n| format!(" (back to version {n})"))
        .unwrap_or_default();
    let against = match version.version {
        0 | 1 => "against an empty memory".to_string(),
        n => format!("against version {}", n - 1),
    };
    format!(
        "Version {} · {at} · {}{restores}, {against}:",
        version.version, version.source
    )
}

fn fact_line(fact: &Fact) -> String {
    format!(
        "{} [{}] ({})",
        fact.content,
        fact.category.as_str(),
        fact.id
    )
}

/// `~ old → new`, with what else changed: `[context → preference]`, `(confidence 0.90 → 0.80)`.
fn edit_line(was: &Fact, now: &Fact) -> String {
    let mut line = if was.content == now.content {
        format!("~ {}", now.content)
    } else {
        format!("~ {} → {}", was.content, now.content)
    };
    if was.category != now.category {
        line.push_str(&format!(
            " [{} → {}]",
            was.category.as_str(),
            now.category.as_str()
        ));
    }
    if was.confidence != now.confidence {
        line.push_str(&format!(
            " (confidence {:.2} → {:.2})",
            was.confidence, now.confidence
        ));
    }
    line.push_str(&format!(" ({})", now.id));
    line
}

fn quoted(summary: &str) -> String {
    let summary = summary.trim();
    if summary.is_empty() {
        return "(empty)".into();
    }
    let short: String = summary.chars().take(SECTION_CHARS).collect();
    let cut = if short.len() < summary.len() {
        "…"
    } else {
        ""
    };
    format!("“{short}{cut}”")
}

fn failed(scope: &MemoryScope, error: &MemoryError) -> String {
    tracing::warn!(%error, user_id = %scope.user_id, "Could not read memory versions for /memory diff");
    format!("Could not reach your memory: {error}")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::document::FactCategory;
    use crate::memory::history::WriteSource;
    use antler_store::MemoryStore;

    fn add(repo: &MemoryRepo, scope: &MemoryScope, content: &str) -> String {
        let (_, id) = repo
            .update(scope, &WriteSource::Import, |doc, _| {
                let fact = Fact::new(content, FactCategory::Knowledge, 0.9, "t");
                let id = fact.id.clone();
                doc.facts.push(fact);
                Ok(id)
            })
            .unwrap();
        id
    }

    #[test]
    fn names_added_removed_and_edited_facts_and_changed_summaries() {
        let mut before = MemoryDocument::default();
        before
            .facts
            .push(Fact::new("Likes tea", FactCategory::Preference, 0.9, "t"));
        before
            .facts
            .push(Fact::new("Lives in Paris", FactCategory::Context, 0.9, "t"));
        before.user.work_context.summary = "Writes Go".into();
        let mut after = before.clone();
        after.facts.remove(1);
        after.facts[0].content = "Likes green tea".into();
        after.facts[0].confidence = 0.8;
        after
            .facts
            .push(Fact::new("Writes Rust", FactCategory::Knowledge, 0.9, "t"));
        after.user.work_context.summary = "Writes Rust".into();
        let diff = VersionDiff::between(&before, &after);
        let tea = &after.facts[0].id;
        let rust = &after.facts[1].id;
        let paris = &before.facts[1].id;
        assert_eq!(
            diff.lines(),
            [
                "Added (1):".to_string(),
                format!("+ Writes Rust [knowledge] ({rust})"),
                "Removed (1):".into(),
                format!("− Lives in Paris [context] ({paris})"),
                "Edited (1):".into(),
                format!("~ Likes tea → Likes green tea (confidence 0.90 → 0.80) ({tea})"),
                "Summaries changed (1):".into(),
                "• workContext: “Writes Go” → “Writes Rust”".into(),
            ]
        );
        assert!(VersionDiff::between(&after, &after).is_empty());
    }

    #[test]
    fn a_category_change_alone_is_an_edit() {
        let mut before = MemoryDocument::default();
        before
            .facts
            .push(Fact::new("Runs", FactCategory::Behavior, 0.9, "t"));
        let mut after = before.clone();
        after.facts[0].category = FactCategory::Goal;
        let id = &after.facts[0].id;
        assert_eq!(
            VersionDiff::between(&before, &after).lines(),
            [
                "Edited (1):".to_string(),
                format!("~ Runs [behavior → goal] ({id})")
            ]
        );
    }

    #[test]
    fn the_reply_diffs_against_the_version_before_and_only_in_the_asker_scope() {
        let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
        let alice = MemoryScope::new("alice", None);
        add(&repo, &alice, "Likes tea");
        add(&repo, &alice, "Writes Rust");
        let first = diff_reply(&repo, &alice, "1");
        assert!(
            first.starts_with("Version 1 · ") && first.contains("against an empty memory:"),
            "{first}"
        );
        assert!(first.contains("+ Likes tea [knowledge]"), "{first}");
        let second = diff_reply(&repo, &alice, "#2");
        assert!(second.contains("import, against version 1:"), "{second}");
        assert!(second.contains("Added (1):\n+ Writes Rust"), "{second}");
        assert!(!second.contains("Likes tea"), "{second}");
        assert!(
            second.ends_with(
                "\n/memory revert 1 puts back your memory as it was before this version."
            )
        );
        assert!(!first.contains("/memory revert"), "{first}");

        let bob = MemoryScope::new("bob", None);
        assert_eq!(
            diff_reply(&repo, &bob, "2"),
            "No version 2. List the kept versions with /memory history."
        );
        let agent = MemoryScope::new("alice", Some("helper"));
        assert!(diff_reply(&repo, &agent, "1").starts_with("No version 1."));
        assert_eq!(
            diff_reply(&repo, &alice, "two"),
            "Usage: /memory diff <number> (numbers from /memory history)."
        );
    }

    #[test]
    fn a_version_whose_predecessor_was_dropped_says_so_with_the_count() {
        let repo = MemoryRepo::new(Arc::new(MemoryStore::new())).with_history_limit(2);
        let scope = MemoryScope::new("alice", None);
        for content in ["a", "b", "c"] {
            add(&repo, &scope, content);
        }
        let reply = diff_reply(&repo, &scope, "2");
        assert!(
            reply.contains("Version 1 is no longer kept (memory.history_limit keeps the last 2), so only the count is known: +1 fact."),
            "{reply}"
        );
        assert!(diff_reply(&repo, &scope, "3").contains("+ c [knowledge]"));
    }
}
