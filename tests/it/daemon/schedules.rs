//! `/api/schedules` against the real daemon: two users (each sees and changes only their own;
//! another's id is 404 whatever the method), the limits (`min_interval_seconds`,
//! `max_per_user`), fields that do not fit named in a 400, a run now that runs once, and
//! `scheduler.enabled: false`.

use std::time::{Duration, Instant};

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

const LIMITS: &str = "scheduler:\n  max_per_user: 2\n  min_interval_seconds: 300\n";

async fn create(daemon: &Daemon, token: &str, body: Value) -> reqwest::Response {
    daemon
        .post("/api/schedules", token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn weekly(thread: Option<&str>) -> Value {
    let mut body = json!({
        "name": "Weekly PRs",
        "prompt": "Summarise last week's merged PRs",
        "when": {"cron": "0 9 * * MON"},
        "timezone": "Europe/Berlin",
    });
    if let Some(thread) = thread {
        body["thread_id"] = json!(thread);
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_see_and_change_only_their_own_schedules() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), LIMITS);
    let daemon = setup.start();

    // Without a thread_id the schedule gets a thread of its own, alice's.
    let created = create(&daemon, TOKEN_A, weekly(None)).await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let schedule = &created["schedule"];
    let id = schedule["id"].as_str().unwrap().to_string();
    assert_eq!(schedule["owner"], "alice");
    assert_eq!(schedule["status"], "active");
    let upcoming = created["upcoming"].as_array().unwrap();
    assert_eq!(upcoming.len(), 3, "{created}");
    for slot in upcoming {
        let local = slot["local"].as_str().unwrap();
        assert!(
            local.starts_with("Mon ") && local.contains(" 09:00 "),
            "{slot}"
        );
        assert!(slot["at"].as_str().unwrap().ends_with(":00:00Z"), "{slot}");
    }
    assert_eq!(schedule["next_fire_local"], upcoming[0]["local"]);
    let thread = schedule["thread_id"].as_str().unwrap().to_string();
    let threads = daemon.get_json("/api/threads", TOKEN_A).await;
    assert!(
        threads["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["thread_id"] == thread.as_str())
    );

    // In alice's thread: listed with it; bob cannot use her thread.
    let second = create(&daemon, TOKEN_A, weekly(Some(&thread))).await;
    assert_eq!(second.status(), 201);
    let foreign = create(&daemon, TOKEN_B, weekly(Some(&thread))).await;
    Daemon::expect_error(foreign, 404, "thread_not_found", &[&thread]).await;
    let in_thread = daemon
        .get_json(&format!("/api/schedules?thread_id={thread}"), TOKEN_A)
        .await;
    assert_eq!(in_thread["schedules"].as_array().unwrap().len(), 2);

    // Bob sees none of them, and each of alice's ids is 404 to him, as an unknown id is.
    let bobs = daemon.get_json("/api/schedules", TOKEN_B).await;
    assert_eq!(bobs["schedules"], json!([]));
    let path = format!("/api/schedules/{id}");
    let attempts = [
        daemon.get(&path, TOKEN_B),
        daemon
            .http
            .patch(daemon.url(&path))
            .bearer_auth(TOKEN_B)
            .json(&json!({"status": "paused"})),
        daemon.delete(&path, TOKEN_B),
        daemon.post(&format!("{path}/run"), TOKEN_B),
        daemon.get("/api/schedules/0badc0de", TOKEN_A),
    ];
    for attempt in attempts {
        let response = attempt.send().await.unwrap();
        Daemon::expect_error(response, 404, "schedule_not_found", &["GET /api/schedules"]).await;
    }
    let other = daemon.get_json("/api/schedules?user=alice", TOKEN_B).await;
    assert_eq!(other["error"]["code"], "forbidden");

    // Alice pauses, reads it with its fires, and removes it.
    let paused = daemon
        .http
        .patch(daemon.url(&path))
        .bearer_auth(TOKEN_A)
        .json(&json!({"status": "paused"}))
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 200);
    let paused: Value = paused.json().await.unwrap();
    assert_eq!(paused["schedule"]["status"], "paused");
    assert_eq!(paused["upcoming"], json!([]));
    let shown = daemon.get_json(&path, TOKEN_A).await;
    assert_eq!(shown["schedule"]["status"], "paused");
    assert_eq!(shown["fires"], json!([]));
    let removed = daemon.delete(&path, TOKEN_A).send().await.unwrap();
    assert_eq!(removed.status(), 204);
    let gone = daemon.get(&path, TOKEN_A).send().await.unwrap();
    Daemon::expect_error(gone, 404, "schedule_not_found", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_bad_fields_are_refused_with_the_reason() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), LIMITS);
    let daemon = setup.start();

    let often = create(
        &daemon,
        TOKEN_A,
        json!({"prompt": "check the status page", "when": {"every_seconds": 60}}),
    )
    .await;
    Daemon::expect_error(often, 400, "invalid_schedule", &["300"]).await;
    let cron_often = create(
        &daemon,
        TOKEN_A,
        json!({"prompt": "check the status page", "when": {"cron": "*/1 * * * *"}}),
    )
    .await;
    Daemon::expect_error(cron_often, 400, "invalid_schedule", &["300"]).await;
    let unknown = create(
        &daemon,
        TOKEN_A,
        json!({"prompt": "x", "when": {"every_seconds": 600}, "owner": "bob"}),
    )
    .await;
    Daemon::expect_error(unknown, 400, "invalid_schedule", &["unknown field `owner`"]).await;
    let mistyped = create(
        &daemon,
        TOKEN_A,
        json!({"prompt": "x", "when": {"every_seconds": "often"}}),
    )
    .await;
    Daemon::expect_error(mistyped, 400, "invalid_schedule", &["`when.every_seconds`"]).await;
    let zone = create(
        &daemon,
        TOKEN_A,
        json!({"prompt": "x", "when": {"every_seconds": 600}, "timezone": "Mars/Olympus"}),
    )
    .await;
    Daemon::expect_error(zone, 400, "invalid_schedule", &["Mars/Olympus"]).await;
    // Nothing refused left a thread behind.
    let threads = daemon.get_json("/api/threads", TOKEN_A).await;
    assert_eq!(threads["threads"], json!([]));

    // `max_per_user: 2`: a third is refused; bob has his own two.
    for token in [TOKEN_A, TOKEN_A, TOKEN_B] {
        let made = create(
            &daemon,
            token,
            json!({"prompt": "check", "when": {"every_seconds": 600}}),
        )
        .await;
        assert_eq!(made.status(), 201);
    }
    let third = create(
        &daemon,
        TOKEN_A,
        json!({"prompt": "check", "when": {"every_seconds": 600}}),
    )
    .await;
    Daemon::expect_error(
        third,
        409,
        "too_many_schedules",
        &["scheduler.max_per_user", "DELETE"],
    )
    .await;
    let threads = daemon.get_json("/api/threads", TOKEN_A).await;
    assert_eq!(threads["threads"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_fires_once_and_is_recorded() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Three PRs were merged."));
    let setup = Setup::new(&fake.base_url(), LIMITS);
    let daemon = setup.start();
    let created: Value = create(&daemon, TOKEN_A, weekly(None))
        .await
        .json()
        .await
        .unwrap();
    let id = created["schedule"]["id"].as_str().unwrap().to_string();
    let thread = created["schedule"]["thread_id"]
        .as_str()
        .unwrap()
        .to_string();

    let fired = daemon
        .post(&format!("/api/schedules/{id}/run"), TOKEN_A)
        .send()
        .await
        .unwrap();
    assert_eq!(fired.status(), 202);
    let fired: Value = fired.json().await.unwrap();
    assert_eq!(fired["fire"]["kind"], "manual");
    assert_eq!(fired["fire"]["schedule_id"], id.as_str());

    let deadline = Instant::now() + Duration::from_secs(60);
    let shown = loop {
        let shown = daemon
            .get_json(&format!("/api/schedules/{id}"), TOKEN_A)
            .await;
        if shown["fires"][0]["outcome"].is_string() {
            break shown;
        }
        assert!(Instant::now() < deadline, "the fire never ended: {shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(shown["fires"].as_array().unwrap().len(), 1, "{shown}");
    assert_eq!(shown["fires"][0]["outcome"], "ran", "{shown}");
    assert_eq!(shown["schedule"]["last"]["outcome"], "ran");
    let state = daemon
        .get_json(&format!("/api/threads/{thread}/state"), TOKEN_A)
        .await;
    let answers: Vec<&str> = state["values"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "ai")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(answers, ["Three PRs were merged."]);
    assert_eq!(fake.requests().len(), 1, "one model call for one fire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_scheduler_refuses_creations_and_runs() {
    let fake = FakeOpenAi::start().await;
    let setup = Setup::new(&fake.base_url(), "scheduler:\n  enabled: false\n");
    let daemon = setup.start();
    let refused = create(&daemon, TOKEN_A, weekly(None)).await;
    Daemon::expect_error(
        refused,
        409,
        "scheduler_disabled",
        &["scheduler.enabled: false"],
    )
    .await;
    let run = daemon
        .post("/api/schedules/0badc0de/run", TOKEN_A)
        .send()
        .await
        .unwrap();
    Daemon::expect_error(run, 409, "scheduler_disabled", &[]).await;
    let listed = daemon.get_json("/api/schedules", TOKEN_A).await;
    assert_eq!(listed["schedules"], json!([]));
}
