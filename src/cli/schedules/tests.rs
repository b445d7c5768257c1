use chrono::TimeZone;

use super::*;
use crate::scheduler::{CatchUp, Deliver, FireOutcome, LastFire, Target, When};

fn schedule(id: &str, owner: &str, status: ScheduleStatus) -> Schedule {
    let at = chrono::Utc
        .with_ymd_and_hms(2026, 12, 7, 8, 0, 0)
        .single()
        .unwrap();
    Schedule {
        id: id.into(),
        owner: owner.into(),
        name: "merged PRs".into(),
        prompt: "post last week's merged PRs".into(),
        when: When::Cron("0 9 * * MON".into()),
        timezone: "Europe/Berlin".into(),
        catch_up: CatchUp::Latest,
        deliver: Deliver::Here,
        target: Target::Thread,
        thread_id: "t1".into(),
        thread_owner: owner.into(),
        agent_name: None,
        agent_owner: None,
        model_name: None,
        status,
        next_fire: Some(at),
        consecutive_failures: 0,
        last: Some(LastFire {
            slot: at,
            outcome: FireOutcome::Failed,
            at,
            detail: Some("the model did not answer".into()),
        }),
        missed: 2,
        created_at: at,
        updated_at: at,
    }
}

#[test]
fn the_list_is_aligned_with_local_next_fires() {
    let text = print::table(&[
        schedule("0a1b2c3d", "alice", ScheduleStatus::Active),
        schedule("ffee0011", "bob", ScheduleStatus::Paused),
    ]);
    let expected = "\
ID        OWNER  NAME        WHEN              NEXT FIRE                 STATUS  LAST
0a1b2c3d  alice  merged PRs  cron 0 9 * * MON  Mon 2026-12-07 09:00 CET  active  failed: the model did not answer (2 missed)
ffee0011  bob    merged PRs  cron 0 9 * * MON  -                         paused  failed: the model did not answer (2 missed)
";
    assert_eq!(text, expected);
    assert_eq!(print::table(&[]), "No schedules.\n");
}

#[test]
fn list_needs_a_user_or_all_once_tokens_name_several_users() {
    let mut config = AppConfig::default();
    assert_eq!(
        list_user(&config, None, false).unwrap().as_deref(),
        Some("local")
    );
    for user in ["alice", "bob"] {
        config.gateway.api_tokens.push(crate::config::ApiToken {
            token: crate::config::Secret::new(format!("token-{user}")),
            user: user.into(),
        });
    }
    let refused = list_user(&config, None, false).unwrap_err().to_string();
    assert!(
        refused.contains("--user") && refused.contains("--all"),
        "{refused}"
    );
    assert_eq!(list_user(&config, None, true).unwrap(), None);
    assert_eq!(
        list_user(&config, Some("bob".into()), false)
            .unwrap()
            .as_deref(),
        Some("bob")
    );
}

#[test]
fn run_without_a_daemon_says_to_start_it() {
    let text = SchedulesCliError::NeedsDaemon {
        id: "0a1b2c3d".into(),
    }
    .to_string();
    assert!(
        text.contains("antler run") && text.contains("0a1b2c3d"),
        "{text}"
    );
}
