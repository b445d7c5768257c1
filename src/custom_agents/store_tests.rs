//! The store's own failure paths (injected write failures, rejected ids).

use super::*;
use std::sync::atomic::Ordering;

#[test]
fn failed_create_removes_the_new_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path());
    store.fail_soul_write.store(true, Ordering::SeqCst);
    let err = store
        .create("alice", "Helper", &AgentConfig::new("x", "d"), "soul")
        .unwrap_err();
    assert!(matches!(err, AgentStoreError::Io { .. }), "{err}");
    assert!(!store.agent_dir("alice", "helper").unwrap().exists());
    store.fail_soul_write.store(false, Ordering::SeqCst);
    let created = store
        .create("alice", "Helper", &AgentConfig::new("x", "d"), "soul")
        .unwrap();
    assert_eq!(created.config.name, "helper");
}

#[test]
fn failed_create_keeps_a_preexisting_dir_without_config() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path());
    let dir = store.agent_dir("alice", "helper").unwrap();
    std::fs::create_dir_all(dir.join("facts")).unwrap();
    store.fail_soul_write.store(true, Ordering::SeqCst);
    assert!(
        store
            .create("alice", "helper", &AgentConfig::new("helper", ""), "s")
            .is_err()
    );
    assert!(dir.join("facts").is_dir());
    assert!(!dir.join(CONFIG_FILE).exists());
}

#[test]
fn bad_user_or_name_is_rejected_before_any_path_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path());
    let config = AgentConfig::new("x", "");
    assert!(matches!(
        store.create("../evil", "x", &config, "s"),
        Err(AgentStoreError::InvalidUser(_))
    ));
    assert!(matches!(
        store.create("u", "../x", &config, "s"),
        Err(AgentStoreError::InvalidName(_))
    ));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

fn soul_update(soul: &str) -> AgentUpdate {
    AgentUpdate {
        soul: Some(soul.into()),
        ..Default::default()
    }
}

#[test]
fn versions_carry_their_author_and_summary_through_a_revert() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path());
    let ann = VersionAuthor::Person {
        user_id: "ann".into(),
        name: Some("Ann".into()),
    };
    let run = VersionAuthor::UpdateAgent {
        run_id: "run-2".into(),
        user_id: "ann".into(),
    };
    let config = AgentConfig::new("helper", "d");
    store
        .create_by("ann", "helper", &config, "one\ntwo\n", ann.clone())
        .unwrap();
    store
        .update_by("ann", "helper", soul_update("one\nTWO\n"), run.clone())
        .unwrap();
    let versions = store.history("ann", "helper").unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].author.as_ref(), Some(&ann));
    assert_eq!(
        versions[0].summary.as_deref(),
        Some("created: SOUL.md 2 lines")
    );
    let current = store.current_version("ann", "helper").unwrap();
    assert_eq!(
        (current.id.as_str(), current.author.as_ref()),
        ("000002", Some(&run))
    );
    assert_eq!(current.summary.as_deref(), Some("SOUL.md +1/−1 lines"));

    let archived = store
        .revert_by("ann", "helper", "000001", ann.clone())
        .unwrap();
    assert_eq!(archived.as_deref(), Some("000002"));
    let versions = store.history("ann", "helper").unwrap();
    assert_eq!(versions[1].author.as_ref(), Some(&run));
    let current = store.current_version("ann", "helper").unwrap();
    assert_eq!(
        current.author,
        Some(VersionAuthor::Revert {
            version: "000001".into(),
            by: Box::new(ann),
        })
    );
    assert_eq!(current.id, "000003");
    assert_eq!(
        store
            .current_files("ann", "helper")
            .unwrap()
            .soul
            .as_deref(),
        Some("one\ntwo\n")
    );
}

#[test]
fn versions_from_before_authors_and_hand_edits_read_as_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path());
    let run = VersionAuthor::UpdateAgent {
        run_id: "r".into(),
        user_id: "ann".into(),
    };
    let config = AgentConfig::new("helper", "d");
    store.create("ann", "helper", &config, "a\n").unwrap();
    store
        .update_by("ann", "helper", soul_update("b\n"), run.clone())
        .unwrap();
    store
        .update_by("ann", "helper", soul_update("c\n"), run)
        .unwrap();
    // Versions as an earlier release wrote them: only the time they were archived.
    let dir = store.agent_dir("ann", "helper").unwrap();
    for id in ["000001", "000002"] {
        std::fs::write(
            dir.join("history").join(id).join("version.json"),
            r#"{"created_at":"2026-01-01T00:00:00Z"}"#,
        )
        .unwrap();
    }
    // And a hand edit of the files in place, after the last recorded write.
    std::fs::write(dir.join(SOUL_FILE), "c\nd\n").unwrap();
    let versions = store.history("ann", "helper").unwrap();
    assert!(
        versions
            .iter()
            .all(|v| v.author.is_none() && v.written_at.is_none())
    );
    // Without a record the summary is computed against the version before, when kept.
    assert_eq!(versions[0].summary, None);
    assert_eq!(versions[1].summary.as_deref(), Some("SOUL.md +1/−1 lines"));
    let current = store.current_version("ann", "helper").unwrap();
    assert_eq!(current.author, None);
    assert_eq!(current.summary.as_deref(), Some("SOUL.md +2/−1 lines"));
}

#[test]
fn names_of_the_agent_subcommands_cannot_be_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let store = AgentStore::new(tmp.path());
    for name in RESERVED_AGENT_NAMES {
        let refused = store
            .create("ann", &name.to_uppercase(), &AgentConfig::new("x", ""), "s")
            .unwrap_err();
        assert!(
            matches!(&refused, AgentStoreError::ReservedName { name: n } if n == name),
            "{refused}"
        );
        assert!(refused.to_string().contains("choose another name"));
    }
}
