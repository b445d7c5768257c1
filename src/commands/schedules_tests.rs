use crate::config::AppConfig;
use crate::scheduler::{Caller, Placement, ScheduleSpec, Target, When};

use super::*;

fn spec(prompt: &str) -> ScheduleSpec {
    ScheduleSpec {
        prompt: prompt.into(),
        when: Some(When::Cron("0 9 * * MON".into())),
        timezone: Some("Europe/Berlin".into()),
        ..Default::default()
    }
}

fn here(owner: &str) -> Placement {
    Placement {
        target: Target::Thread,
        thread_id: format!("thread-{owner}"),
        thread_owner: owner.into(),
        agent_name: None,
        agent_owner: None,
        model_name: None,
    }
}

#[tokio::test]
async fn schedules_lists_ones_own_admins_all_and_unschedule_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let config = AppConfig {
        data_dir: Some(tmp.path().to_path_buf()),
        admins: vec!["root".into()],
        ..Default::default()
    };
    let client = crate::client::Client::new(config.clone()).unwrap();
    let harness = client.harness();
    let scheduler = harness.scheduler();
    let alice = Caller {
        user_id: "alice".into(),
        is_admin: false,
    };
    let bob = Caller {
        user_id: "bob".into(),
        is_admin: false,
    };
    let mine = scheduler
        .create(
            &config.scheduler,
            &alice,
            spec("Water the plants every Monday"),
            here("alice"),
        )
        .unwrap();
    let theirs = scheduler
        .create(&config.scheduler, &bob, spec("Weekly report"), here("bob"))
        .unwrap();
    let listed = list(harness, &config, "alice").unwrap();
    assert!(listed.starts_with("Schedules (1):"), "{listed}");
    assert!(
        listed.contains(&format!("`{}` Water the plants every Monday", mine.id)),
        "{listed}"
    );
    assert!(listed.contains("next Mon "), "{listed}");
    assert!(!listed.contains(&theirs.id), "{listed}");
    let everyone = list(harness, &config, "root").unwrap();
    assert!(everyone.starts_with("Schedules (2):"), "{everyone}");
    assert!(everyone.contains("(of bob)"), "{everyone}");

    let usage = unschedule(harness, &config, "alice", " ").unwrap();
    assert_eq!(usage, UNSCHEDULE_USAGE);
    let not_hers = unschedule(harness, &config, "alice", &theirs.id).unwrap();
    assert!(
        not_hers.starts_with(&format!("no schedule {}", theirs.id)),
        "{not_hers}"
    );
    let removed = unschedule(harness, &config, "alice", &mine.id).unwrap();
    assert!(
        removed.starts_with(&format!("Removed schedule `{}`", mine.id)),
        "{removed}"
    );
    assert_eq!(
        list(harness, &config, "alice").unwrap(),
        list_text(&[], false)
    );
    assert_eq!(scheduler.list(&bob).unwrap().len(), 1, "bob's stays");
    client
        .shutdown(std::time::Duration::from_secs(1))
        .await
        .unwrap();
}
