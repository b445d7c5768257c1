//! The replies of the chat commands `/memory`, `/memory facts` and `/forget <id|all>`.

use crate::memory::MemoryError;
use crate::memory::document::MemoryDocument;
use crate::memory::repo::{MemoryRepo, MemoryScope};

/// What `/memory` shows at most per summary.
const SUMMARY_CHARS: usize = 200;

/// `/memory`: the summaries in short, and how many facts.
pub fn summary_reply(doc: &MemoryDocument) -> String {
    if doc.is_empty() {
        return "I don't remember anything about you yet.".into();
    }
    let mut lines = vec!["What I remember about you:".to_string()];
    for (label, section) in doc.sections() {
        let summary = section.summary.trim();
        if summary.is_empty() {
            continue;
        }
        let short: String = summary.chars().take(SUMMARY_CHARS).collect();
        let cut = if short.len() < summary.len() {
            "…"
        } else {
            ""
        };
        lines.push(format!("• {label}: {short}{cut}"));
    }
    lines.push(format!(
        "Facts: {}. Use /memory facts to list them and /forget <id|all> to delete.",
        doc.facts.len()
    ));
    lines.join("\n")
}

/// `/memory facts`: each fact with its id, most confident first.
pub fn facts_reply(doc: &MemoryDocument) -> String {
    if doc.facts.is_empty() {
        return "No facts remembered.".into();
    }
    let mut facts: Vec<_> = doc.facts.iter().collect();
    facts.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let mut lines = vec![format!("Facts ({}):", facts.len())];
    for fact in facts {
        lines.push(format!(
            "• {} [{}] {}",
            fact.id,
            fact.category.as_str(),
            fact.content
        ));
    }
    lines.push("Delete one with /forget <id>, everything with /forget all.".into());
    lines.join("\n")
}

/// `/forget <id|all>`.
pub fn forget_reply(repo: &MemoryRepo, scope: &MemoryScope, argument: &str) -> String {
    let argument = argument.trim();
    if argument.is_empty() {
        return "Usage: /forget <id> (ids from /memory facts) or /forget all.".into();
    }
    let result = if argument.eq_ignore_ascii_case("all") {
        repo.clear(scope)
            .map(|count| format!("Forgot everything ({count} facts and all summaries)."))
    } else {
        repo.delete_fact(scope, argument)
            .map(|_| format!("Forgot {argument}."))
    };
    match result {
        Ok(text) => text,
        Err(MemoryError::FactNotFound { id }) => {
            format!("No fact {id}. List them with /memory facts.")
        }
        Err(error) => {
            tracing::warn!(%error, user_id = %scope.user_id, "Could not change memory from chat");
            format!("Could not change your memory: {error}")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::document::{Fact, FactCategory};
    use crate::store::MemoryStore;

    #[test]
    fn forget_removes_a_fact_for_good() {
        let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
        let scope = MemoryScope::new("u", None);
        let (doc, _) = repo
            .update(&scope, |doc, _| {
                doc.facts
                    .push(Fact::new("Likes tea", FactCategory::Preference, 0.9, "t"));
                doc.user.work_context.summary = "Writes Rust".into();
                Ok(())
            })
            .unwrap();
        let id = doc.facts[0].id.clone();
        assert!(summary_reply(&doc).contains("Facts: 1."));
        assert!(facts_reply(&doc).contains(&format!("• {id} [preference] Likes tea")));
        assert_eq!(forget_reply(&repo, &scope, &id), format!("Forgot {id}."));
        assert!(forget_reply(&repo, &scope, &id).starts_with("No fact"));
        assert!(repo.load(&scope).unwrap().facts.is_empty());
        assert!(forget_reply(&repo, &scope, "").starts_with("Usage"));
        assert!(forget_reply(&repo, &scope, "all").starts_with("Forgot everything (0 facts"));
        assert!(summary_reply(&repo.load(&scope).unwrap()).contains("don't remember"));
    }
}
