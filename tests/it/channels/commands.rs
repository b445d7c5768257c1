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
            t.contains("telegram-64 fake: 120 tokens (100 in, 20 out), 1 call, $0.1000")
                && t.contains("Daily budget: 100 tokens, 0 tokens left")
        })
    })
    .await;
    bot.stop().await;
}

/// The system prompt and the tool names of a model request.
fn prompt_and_tools(request: &serde_json::Value) -> (String, Vec<String>) {
    let prompt = request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let tools = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    (prompt, tools)
}

/// `/bootstrap NAME what it is for` in a chat: the model is told the name and the purpose, the
/// interview goes on over the next messages, and once `setup_agent` created the agent the chat
/// talks to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_names_the_agent_and_the_chat_goes_on_with_it() {
    let (fake, model, _dir, bot) = setup_bot("    admins: [\"63\"]\n").await;
    let has = |text: &'static str| {
        move |f: &antler_test_support::FakeTelegram| f.chat_texts(63).iter().any(|t| t == text)
    };
    fake.send_text(private_chat(63), 63, "/bootstrap sous_chef");
    fake.wait_for(WAIT, "a bad name refused", |f| {
        f.chat_texts(63)
            .iter()
            .any(|t| t.starts_with("\"sous_chef\" cannot be an agent's name"))
    })
    .await;

    model.push(Reply::text("Which language shall we use?"));
    fake.send_text(
        private_chat(63),
        63,
        "/bootstrap Chef plans our weekly meals",
    );
    fake.wait_for(
        WAIT,
        "the first question",
        has("Which language shall we use?"),
    )
    .await;
    model
        .push(Reply::tool_call(
            "setup_agent",
            serde_json::json!({"soul": "**Identity**\nChef.\n", "description": "Plans meals"}),
        ))
        .push(Reply::text("Chef is ready."));
    fake.send_text(private_chat(63), 63, "English, and keep it simple");
    fake.wait_for(WAIT, "the agent created", has("Chef is ready."))
        .await;
    fake.send_text(private_chat(63), 63, "/status");
    fake.wait_for(WAIT, "status", |f| {
        f.chat_texts(63).iter().any(|t| t.contains("Agent: chef\n"))
    })
    .await;
    model.push(Reply::text("Hello, I am Chef."));
    fake.send_text(private_chat(63), 63, "hello");
    fake.wait_for(WAIT, "the new agent answers", has("Hello, I am Chef."))
        .await;

    let requests = model.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let (prompt, tools) = prompt_and_tools(&requests[0]);
    assert!(
        prompt.contains("This conversation sets up a new agent named \"chef\". The name is fixed"),
        "{prompt}"
    );
    assert!(tools.contains(&"setup_agent".to_string()), "{tools:?}");
    let opening = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    assert_eq!(
        opening,
        "Set up a new agent named chef. What it is for: plans our weekly meals"
    );
    // The answer to the first question is still the bootstrap's.
    let (prompt, tools) = prompt_and_tools(&requests[1]);
    assert!(prompt.contains("<bootstrap>") && tools.contains(&"setup_agent".to_string()));
    // Then the chat talks to the new agent.
    let (prompt, tools) = prompt_and_tools(&requests[3]);
    assert!(
        prompt.contains("You are chef,") && prompt.contains("<soul>"),
        "{prompt}"
    );
    assert!(!prompt.contains("<bootstrap>"), "{prompt}");
    assert!(tools.contains(&"update_agent".to_string()), "{tools:?}");
    bot.stop().await;
}
