//! A long conversation through the real daemon and the fake model: summarization condenses it,
//! and every request after that still carries today's date and the user's memory, in the
//! system prompt and nowhere in what people wrote (DeerFlow's
//! `_preserve_dynamic_context_reminders`).

use antler_test_support::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::daemon::{Daemon, Setup, TOKEN_A};

const CONFIG: &str = "memory:\n  enabled: true\n\
summarization:\n  enabled: true\n  trigger:\n    - type: messages\n      value: 5\n  keep:\n    type: messages\n    value: 2\n";

async fn turn(daemon: &Daemon, thread: &str, text: &str) {
    let response = daemon
        .post(&format!("/api/threads/{thread}/runs/wait"), TOKEN_A)
        .json(&json!({"input": {"messages": [{"role": "user", "content": text}]}}))
        .send()
        .await
        .expect("run request");
    assert_eq!(response.status(), 200);
    let done: Value = response.json().await.unwrap();
    assert_eq!(done["stop_reason"], "completed", "{done}");
}

/// The system prompt of a request, and what it sends as users' words.
fn system_and_users(request: &Value) -> (String, Vec<String>) {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let text = |m: &Value| m["content"].as_str().unwrap_or_default().to_string();
    let system = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .map(text)
        .collect::<Vec<_>>()
        .join("\n\n");
    let users = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(text)
        .collect();
    (system, users)
}

fn is_summary_request(request: &Value) -> bool {
    system_and_users(request)
        .1
        .first()
        .is_some_and(|text| text.starts_with("<role>\nContext Extraction Assistant"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_summarization_every_request_still_carries_the_date_and_the_memory() {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("Hello Sam."))
        .push(Reply::text("Summary: Sam said hello and asked about tea."))
        .push(Reply::text("Green tea, then."))
        .push(Reply::text("Summary: Sam likes tea and plans a picnic."))
        .push(Reply::text("A picnic on Sunday works."));
    let setup = Setup::new(&fake.base_url(), CONFIG);
    let daemon = setup.start();
    let created = daemon
        .post("/api/memory/facts", TOKEN_A)
        .json(&json!({"content": "Drinks green tea", "category": "preference"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    let thread = daemon.create_thread(TOKEN_A).await;
    for text in [
        "hello",
        "which tea should I bring?",
        "and when shall we go?",
    ] {
        turn(&daemon, &thread, text).await;
    }

    let requests = fake.requests();
    assert_eq!(requests.len(), 5, "two summaries and three answers");
    let summaries: Vec<&Value> = requests.iter().filter(|r| is_summary_request(r)).collect();
    assert_eq!(summaries.len(), 2, "the thread was summarized twice");
    for summary in &summaries {
        let (_, users) = system_and_users(summary);
        assert!(
            !users[0].contains("<current_date>") && !users[0].contains("<memory>"),
            "the date and memory are not summarized: {}",
            users[0]
        );
    }
    let answers: Vec<&Value> = requests.iter().filter(|r| !is_summary_request(r)).collect();
    for (index, request) in answers.iter().enumerate() {
        let (system, users) = system_and_users(request);
        assert_eq!(
            system.matches("<current_date>").count(),
            1,
            "answer {index}: {system}"
        );
        assert!(
            system
                .contains("<memory>\nWhat you remember about the user from earlier conversations")
                && system.contains("Drinks green tea"),
            "answer {index}: {system}"
        );
        assert!(
            system.contains("<memory_note>"),
            "the prompt says what the block is: {system}"
        );
        assert!(
            users
                .iter()
                .all(|u| !u.contains("<memory>") && !u.contains("<current_date>")),
            "answer {index}: memory and date are not a person's words: {users:?}"
        );
    }
    // The last answer's request: the summary of what came before, then the kept end.
    let (_, users) = system_and_users(answers[2]);
    assert!(
        users.iter().any(|u| u.contains("Summary: Sam likes tea")),
        "{users:?}"
    );
    assert_eq!(
        users.last().map(String::as_str),
        Some("and when shall we go?")
    );
    assert_eq!(fake.unscripted_calls(), 0);
}
