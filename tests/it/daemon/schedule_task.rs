//! Scheduled tasks through the real daemon: a scripted model calls `schedule_task` from a
//! person's words, the tool answers the next three fire times in the person's timezone, and
//! `/schedules` and `/unschedule ID` through `POST /api/commands` show and remove only the
//! caller's own.

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use super::{Daemon, Setup, TOKEN_A, TOKEN_B};

async fn command(daemon: &Daemon, token: &str, text: &str) -> String {
    let answer: Value = daemon
        .post("/api/commands", token)
        .json(&json!({"command": text, "conversation": {}}))
        .send()
        .await
        .expect("command request")
        .json()
        .await
        .expect("command answer");
    answer["reply"].as_str().unwrap_or_default().to_string()
}

/// The id after "Created schedule `" in the tool's answer.
fn created_id(tool_answer: &str) -> String {
    let rest = tool_answer
        .split("Created schedule `")
        .nth(1)
        .unwrap_or_else(|| panic!("no id in {tool_answer}"));
    rest.chars().take_while(|c| *c != '`').collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_schedules_from_words_and_commands_show_and_remove_only_ones_own() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_call(
        "schedule_task",
        json!({
            "action": "create",
            "prompt": "Remind Alice to water the plants",
            "when": {"cron": "0 9 * * MON"},
            "timezone": "Europe/Berlin",
            "name": "plants",
        }),
    ))
    .push(Reply::text("Done: every Monday at 9."));
    let setup = Setup::new(&fake.base_url(), "");
    let daemon = setup.start();
    let thread = daemon.create_thread(TOKEN_A).await;
    let response = daemon
        .run_wait(
            TOKEN_A,
            &thread,
            "remind me every Monday at 9 to water the plants",
        )
        .await;
    assert_eq!(response.status(), 200);

    let recorded = fake.recorded();
    assert!(recorded.len() >= 2, "{} requests", recorded.len());
    let tools: Vec<&str> = recorded[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"schedule_task"), "{tools:?}");
    let tool_answer = recorded[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .and_then(|message| message["content"].as_str())
        .expect("the tool's answer reaches the model")
        .to_string();
    let next_line = tool_answer
        .lines()
        .find(|line| line.starts_with("Next runs: "))
        .unwrap_or_else(|| panic!("{tool_answer}"));
    // Three Mondays at 09:00 Berlin time (CET or CEST, by the season the test runs in).
    let mondays = next_line
        .split("; ")
        .filter(|slot| {
            slot.contains("Mon ") && (slot.contains(" 09:00 CET") || slot.contains(" 09:00 CEST"))
        })
        .count();
    assert_eq!(mondays, 3, "{tool_answer}");
    let id = created_id(&tool_answer);
    assert_eq!(id.len(), 8, "{tool_answer}");

    let alices = command(&daemon, TOKEN_A, "/schedules").await;
    assert!(alices.starts_with("Schedules (1):"), "{alices}");
    assert!(
        alices.contains(&format!(
            "`{id}` plants: cron `0 9 * * MON` (Europe/Berlin), next Mon "
        )),
        "{alices}"
    );
    let bobs = command(&daemon, TOKEN_B, "/schedules").await;
    assert!(bobs.starts_with("No schedules."), "{bobs}");
    let refused = command(&daemon, TOKEN_B, &format!("/unschedule {id}")).await;
    assert!(
        refused.starts_with(&format!("no schedule {id}")),
        "{refused}"
    );
    let removed = command(&daemon, TOKEN_A, &format!("/unschedule {id}")).await;
    assert!(
        removed.starts_with(&format!("Removed schedule `{id}` \"plants\"")),
        "{removed}"
    );
    assert!(
        command(&daemon, TOKEN_A, "/schedules")
            .await
            .starts_with("No schedules.")
    );
}
