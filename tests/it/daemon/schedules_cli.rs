//! `antler schedules …` as the operator: every subcommand through the running daemon's socket,
//! then list/show/pause/remove on the data dir once it stopped, and `run`'s refusal without
//! a daemon.

use std::process::Output;
use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::cli::antler;
use super::{Setup, TOKEN_A, TOKEN_B};

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn ok(config: &std::path::Path, args: &[&str]) -> String {
    let output = antler(config, args, "").await;
    let (out, err) = text(&output);
    assert!(output.status.success(), "{args:?}: {out}\n{err}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_manages_schedules_through_the_daemon_and_on_the_data_dir() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Checked."));
    let setup = Setup::new(&fake.base_url(), "");
    let config = setup.config_path.clone();
    let mut daemon = setup.start();
    let mut ids = Vec::new();
    for (token, name) in [(TOKEN_A, "Weekly PRs"), (TOKEN_B, "Status page")] {
        let created: Value = daemon
            .post("/api/schedules", token)
            .json(&json!({
                "name": name,
                "prompt": "do the thing",
                "when": {"cron": "0 9 * * MON"},
                "timezone": "Europe/Berlin",
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        ids.push(created["schedule"]["id"].as_str().unwrap().to_string());
    }
    let (alices, bobs) = (ids[0].as_str(), ids[1].as_str());

    // With tokens naming two users, `list` needs to be told whose.
    let refused = antler(&config, &["schedules", "list"], "").await;
    assert!(!refused.status.success());
    assert!(text(&refused).1.contains("--all"), "{}", text(&refused).1);
    let all = ok(&config, &["schedules", "list", "--all"]).await;
    assert!(all.starts_with("ID"), "{all}");
    for needle in [
        alices,
        bobs,
        "Weekly PRs",
        "Status page",
        "09:00 CET",
        "active",
    ] {
        assert!(all.contains(needle), "{needle:?} missing from {all}");
    }
    let bob_only = ok(&config, &["schedules", "list", "--user", "bob"]).await;
    assert!(
        bob_only.contains(bobs) && !bob_only.contains(alices),
        "{bob_only}"
    );

    let shown = ok(&config, &["schedules", "show", alices]).await;
    for needle in [
        "name:      Weekly PRs",
        "owner:     alice",
        "cron 0 9 * * MON",
        "next:",
        "fires:     none yet",
    ] {
        assert!(shown.contains(needle), "{needle:?} missing from {shown}");
    }
    let paused = ok(&config, &["schedules", "pause", alices]).await;
    assert_eq!(paused, format!("Paused schedule {alices}.\n"));
    let resumed = ok(&config, &["schedules", "resume", alices]).await;
    assert!(
        resumed.starts_with(&format!("Resumed schedule {alices}; next fire Mon ")),
        "{resumed}"
    );

    let fired = ok(&config, &["schedules", "run", alices]).await;
    assert!(
        fired.contains(&format!("Fired schedule {alices} now")),
        "{fired}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = ok(&config, &["schedules", "show", alices]).await;
        if shown.contains("manual    ran") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the manual fire never ran: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let removed = ok(&config, &["schedules", "remove", bobs]).await;
    assert_eq!(removed, format!("Removed schedule {bobs}.\n"));
    let missing = antler(&config, &["schedules", "show", bobs], "").await;
    assert!(!missing.status.success());
    assert!(
        text(&missing).1.contains(&format!(
            "no schedule {bobs}; `antler schedules list --all`"
        )),
        "{}",
        text(&missing).1
    );

    // The daemon stops; the same commands work on the data dir.
    daemon.signal("TERM");
    assert_eq!(daemon.wait_exit(Duration::from_secs(30)), Some(0));
    let all = ok(&config, &["schedules", "list", "--all"]).await;
    assert!(all.contains(alices) && !all.contains(bobs), "{all}");
    assert!(all.contains("ran"), "the fire's outcome is listed: {all}");
    let shown = ok(&config, &["schedules", "show", alices]).await;
    assert!(shown.contains("manual    ran"), "{shown}");
    let paused = ok(&config, &["schedules", "pause", alices]).await;
    assert_eq!(paused, format!("Paused schedule {alices}.\n"));
    let listed = ok(&config, &["schedules", "list", "--user", "alice"]).await;
    assert!(listed.contains("paused"), "{listed}");
    let run = antler(&config, &["schedules", "run", alices], "").await;
    assert!(!run.status.success());
    assert!(
        text(&run).1.contains("needs the daemon"),
        "{}",
        text(&run).1
    );
    let removed = ok(&config, &["schedules", "remove", alices]).await;
    assert_eq!(removed, format!("Removed schedule {alices}.\n"));
    assert_eq!(
        ok(&config, &["schedules", "list", "--all"]).await,
        "No schedules.\n"
    );
}
