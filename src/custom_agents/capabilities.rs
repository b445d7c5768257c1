//! What an agent's `tool_groups` and `skills` may name: the config's tool groups and the
//! skills its user can see. Checked wherever an agent is created or changed (the CLI on the
//! data dir, the HTTP API, `setup_agent`/`update_agent`), so a typo is refused with the valid
//! names instead of saving an agent that silently has no tools or skills.

use crate::config::AppConfig;
use crate::skills::SkillCatalog;

/// The names that exist for one user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownCapabilities {
    pub tool_groups: Vec<String>,
    pub skills: Vec<String>,
}

/// Names an agent asked for that do not exist, with the ones that do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(self))]
pub struct UnknownCapabilities {
    pub tool_groups: Vec<String>,
    pub skills: Vec<String>,
    pub known: KnownCapabilities,
}

impl KnownCapabilities {
    /// The config's tool groups and every skill `user` can see (public and their own, enabled
    /// or not: a disabled skill can be enabled later). A catalog that cannot be read leaves the
    /// skills unchecked rather than refusing every name.
    pub fn of(config: &AppConfig, catalog: &SkillCatalog, user: &str) -> Option<Self> {
        let skills = match catalog.list(user) {
            Ok(skills) => skills.into_iter().map(|skill| skill.name).collect(),
            Err(error) => {
                tracing::warn!(%error, user, "Cannot list skills to check an agent's skills against");
                return None;
            }
        };
        Some(Self {
            tool_groups: crate::tools::registry::configured_groups(config),
            skills,
        })
    }

    /// Refuses names that do not exist; `None` (all) and `[]` (none) are always valid.
    pub fn check(
        &self,
        tool_groups: Option<&[String]>,
        skills: Option<&[String]>,
    ) -> Result<(), UnknownCapabilities> {
        let unknown = |asked: Option<&[String]>, known: &[String]| -> Vec<String> {
            asked
                .unwrap_or_default()
                .iter()
                .filter(|name| !known.contains(name))
                .cloned()
                .collect()
        };
        let error = UnknownCapabilities {
            tool_groups: unknown(tool_groups, &self.tool_groups),
            skills: unknown(skills, &self.skills),
            known: self.clone(),
        };
        if error.tool_groups.is_empty() && error.skills.is_empty() {
            Ok(())
        } else {
            Err(error)
        }
    }
}

fn describe(error: &UnknownCapabilities) -> String {
    let list = |names: &[String]| {
        if names.is_empty() {
            "(none)".to_string()
        } else {
            names.join(", ")
        }
    };
    let part = |kind: &str, unknown: &[String], known: &[String]| {
        let plural = if unknown.len() == 1 { "" } else { "s" };
        let quoted: Vec<String> = unknown.iter().map(|name| format!("'{name}'")).collect();
        format!(
            "unknown {kind}{plural} {}; the {kind}s that exist are: {}",
            quoted.join(", "),
            list(known)
        )
    };
    let mut parts = Vec::new();
    if !error.tool_groups.is_empty() {
        parts.push(part(
            "tool group",
            &error.tool_groups,
            &error.known.tool_groups,
        ));
    }
    if !error.skills.is_empty() {
        parts.push(part("skill", &error.skills, &error.known.skills));
    }
    format!(
        "{} (leave the list out for all, or give an empty one for none)",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> KnownCapabilities {
        KnownCapabilities {
            tool_groups: vec!["web".into(), "bash".into()],
            skills: vec!["bootstrap".into(), "deep-research".into()],
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn existing_names_all_and_none_pass() {
        let known = known();
        assert!(known.check(None, None).is_ok());
        assert!(known.check(Some(&[]), Some(&[])).is_ok());
        assert!(
            known
                .check(Some(&names(&["bash"])), Some(&names(&["deep-research"])))
                .is_ok()
        );
    }

    #[test]
    fn unknown_names_are_refused_with_the_names_that_exist() {
        let error = known()
            .check(
                Some(&names(&["foo", "web"])),
                Some(&names(&["nosuch", "other"])),
            )
            .unwrap_err();
        assert_eq!(error.tool_groups, ["foo"]);
        assert_eq!(error.skills, ["nosuch", "other"]);
        assert_eq!(
            error.to_string(),
            "unknown tool group 'foo'; the tool groups that exist are: web, bash; unknown skills \
             'nosuch', 'other'; the skills that exist are: bootstrap, deep-research (leave the \
             list out for all, or give an empty one for none)"
        );
    }
}
