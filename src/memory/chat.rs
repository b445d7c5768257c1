//! The replies of the chat commands `/memory`, `/memory facts`, `/memory history`,
//! `/memory revert <n>`, `/memory confirm <id>` and `/forget <id|all>`.

use crate::memory::MemoryError;
use crate::memory::document::MemoryDocument;
use crate::memory::history::WriteSource;
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
    let unconfirmed = doc.facts.iter().filter(|f| f.is_unconfirmed()).count();
    if unconfirmed > 0 {
        lines.push(format!(
            "Not used until you confirm them: {unconfirmed} learned while the conversation held \
             untrusted content (see /memory facts)."
        ));
    }
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
    for fact in &facts {
        let mut line = format!(
            "• {} [{}] {}",
            fact.id,
            fact.category.as_str(),
            fact.content
        );
        if fact.is_unconfirmed() {
            line.push_str(" ⚠ unconfirmed");
            if !fact.untrusted_from.is_empty() {
                line.push_str(&format!(
                    " (learned with untrusted content: {})",
                    fact.untrusted_from.join("; ")
                ));
            }
        }
        lines.push(line);
    }
    if facts.iter().any(|f| f.is_unconfirmed()) {
        lines.push(
            "Unconfirmed facts are not used until you confirm them: /memory confirm <id>.".into(),
        );
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
    let source = WriteSource::Chat {
        command: format!("/forget {argument}"),
    };
    let result = if argument.eq_ignore_ascii_case("all") {
        repo.clear(scope, &source).map(|count| {
            format!(
                "Forgot everything ({count} facts and all summaries). /memory history lists \
                 earlier versions if you want one back."
            )
        })
    } else {
        repo.delete_fact(scope, argument, &source)
            .map(|_| format!("Forgot {argument}."))
    };
    match result {
        Ok(text) => text,
        Err(MemoryError::FactNotFound { id }) => {
            format!("No fact {id}. List them with /memory facts.")
        }
        Err(error) => failed(scope, &error),
    }
}

/// `/memory confirm <id>`: a fact learned from untrusted content is used from now on.
pub fn confirm_reply(repo: &MemoryRepo, scope: &MemoryScope, argument: &str) -> String {
    let id = argument.trim();
    if id.is_empty() {
        return "Usage: /memory confirm <id> (ids from /memory facts).".into();
    }
    let source = WriteSource::Chat {
        command: format!("/memory confirm {id}"),
    };
    match repo.confirm_fact(scope, id, &source) {
        Ok((fact, true)) => format!("Confirmed {id}: \"{}\" is used from now on.", fact.content),
        Ok((_, false)) => format!("{id} needs no confirmation: it is already used."),
        Err(MemoryError::FactNotFound { id }) => {
            format!("No fact {id}. List them with /memory facts.")
        }
        Err(error) => failed(scope, &error),
    }
}

/// `/memory history`: the kept versions, newest first, one line each.
pub fn history_reply(repo: &MemoryRepo, scope: &MemoryScope) -> String {
    let versions = match repo.history(scope) {
        Ok(versions) => versions,
        Err(error) => return failed(scope, &error),
    };
    if versions.is_empty() {
        return "No memory versions yet: every change to your memory is kept here once made."
            .into();
    }
    let mut lines = vec![format!(
        "Memory versions, newest first (the last {} are kept):",
        repo.history_limit()
    )];
    for version in &versions {
        let at = version.at.replace('T', " ").replace('Z', " UTC");
        let restores = version
            .restores
            .map(|n| format!(" (back to version {n})"))
            .unwrap_or_default();
        lines.push(format!(
            "• {} · {at} · {}{restores}: {}",
            version.version,
            version.source,
            version.changes.describe()
        ));
    }
    lines.push("Put one back with /memory revert <number>.".into());
    lines.join("\n")
}

/// `/memory revert <n>`: restores version n as a new version, which can itself be reverted.
pub fn revert_reply(repo: &MemoryRepo, scope: &MemoryScope, argument: &str) -> String {
    let Ok(version) = argument.trim().trim_start_matches('#').parse::<u64>() else {
        return "Usage: /memory revert <number> (numbers from /memory history).".into();
    };
    let source = WriteSource::Chat {
        command: format!("/memory revert {version}"),
    };
    match repo.revert(scope, version, &source) {
        Ok(reverted) => match reverted.version {
            Some(new) => format!(
                "Memory restored to version {version} (saved as version {new}; /memory revert \
                 {} undoes this). Facts: {}.",
                new.saturating_sub(1),
                reverted.document.facts.len()
            ),
            None => format!("Your memory already matches version {version}."),
        },
        Err(MemoryError::VersionNotFound { version }) => {
            format!("No version {version}. List the kept versions with /memory history.")
        }
        Err(error) => failed(scope, &error),
    }
}

fn failed(scope: &MemoryScope, error: &MemoryError) -> String {
    tracing::warn!(%error, user_id = %scope.user_id, "Could not read or change memory from chat");
    format!("Could not reach your memory: {error}")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::document::{Fact, FactCategory};
    use antler_store::MemoryStore;

    #[test]
    fn forget_removes_a_fact_for_good() {
        let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
        let scope = MemoryScope::new("u", None);
        let (doc, _) = repo
            .update(&scope, &WriteSource::Import, |doc, _| {
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

    #[test]
    fn history_lists_writes_and_revert_brings_a_forgotten_fact_back() {
        let repo = MemoryRepo::new(Arc::new(MemoryStore::new()));
        let scope = MemoryScope::new("u", None);
        assert!(history_reply(&repo, &scope).starts_with("No memory versions yet"));
        let (doc, _) = repo
            .update(
                &scope,
                &WriteSource::Updater {
                    thread_id: "t1".into(),
                },
                |doc, _| {
                    doc.facts
                        .push(Fact::new("Likes tea", FactCategory::Preference, 0.9, "t1"));
                    Ok(())
                },
            )
            .unwrap();
        let id = doc.facts[0].id.clone();
        forget_reply(&repo, &scope, &id);
        let history = history_reply(&repo, &scope);
        let lines: Vec<&str> = history.lines().collect();
        assert!(lines[1].starts_with("• 2 ·"), "{history}");
        assert!(
            lines[1].ends_with(&format!("chat /forget {id}: −1 fact")),
            "{history}"
        );
        assert!(
            lines[2].ends_with("learned from thread t1: +1 fact"),
            "{history}"
        );
        assert_eq!(
            revert_reply(&repo, &scope, "1"),
            "Memory restored to version 1 (saved as version 3; /memory revert 2 undoes this). \
             Facts: 1."
        );
        assert!(repo.forgotten(&scope).unwrap().is_empty());
        assert_eq!(
            revert_reply(&repo, &scope, "1"),
            "Your memory already matches version 1."
        );
        assert!(revert_reply(&repo, &scope, "9").starts_with("No version 9."));
        assert!(revert_reply(&repo, &scope, "x").starts_with("Usage"));
        assert!(history_reply(&repo, &scope).contains("(back to version 1): +1 fact"));
    }
}
