//! The `/skills` chat reply: what this conversation can activate, and what is installed but
//! unusable here (disabled, or outside the agent's list).

use std::fmt::Write as _;

use crate::skills::{SkillCatalog, SkillError};

/// The reply for `user` chatting with an agent that may use `allowed` (`None` = all enabled).
pub fn skills_reply(
    catalog: &SkillCatalog,
    user: &str,
    allowed: Option<&[String]>,
) -> Result<String, SkillError> {
    let skills = catalog.list(user)?;
    let usable = |name: &str| allowed.is_none_or(|names| names.iter().any(|n| n == name));
    let mut out = String::new();
    let mut unusable = Vec::new();
    for skill in &skills {
        if skill.enabled && usable(&skill.name) {
            if out.is_empty() {
                out.push_str("Skills you can use here:\n");
            }
            let _ = writeln!(out, "• /{} — {}", skill.name, skill.description);
        } else if !skill.enabled {
            unusable.push(format!("{} (disabled)", skill.name));
        } else {
            unusable.push(format!("{} (not for this agent)", skill.name));
        }
    }
    if out.is_empty() {
        out.push_str("No skills are available in this conversation.\n");
    } else {
        out.push_str("Activate one for a message with /<skill-name> <task>.\n");
    }
    if !unusable.is_empty() {
        let _ = writeln!(out, "Installed but unavailable: {}", unusable.join(", "));
    }
    Ok(out.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_usable_skills_and_says_why_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = crate::skills::catalog::tests::shipped_catalog(dir.path());
        catalog
            .set_enabled("root", "bootstrap", false, true)
            .unwrap();
        let allowed = vec!["data-analysis".to_string()];
        let reply = skills_reply(&catalog, "alice", Some(&allowed)).unwrap();
        assert!(reply.starts_with("Skills you can use here:\n• /data-analysis — Analyse"));
        assert!(reply.contains("/<skill-name> <task>"));
        assert!(reply.ends_with(
            "Installed but unavailable: bootstrap (disabled), research-report (not for this agent)"
        ));
        let none = skills_reply(&catalog, "alice", Some(&[])).unwrap();
        assert!(none.starts_with("No skills are available in this conversation."));
    }
}
