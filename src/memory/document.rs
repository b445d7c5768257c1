//! The memory document in the seed's JSON shape (`user.*`, `history.*`, `facts`), which is
//! also the export/import format.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const DOCUMENT_VERSION: &str = "1.0";

/// A summary and when it last changed (empty = unknown).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Section {
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub updated_at: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserContext {
    #[serde(default)]
    pub work_context: Section,
    #[serde(default)]
    pub personal_context: Section,
    #[serde(default)]
    pub top_of_mind: Section,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct History {
    #[serde(default)]
    pub recent_months: Section,
    #[serde(default)]
    pub earlier_context: Section,
    #[serde(default)]
    pub long_term_background: Section,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FactCategory {
    Preference,
    Knowledge,
    Context,
    Behavior,
    Goal,
    Correction,
}

impl FactCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preference => "preference",
            Self::Knowledge => "knowledge",
            Self::Context => "context",
            Self::Behavior => "behavior",
            Self::Goal => "goal",
            Self::Correction => "correction",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fact {
    pub id: String,
    pub content: String,
    pub category: FactCategory,
    pub confidence: f64,
    pub created_at: String,
    /// The thread the fact came from (`"api"`, `"import"` for facts written by hand), or
    /// [`UNTRUSTED_SOURCE`] while a fact learned in a turn whose context held untrusted content
    /// waits for the user's confirmation: until then it is never injected into a prompt.
    #[serde(default)]
    pub source: String,
    /// The thread an unconfirmed fact came from; it becomes `source` once confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_thread: Option<String>,
    /// The untrusted content that thread held when the fact was learned (`web_fetch https://…`),
    /// so the user can judge before confirming.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted_from: Vec<String>,
}

/// `Fact::source` of a fact learned from untrusted content and not confirmed yet.
pub const UNTRUSTED_SOURCE: &str = "untrusted";

impl Fact {
    pub fn new(content: &str, category: FactCategory, confidence: f64, source: &str) -> Self {
        Self {
            id: format!("fact_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            content: content.trim().to_string(),
            category,
            confidence: confidence.clamp(0.0, 1.0),
            created_at: now(),
            source: source.to_string(),
            source_thread: None,
            untrusted_from: Vec::new(),
        }
    }

    /// A fact learned in `thread_id` while its context held `untrusted` content: kept out of
    /// prompts until confirmed.
    pub fn unconfirmed(mut self, thread_id: &str, untrusted: &[String]) -> Self {
        self.source = UNTRUSTED_SOURCE.to_string();
        self.source_thread = Some(thread_id.to_string());
        self.untrusted_from = untrusted.to_vec();
        self
    }

    /// Waits for the user's confirmation (`/memory confirm ID`).
    pub fn is_unconfirmed(&self) -> bool {
        self.source == UNTRUSTED_SOURCE
    }

    /// The user vouches for it: it is injected from now on, attributed to its thread again.
    pub fn confirm(&mut self) {
        if let Some(thread) = self.source_thread.take() {
            self.source = thread;
        } else if self.is_unconfirmed() {
            self.source = "confirmed".to_string();
        }
        self.untrusted_from.clear();
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryDocument {
    #[serde(default = "version")]
    pub version: String,
    #[serde(default)]
    pub last_updated: String,
    #[serde(default)]
    pub user: UserContext,
    #[serde(default)]
    pub history: History,
    #[serde(default)]
    pub facts: Vec<Fact>,
}

impl Default for MemoryDocument {
    fn default() -> Self {
        Self {
            version: version(),
            last_updated: String::new(),
            user: UserContext::default(),
            history: History::default(),
            facts: Vec::new(),
        }
    }
}

impl MemoryDocument {
    /// Nothing remembered: no summary and no fact.
    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
            && self
                .sections()
                .iter()
                .all(|(_, s)| s.summary.trim().is_empty())
    }

    /// The six summaries with their display labels, user context first.
    pub fn sections(&self) -> [(&'static str, &Section); 6] {
        [
            ("Work", &self.user.work_context),
            ("Personal", &self.user.personal_context),
            ("Current Focus", &self.user.top_of_mind),
            ("Recent", &self.history.recent_months),
            ("Earlier", &self.history.earlier_context),
            ("Background", &self.history.long_term_background),
        ]
    }

    /// The summary named by its JSON path (`user.workContext`, `history.recentMonths`, …).
    pub fn section_mut(&mut self, path: &str) -> Option<&mut Section> {
        Some(match path {
            "user.workContext" => &mut self.user.work_context,
            "user.personalContext" => &mut self.user.personal_context,
            "user.topOfMind" => &mut self.user.top_of_mind,
            "history.recentMonths" => &mut self.history.recent_months,
            "history.earlierContext" => &mut self.history.earlier_context,
            "history.longTermBackground" => &mut self.history.long_term_background,
            _ => return None,
        })
    }

    /// Checks what serde cannot: confidences in 0–1, non-empty and unique fact ids.
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for fact in &self.facts {
            if fact.id.trim().is_empty() || !seen.insert(fact.id.as_str()) {
                return Err(format!("fact id `{}` is empty or repeated", fact.id));
            }
            if !(0.0..=1.0).contains(&fact.confidence) {
                return Err(format!("fact {} has confidence outside 0–1", fact.id));
            }
            if fact.content.trim().is_empty() {
                return Err(format!("fact {} has no content", fact.id));
            }
        }
        Ok(())
    }
}

/// The dedupe key of a fact: trimmed, whitespace-collapsed, case-folded content.
pub fn normalize(content: &str) -> String {
    content
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

pub fn now() -> String {
    let now: DateTime<Utc> = Utc::now();
    now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn version() -> String {
    DOCUMENT_VERSION.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_shape_round_trips() {
        let json = r#"{"version":"1.0","lastUpdated":"2026-01-01T00:00:00Z",
            "user":{"workContext":{"summary":"Rust dev","updatedAt":"x"},
                    "personalContext":{"summary":"","updatedAt":""},
                    "topOfMind":{"summary":"","updatedAt":""}},
            "history":{"recentMonths":{"summary":"","updatedAt":""},
                    "earlierContext":{"summary":"","updatedAt":""},
                    "longTermBackground":{"summary":"","updatedAt":""}},
            "facts":[{"id":"fact_1","content":"Likes tea","category":"preference",
                      "confidence":0.9,"createdAt":"x","source":"t1"}]}"#;
        let doc: MemoryDocument = serde_json::from_str(json).unwrap();
        assert_eq!(doc.user.work_context.summary, "Rust dev");
        assert_eq!(doc.facts[0].category, FactCategory::Preference);
        let back: serde_json::Value = serde_json::to_value(&doc).unwrap();
        assert_eq!(back["user"]["workContext"]["updatedAt"], "x");
        assert_eq!(back["facts"][0]["createdAt"], "x");
    }

    #[test]
    fn unknown_categories_and_bad_confidence_are_rejected() {
        let bad = r#"{"facts":[{"id":"a","content":"c","category":"gossip","confidence":0.9,"createdAt":""}]}"#;
        assert!(serde_json::from_str::<MemoryDocument>(bad).is_err());
        let mut doc = MemoryDocument::default();
        doc.facts.push(Fact::new("x", FactCategory::Goal, 0.5, "t"));
        doc.facts[0].confidence = 1.5;
        assert!(doc.validate().is_err());
    }

    #[test]
    fn an_unconfirmed_fact_round_trips_and_confirming_restores_its_thread() {
        let old = r#"{"facts":[{"id":"fact_1","content":"Likes tea","category":"preference",
            "confidence":0.9,"createdAt":"x","source":"t1"}]}"#;
        let doc: MemoryDocument = serde_json::from_str(old).expect("an old record reads");
        assert!(!doc.facts[0].is_unconfirmed());
        let untrusted = vec!["web_fetch https://example.com/".to_string()];
        let mut fact = Fact::new("Uses Vim", FactCategory::Preference, 0.9, "t2")
            .unconfirmed("t2", &untrusted);
        let json = serde_json::to_value(&fact).expect("serializes");
        assert_eq!(json["source"], "untrusted");
        assert_eq!(json["sourceThread"], "t2");
        assert_eq!(json["untrustedFrom"][0], "web_fetch https://example.com/");
        let back: Fact = serde_json::from_value(json).expect("reads back");
        assert!(back.is_unconfirmed());
        fact.confirm();
        assert!(!fact.is_unconfirmed());
        assert_eq!(fact.source, "t2");
        let json = serde_json::to_value(&fact).expect("serializes");
        assert!(json.get("sourceThread").is_none() && json.get("untrustedFrom").is_none());
    }

    #[test]
    fn normalize_folds_case_and_spaces() {
        assert_eq!(normalize("  Likes   TEA "), "likes tea");
    }
}
