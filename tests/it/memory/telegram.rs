//! `/memory`, `/memory facts`, `/forget <id>`, `/memory history` and `/memory revert <n>` through
//! Telegram against the fake Bot API, with the memory update written by the scripted model after
//! the debounce.

use antler_test_support::{FakeOpenAi, FakeTelegram, Reply, private_chat};

use crate::channels::{Bot, WAIT, config_yaml};

const CHAT: i64 = 71;

async fn bot() -> (FakeTelegram, FakeOpenAi, tempfile::TempDir, Bot) {
    let fake = FakeTelegram::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = format!(
        "{}memory:\n  enabled: true\n  debounce_seconds: 1\n",
        config_yaml(dir.path(), &fake, &model, "")
    );
    let bot = Bot::start(&yaml).await;
    model.script_memory_updates();
    (fake, model, dir, bot)
}

/// Sends `text` and returns the first reply starting with `prefix` that was not there before.
async fn ask(fake: &FakeTelegram, text: &str, prefix: &'static str) -> String {
    let before = fake.chat_texts(CHAT).len();
    fake.send_text(private_chat(CHAT), CHAT, text);
    fake.wait_for(WAIT, prefix, |f| {
        f.chat_texts(CHAT)[before.min(f.chat_texts(CHAT).len())..]
            .iter()
            .any(|t| t.starts_with(prefix))
    })
    .await;
    fake.chat_texts(CHAT)[before..]
        .iter()
        .find(|t| t.starts_with(prefix))
        .cloned()
        .unwrap_or_default()
}

fn update(facts: &[(&str, &str, f64)]) -> Reply {
    let facts: Vec<serde_json::Value> = facts
        .iter()
        .map(|(content, category, confidence)| {
            serde_json::json!({"content": content, "category": category, "confidence": confidence})
        })
        .collect();
    Reply::text(serde_json::json!({ "newFacts": facts }).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_commands_show_and_forget_facts_and_forgotten_facts_stay_gone() {
    let (fake, model, _dir, bot) = bot().await;
    assert_eq!(
        ask(&fake, "/memory", "I don't remember").await,
        "I don't remember anything about you yet."
    );

    model.push(Reply::text("Hello Sam!"));
    model.push(update(&[
        ("Is called Sam", "context", 0.95),
        ("Loves green tea", "preference", 0.9),
    ]));
    ask(&fake, "I'm Sam and I love green tea", "Hello Sam!").await;
    fake.wait_for(WAIT, "the memory update", |_| model.requests().len() == 2)
        .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let summary = ask(&fake, "/memory", "").await;
        if summary.contains("Facts: 2.") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the update never applied: {summary}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let facts = ask(&fake, "/memory facts", "Facts (2):").await;
    let tea_line = facts
        .lines()
        .find(|l| l.ends_with("[preference] Loves green tea"))
        .unwrap_or_else(|| panic!("{facts}"));
    let id = tea_line
        .trim_start_matches("• ")
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert!(id.starts_with("fact_"), "{facts}");
    assert_eq!(
        ask(&fake, &format!("/forget {id}"), "Forgot").await,
        format!("Forgot {id}.")
    );
    let after = ask(&fake, "/memory facts", "Facts (1):").await;
    assert!(!after.contains("green tea"), "{after}");

    // The model proposes the deleted fact again from the same conversation, with a new one: the
    // new one shows that the update was applied, and the deleted one is not re-added.
    model.push(Reply::text("Tea it is."));
    model.push(update(&[
        ("loves GREEN tea", "preference", 0.99),
        ("Takes the train to work", "context", 0.9),
    ]));
    ask(&fake, "Green tea again please", "Tea it is.").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let still = loop {
        let facts = ask(&fake, "/memory facts", "Facts (").await;
        if facts.contains("Takes the train to work") {
            break facts;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second update never applied: {facts}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        still.starts_with("Facts (2):") && !still.to_lowercase().contains("green tea"),
        "{still}"
    );

    // A new thread starts with the remembered facts in its first model call.
    ask(&fake, "/new", "New conversation started.").await;
    model.push(Reply::text("Welcome back."));
    model.push(update(&[]));
    ask(&fake, "hello", "Welcome back.").await;
    let request = model.requests()[4].to_string();
    assert!(request.contains("<memory>"), "{request}");
    assert!(request.contains("Is called Sam"));
    assert!(request.contains("Takes the train to work"));
    assert!(!request.to_lowercase().contains("green tea"));

    // Each change is a version: the updater's (with its thread) and the /forget; the updates
    // that changed nothing are none. A revert brings the forgotten fact back, as a new version.
    let history = ask(&fake, "/memory history", "Memory versions").await;
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines[1].starts_with("• 3 ·")
            && lines[1].contains("learned from thread ")
            && lines[1].ends_with(": +1 fact"),
        "{history}"
    );
    assert!(
        lines[2].starts_with("• 2 ·") && lines[2].ends_with(&format!("chat /forget {id}: −1 fact")),
        "{history}"
    );
    assert!(
        lines[3].starts_with("• 1 ·")
            && lines[3].contains("learned from thread ")
            && lines[3].ends_with(": +2 facts"),
        "{history}"
    );
    assert_eq!(lines.len(), 5, "{history}");
    assert_eq!(
        ask(&fake, "/memory revert 1", "Memory restored").await,
        "Memory restored to version 1 (saved as version 4; /memory revert 3 undoes this). Facts: 2."
    );
    let back = ask(&fake, "/memory facts", "Facts (2):").await;
    assert!(back.contains("[preference] Loves green tea"), "{back}");
    let history = ask(&fake, "/memory history", "Memory versions").await;
    assert!(
        history.contains("• 4 · ")
            && history.contains("chat /memory revert 1 (back to version 1): +1 fact, −1 fact"),
        "{history}"
    );
    bot.stop().await;
}
