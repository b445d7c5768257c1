//! Deterministic container names and the labels that let a restarted daemon recognise its
//! own containers. Daemons sharing one store may share one Docker host: each one's containers
//! carry its instance id in their name and a label, so none adopts or removes another's.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::paths::validate_id;

/// Label on every container this provider creates; orphan adoption lists by it.
pub const MANAGED_LABEL: &str = "antler.managed";
pub(crate) const USER_LABEL: &str = "antler.user";
pub(crate) const THREAD_LABEL: &str = "antler.thread";
/// The instance id of the daemon that made the container (only with several daemons).
pub(crate) const INSTANCE_LABEL: &str = "antler.instance";

/// Sandbox ids handed to callers: `docker:{user}:{thread}`.
pub(crate) fn sandbox_id(user_id: &str, thread_id: &str) -> String {
    format!("docker:{user_id}:{thread_id}")
}

/// The container of one (user, thread): `antler-{user}-{thread}-{hash12}`.
///
/// Ids are already limited to `[A-Za-z0-9_-]`, which Docker accepts, but `-` also separates
/// the parts, so `a-b`/`c` and `a`/`b-c` would collide without the hash of the exact pair.
pub fn container_name(user_id: &str, thread_id: &str) -> String {
    container_name_in(None, user_id, thread_id)
}

/// The container of one (user, thread) made by `instance`: `antler-{instance}-{user}-{thread}-
/// {hash12}` (the hash covers the instance too), or [`container_name`]'s for a single daemon.
pub fn container_name_in(instance: Option<&str>, user_id: &str, thread_id: &str) -> String {
    let (prefix, hashed) = match instance {
        Some(instance) => (
            format!("antler-{}", sanitise(instance)),
            format!("{instance}:{user_id}:{thread_id}"),
        ),
        None => ("antler".to_string(), format!("{user_id}:{thread_id}")),
    };
    let hash = hex::encode(Sha256::digest(hashed.as_bytes()));
    format!(
        "{prefix}-{}-{}-{}",
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

pub(crate) fn labels(
    instance: Option<&str>,
    user_id: &str,
    thread_id: &str,
) -> HashMap<String, String> {
    let mut labels = HashMap::from([
        (MANAGED_LABEL.to_string(), "true".to_string()),
        (USER_LABEL.to_string(), user_id.to_string()),
        (THREAD_LABEL.to_string(), thread_id.to_string()),
    ]);
    if let Some(instance) = instance {
        labels.insert(INSTANCE_LABEL.to_string(), instance.to_string());
    }
    labels
}

/// Whether a listed container belongs to another daemon sharing this Docker host: labelled
/// with an instance other than `instance`. Those are left alone at start.
pub(crate) fn made_by_another(instance: Option<&str>, labels: &HashMap<String, String>) -> bool {
    labels
        .get(INSTANCE_LABEL)
        .is_some_and(|made_by| Some(made_by.as_str()) != instance)
}

/// The (user, thread) a listed container belongs to, when its labels name valid ids and its
/// name is exactly the one this provider would give that pair.
pub(crate) fn owner_of(
    instance: Option<&str>,
    name: &str,
    labels: &HashMap<String, String>,
) -> Option<(String, String)> {
    if labels.get(INSTANCE_LABEL).map(String::as_str) != instance {
        return None;
    }
    let user = labels.get(USER_LABEL)?;
    let thread = labels.get(THREAD_LABEL)?;
    validate_id("user", user).ok()?;
    validate_id("thread", thread).ok()?;
    // The engine lists names with a leading '/'.
    let name = name.strip_prefix('/').unwrap_or(name);
    (name == container_name_in(instance, user, thread)).then(|| (user.clone(), thread.clone()))
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
        let labels = labels(None, "alice", "t1");
        let name = format!("/{}", container_name("alice", "t1"));
        assert_eq!(
            owner_of(None, &name, &labels),
            Some(("alice".to_string(), "t1".to_string()))
        );
        assert_eq!(
            owner_of(None, "/antler-alice-t1-000000000000", &labels),
            None
        );
        let mut forged = labels.clone();
        forged.insert(USER_LABEL.into(), "../root".into());
        assert_eq!(owner_of(None, &name, &forged), None);
        assert_eq!(owner_of(None, &name, &HashMap::new()), None);
    }

    #[test]
    fn instances_sharing_a_docker_host_keep_their_own_containers() {
        let a = container_name_in(Some("web-1"), "alice", "t1");
        let b = container_name_in(Some("web-2"), "alice", "t1");
        assert!(a.starts_with("antler-web-1-alice-t1-"), "{a}");
        assert_ne!(a, b);
        assert_ne!(a, container_name("alice", "t1"));
        let of_a = labels(Some("web-1"), "alice", "t1");
        assert_eq!(
            owner_of(Some("web-1"), &a, &of_a),
            Some(("alice".to_string(), "t1".to_string()))
        );
        // web-2 neither adopts nor removes it; a single daemon's own are not web-1's.
        assert_eq!(owner_of(Some("web-2"), &a, &of_a), None);
        assert!(made_by_another(Some("web-2"), &of_a));
        assert!(!made_by_another(Some("web-1"), &of_a));
        assert!(made_by_another(None, &of_a));
        let single = labels(None, "alice", "t1");
        assert!(!made_by_another(Some("web-1"), &single));
        assert_eq!(
            owner_of(Some("web-1"), &container_name("alice", "t1"), &single),
            None
        );
    }
}
