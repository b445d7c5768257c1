//! Versions of a memory document: who wrote each one, when, and what changed, so a user can see
//! how their memory came to be and put back an earlier state.
//!
//! Every write that changes the document stores the document as written under the next version
//! number in the `memory_history` tree, in the same conditional batch as the record itself (the
//! repo's write); the oldest versions beyond `memory.history_limit` are deleted in that
//! batch too, so history and record never disagree after a crash.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::memory::document::MemoryDocument;

pub const HISTORY_TREE: &str = "memory_history";
/// Width of the zero-padded version number in a key, so key order is version order.
const VERSION_WIDTH: usize = 20;

/// Who or what wrote a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WriteSource {
    /// The memory updater, learning from a thread's conversation.
    Updater { thread_id: String },
    /// A chat command, as typed (`/forget fact_…`, `/memory revert 3`).
    Chat { command: String },
    /// An HTTP request (`DELETE /api/memory/facts/fact_…`).
    Api { request: String },
    /// `POST /api/memory/import`.
    Import,
    /// The document as it was when history started being kept; its writer is unknown.
    Earlier,
}

impl std::fmt::Display for WriteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Updater { thread_id } => write!(f, "learned from thread {thread_id}"),
            Self::Chat { command } => write!(f, "chat {command}"),
            Self::Api { request } => write!(f, "API {request}"),
            Self::Import => f.write_str("import"),
            Self::Earlier => f.write_str("before history was kept"),
        }
    }
}

/// What a version changed compared to the one before it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSummary {
    pub facts_added: usize,
    pub facts_removed: usize,
    /// Facts whose content, category or confidence changed (same id).
    pub facts_edited: usize,
    /// The summaries that changed, by their JSON name (`workContext`, `recentMonths`, …).
    pub sections_changed: Vec<String>,
}

impl ChangeSummary {
    pub fn between(before: &MemoryDocument, after: &MemoryDocument) -> Self {
        let old: HashMap<&str, _> = before.facts.iter().map(|f| (f.id.as_str(), f)).collect();
        let new: HashMap<&str, _> = after.facts.iter().map(|f| (f.id.as_str(), f)).collect();
        let facts_added = new.keys().filter(|id| !old.contains_key(*id)).count();
        let facts_removed = old.keys().filter(|id| !new.contains_key(*id)).count();
        let facts_edited = new
            .iter()
            .filter(|(id, fact)| {
                old.get(*id).is_some_and(|was| {
                    (&was.content, was.category, was.confidence)
                        != (&fact.content, fact.category, fact.confidence)
                })
            })
            .count();
        let sections_changed = section_names(before)
            .into_iter()
            .zip(section_names(after))
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, _), _)| name.to_string())
            .collect();
        Self {
            facts_added,
            facts_removed,
            facts_edited,
            sections_changed,
        }
    }

    /// Short, for a chat line: `+2 facts, −1 fact, workContext changed`.
    pub fn describe(&self) -> String {
        let plural = |n: usize| if n == 1 { "fact" } else { "facts" };
        let mut parts = Vec::new();
        if self.facts_added > 0 {
            parts.push(format!(
                "+{} {}",
                self.facts_added,
                plural(self.facts_added)
            ));
        }
        if self.facts_removed > 0 {
            parts.push(format!(
                "−{} {}",
                self.facts_removed,
                plural(self.facts_removed)
            ));
        }
        if self.facts_edited > 0 {
            parts.push(format!(
                "{} {} edited",
                self.facts_edited,
                plural(self.facts_edited)
            ));
        }
        if !self.sections_changed.is_empty() {
            parts.push(format!("{} changed", self.sections_changed.join(", ")));
        }
        if parts.is_empty() {
            return "no change".into();
        }
        parts.join(", ")
    }
}

/// One stored version: the whole document as written, with its attribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryVersion {
    pub version: u64,
    /// When it was written (RFC 3339, UTC).
    pub at: String,
    pub source: WriteSource,
    /// Set when this version put back an earlier one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restores: Option<u64>,
    pub changes: ChangeSummary,
    pub document: MemoryDocument,
}

/// The prefix of every history key of one scope (`scope_key` is the record's key).
pub(crate) fn prefix(scope_key: &[u8]) -> Vec<u8> {
    let mut key = scope_key.to_vec();
    key.push(0);
    key
}

pub(crate) fn key(scope_key: &[u8], version: u64) -> Vec<u8> {
    let mut key = prefix(scope_key);
    key.extend_from_slice(format!("{version:0VERSION_WIDTH$}").as_bytes());
    key
}

/// The document's content without its write time: two documents that differ only there are
/// the same version.
pub(crate) fn same_content(a: &MemoryDocument, b: &MemoryDocument) -> bool {
    (&a.version, &a.user, &a.history, &a.facts) == (&b.version, &b.user, &b.history, &b.facts)
}

pub(crate) fn section_names(doc: &MemoryDocument) -> [(&'static str, &crate::memory::Section); 6] {
    [
        ("workContext", &doc.user.work_context),
        ("personalContext", &doc.user.personal_context),
        ("topOfMind", &doc.user.top_of_mind),
        ("recentMonths", &doc.history.recent_months),
        ("earlierContext", &doc.history.earlier_context),
        ("longTermBackground", &doc.history.long_term_background),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::document::{Fact, FactCategory};

    #[test]
    fn change_summary_counts_facts_and_sections() {
        let mut before = MemoryDocument::default();
        before
            .facts
            .push(Fact::new("Likes tea", FactCategory::Preference, 0.9, "t"));
        before
            .facts
            .push(Fact::new("Lives in Paris", FactCategory::Context, 0.9, "t"));
        let mut after = before.clone();
        after.facts.remove(1);
        after.facts[0].confidence = 0.8;
        after
            .facts
            .push(Fact::new("Writes Rust", FactCategory::Knowledge, 0.9, "t"));
        after
            .facts
            .push(Fact::new("Runs", FactCategory::Behavior, 0.9, "t"));
        after.user.work_context.summary = "Rust developer".into();
        let changes = ChangeSummary::between(&before, &after);
        assert_eq!(
            changes.describe(),
            "+2 facts, −1 fact, 1 fact edited, workContext changed"
        );
        assert_eq!(
            ChangeSummary::between(&after, &after).describe(),
            "no change"
        );
    }

    #[test]
    fn keys_sort_by_version_and_scopes_do_not_share_a_prefix() {
        assert!(key(b"u\0a", 9) < key(b"u\0a", 10));
        assert!(!key(b"u\0ab", 1).starts_with(&prefix(b"u\0a")));
        assert!(key(b"u\0a", 1).starts_with(&prefix(b"u\0a")));
    }

    #[test]
    fn write_time_alone_is_not_a_change() {
        let a = MemoryDocument::default();
        let mut b = a.clone();
        b.last_updated = "2026-01-01T00:00:00Z".into();
        assert!(same_content(&a, &b));
        b.user.top_of_mind.summary = "x".into();
        assert!(!same_content(&a, &b));
    }
}
