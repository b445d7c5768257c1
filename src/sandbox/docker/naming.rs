//! Deterministic container names and the labels that let a restarted daemon recognise its
//! own containers.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::paths::validate_id;

/// Label on every container this provider creates; orphan adoption lists by it.
pub const MANAGED_LABEL: &str = "antler.managed";
pub(crate) const USER_LABEL: &str = "antler.user";
pub(crate) const THREAD_LABEL: &str = "antler.thread";

/// Sandbox ids handed to callers: `docker:{user}:{thread}`.
pub(crate) fn sandbox_id(user_id: &str, thread_id: &str) -> String {
    format!("docker:{user_id}:{thread_id}")
}

/// The container of one (user, thread): `antler-{user}-{thread}-{hash12}`.
///
/// Ids are already limited to `[A-Za-z0-9_-]`, which Docker accepts, but `-` also separates
/// the parts, so `a-b`/`c` and `a`/`b-c` would collide without the hash of the exact pair.
pub fn container_name(user_id: &str, thread_id: &str) -> String {
    let digest = Sha256::digest(format!("{user_id}:{thread_id}").as_bytes());
    let hash = hex::encode(digest);
    format!(
        "antler-{}-{}-{}",
        sanitise(user_id),
        sanitise(thread_id),
        &hash[..12]
    )
}

/// Keeps only characters Docker allows in names (`[A-Za-z0-9_.-]`), at most 48 of them.
fn sanitise(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect()
}

pub(crate) fn labels(user_id: &str, thread_id: &str) -> HashMap<String, String> {
    HashMap::from([
        (MANAGED_LABEL.to_string(), "true".to_string()),
        (USER_LABEL.to_string(), user_id.to_string()),
        (THREAD_LABEL.to_string(), thread_id.to_string()),
    ])
}

/// The (user, thread) a listed container belongs to, when its labels name valid ids and its
/// name is exactly the one this provider would give that pair.
pub(crate) fn owner_of(name: &str, labels: &HashMap<String, String>) -> Option<(String, String)> {
    let user = labels.get(USER_LABEL)?;
    let thread = labels.get(THREAD_LABEL)?;
    validate_id("user", user).ok()?;
    validate_id("thread", thread).ok()?;
    // The engine lists names with a leading '/'.
    let name = name.strip_prefix('/').unwrap_or(name);
    (name == container_name(user, thread)).then(|| (user.clone(), thread.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_deterministic_valid_and_collision_free() {
        let name = container_name("alice", "t-1");
        assert_eq!(name, container_name("alice", "t-1"));
        assert!(name.starts_with("antler-alice-t-1-"), "{name}");
        assert_eq!(name.len(), "antler-alice-t-1-".len() + 12);
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        );
        assert_ne!(container_name("a-b", "c"), container_name("a", "b-c"));
        assert_eq!(sanitise("we:ird/id"), "we_ird_id");
    }

    #[test]
    fn owner_requires_labels_and_the_matching_name() {
        let labels = labels("alice", "t1");
        let name = format!("/{}", container_name("alice", "t1"));
        assert_eq!(
            owner_of(&name, &labels),
            Some(("alice".to_string(), "t1".to_string()))
        );
        assert_eq!(owner_of("/antler-alice-t1-000000000000", &labels), None);
        let mut forged = labels.clone();
        forged.insert(USER_LABEL.into(), "../root".into());
        assert_eq!(owner_of(&name, &forged), None);
        assert_eq!(owner_of(&name, &HashMap::new()), None);
    }
}
