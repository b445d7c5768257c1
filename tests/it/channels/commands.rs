//! Chat commands end to end: per-chat model, plan mode, cancel, help, agents.

use antler_test_support::{Gate, Reply, private_chat};

use super::{WAIT, telegram::setup_bot};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_and_plan_settings_apply_to_the_next_turns() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    let has = |text: &'static str| {
        move |f: &antler_test_support::FakeTelegram| f.chat_texts(61).iter().any(|t| t == text)
    };
    fake.send_text(private_chat(61), 61, "/models");
    fake.wait_for(WAIT, "models", |f| {
        f.chat_texts(61)
            .iter()
            .any(|t| t == "Available models:\n• fake (default)\n• other")
    })
    .await;
    fake.send_text(private_chat(61), 61, "/model nope");
    fake.wait_for(WAIT, "unknown model", |f| {
        f.chat_texts(61)
            .iter()
            .any(|t| t.starts_with("Unknown model nope"))
    })
    .await;
    fake.send_text(private_chat(61), 61, "/model other");
    fake.wait_for(WAIT, "model set", has("This chat now uses other."))
        .await;
    fake.send_text(private_chat(61), 61, "/plan on");
    fake.wait_for(WAIT, "plan on", has("Plan mode on.")).await;
    model.push(Reply::text("planned answer"));
    fake.send_text(private_chat(61), 61, "do it");
    fake.wait_for(WAIT, "answer", has("planned answer")).await;
    let request = model.requests().pop().expect("request");
    assert_eq!(
        request["model"], "other-model",
        "the chat's model override is used"
    );
    assert!(
        request.to_string().contains("write_todos"),
        "plan mode adds the todo tool"
    );
    fake.send_text(private_chat(61), 61, "/status");
    fake.wait_for(WAIT, "status", |f| {
        f.chat_texts(61)
            .iter()
            .any(|t| t.contains("Model: other") && t.contains("Plan mode: on"))
    })
    .await;
    fake.send_text(private_chat(61), 61, "/agent");
    fake.wait_for(WAIT, "agents", |f| {
        f.chat_texts(61)
            .iter()
            .any(|t| t.starts_with("You have no agents yet"))
    })
    .await;
    fake.send_text(private_chat(61), 61, "/bootstrap");
    fake.wait_for(WAIT, "bootstrap refused", |f| {
        f.chat_texts(61)
            .iter()
            .any(|t| t.starts_with("Sorry, only admins may bootstrap"))
    })
    .await;
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_running_turn_at_once() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    // A model that never finishes on its own: only the cancel can end this turn.
    let never = Gate::new();
    model.push(Reply::chunks(["partial", " never", " ends"]).hold_after(1, &never));
    fake.send_text(private_chat(62), 62, "long task");
    fake.wait_for(WAIT, "model called", |_| !model.requests().is_empty())
        .await;
    fake.send_text(private_chat(62), 62, "/cancel");
    fake.wait_for(WAIT, "cancel reply", |f| {
        f.chat_texts(62).iter().any(|t| t == "Cancelled.")
    })
    .await;
    // The status message ends as "Cancelled." too, instead of hanging on "Working on it…".
    fake.wait_for(WAIT, "status settled", |f| {
        !f.chat_texts(62)
            .iter()
            .any(|t| t.starts_with("Working on it"))
    })
    .await;
    fake.send_text(private_chat(62), 62, "/cancel");
    fake.wait_for(WAIT, "nothing to cancel", |f| {
        f.chat_texts(62)
            .iter()
            .any(|t| t == "Nothing is running in this chat.")
    })
    .await;
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_daily_budget_gets_a_notice_and_no_model_call() {
    let fake = antler_test_support::FakeTelegram::start().await;
    let model = antler_test_support::FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = super::config_yaml(dir.path(), &fake, &model, "");
    let bot = super::Bot::start(&format!(
        "{yaml}\nbudgets:\n  default_daily_tokens: 100\npricing:\n  fake:\n    input_per_million: 1000\n"
    ))
    .await;
    model.push(Reply::text("the expensive answer").usage(100, 20));
    fake.send_text(private_chat(64), 64, "hello");
    fake.wait_for(WAIT, "answer", |f| {
        f.chat_texts(64).iter().any(|t| t == "the expensive answer")
    })
    .await;
    fake.send_text(private_chat(64), 64, "and again");
    fake.wait_for(WAIT, "budget notice", |f| {
        f.chat_texts(64)
            .iter()
            .any(|t| t.starts_with("You have used your daily token budget (120 of 100 tokens)"))
    })
    .await;
    assert_eq!(
        model.requests().len(),
        1,
        "no model call once the budget is spent"
    );
    fake.send_text(private_chat(64), 64, "/usage");
    fake.wait_for(WAIT, "usage", |f| {
        f.chat_texts(64).iter().any(|t| {
            t.contains("telegram-64 fake: 120 tokens (100 in, 20 out), 1 runs, $0.1000")
                && t.contains("Daily budget: 100 tokens, 0 left")
        })
    })
    .await;
    bot.stop().await;
}
