//! One story per platform (through its [`ChannelDriver`]): in a group conversation no person's
//! memory, agent or budget is used for another person's turn. Ann and Bob each have a memory
//! and an agent called `helper` (every chat's default agent here); Ann has a small daily
//! budget. In the group, each turn gets its speaker's agent and memory only, the memory learnt
//! from it is filed under its speaker, and Ann's spent budget stops Ann alone.

use std::path::Path;

use antler::custom_agents::config::AgentConfig;
use antler::custom_agents::store::AgentStore;
use antler_test_support::{FakeOpenAi, Reply};
use serde_json::Value;

use super::conformance::{ChannelDriver, USERS};
use super::group_support::{memory_update, request_mentions, usage_by_user};
use super::{Bot, WAIT, daemon_yaml};

const GROUP: u32 = 60;
const ANN_SOUL: &str = "You are Ann's helper, fond of tea.";
const BOB_SOUL: &str = "You are Bob's helper, fond of dogs.";
const BUDGET_NOTICE: &str = "You have used your daily token budget";

pub(crate) async fn story(driver: &dyn ChannelDriver, model: &FakeOpenAi, dir: &Path) {
    let (ann, bob) = (USERS[0], USERS[1]);
    let (ann_id, bob_id) = (driver.antler_user(ann), driver.antler_user(bob));
    let agents = AgentStore::new(dir.join("data"));
    for (user, soul) in [(&ann_id, ANN_SOUL), (&bob_id, BOB_SOUL)] {
        let config = AgentConfig {
            name: "helper".into(),
            ..Default::default()
        };
        agents
            .create(user, "helper", &config, soul)
            .expect("an agent");
    }
    let section = format!(
        "{}  session:\n    agent: helper\n",
        driver.section_yaml(&[ann, bob], &[GROUP])
    );
    let yaml = format!(
        "{}memory:\n  enabled: true\n  debounce_seconds: 1\n  inject_in_groups: true\n\
         budgets:\n  users:\n    {ann_id}: 300\n",
        daemon_yaml(dir, model, &section)
    );
    let bot = Bot::start(&yaml).await;
    driver.daemon_started(bot.addr);
    model.script_memory_updates();

    // Each tells the bot something in private: their own memory.
    let said = turn(
        model,
        0,
        Reply::text("Noted, Ann."),
        &[("Drinks green tea", "preference")],
        || driver.user_says(ann, "I drink green tea"),
    )
    .await;
    dm_answered(driver, ann, "Noted, Ann.").await;
    assert!(
        request_mentions(&said[0], ANN_SOUL),
        "a DM runs Ann's helper"
    );
    turn(
        model,
        2,
        Reply::text("Noted, Bob."),
        &[("Has a dog named Rex", "context")],
        || driver.user_says(bob, "my dog is Rex"),
    )
    .await;
    dm_answered(driver, bob, "Noted, Bob.").await;

    // Ann's turn in the group: her agent, her memory, nothing of Bob's. It spends her budget
    // (300 tokens; this answer costs 500), so the memory update after it is not made: every
    // model call is checked against the budget of whom it is for.
    let said = answer_only(
        model,
        4,
        Reply::text("I remember your tea.").usage(400, 100),
        || driver.user_says_in_group(GROUP, ann, "what do you know about me?", true),
    )
    .await;
    group_answered(driver, "I remember your tea.").await;
    let ann_turn = &said[0];
    assert!(
        system_prompt(ann_turn).contains("<participants>"),
        "several people speak here"
    );
    assert!(request_mentions(ann_turn, ANN_SOUL) && !request_mentions(ann_turn, BOB_SOUL));
    assert!(request_mentions(ann_turn, "green tea") && !request_mentions(ann_turn, "Rex"));

    // Bob's turn: his agent and memory; what he says is learnt for him.
    let said = turn(
        model,
        5,
        Reply::text("You have a dog."),
        &[("Has a cat named Tom", "context")],
        || {
            driver.user_says_in_group(
                GROUP,
                bob,
                "and what do you remember about me? my cat is Tom",
                true,
            )
        },
    )
    .await;
    group_answered(driver, "You have a dog.").await;
    let (bob_turn, bobs_update) = (&said[0], &said[1]);
    assert!(request_mentions(bob_turn, BOB_SOUL) && !request_mentions(bob_turn, ANN_SOUL));
    assert!(
        request_mentions(bob_turn, "Rex"),
        "Bob's memory in Bob's turn"
    );
    assert!(
        !request_mentions(bob_turn, "green tea"),
        "nothing of Ann's memory"
    );
    assert!(request_mentions(bobs_update, "my cat is Tom"));
    assert!(
        !request_mentions(bobs_update, "what do you know about me?")
            && !request_mentions(bobs_update, "green tea"),
        "Bob's memory learns from Bob's words only"
    );

    // Ann is past her budget: her next turn is refused, Bob's goes on.
    driver.user_says_in_group(GROUP, ann, "one more thing", true);
    wait_for(driver, "Ann's budget notice", |texts| {
        texts.iter().any(|t| t.starts_with(BUDGET_NOTICE))
    })
    .await;
    turn(model, 7, Reply::text("Still here, Bob."), &[], || {
        driver.user_says_in_group(GROUP, bob, "still there?", true)
    })
    .await;
    group_answered(driver, "Still here, Bob.").await;

    // What each one's memory holds now, as they see it.
    driver.user_says(ann, "/memory facts");
    let ann_facts = dm_reply(driver, ann, 2).await;
    assert!(ann_facts.contains("green tea"), "{ann_facts}");
    assert!(
        !ann_facts.contains("Tom") && !ann_facts.contains("Rex"),
        "{ann_facts}"
    );
    driver.user_says(bob, "/memory facts");
    let bob_facts = dm_reply(driver, bob, 2).await;
    assert!(
        bob_facts.contains("Tom") && bob_facts.contains("Rex"),
        "{bob_facts}"
    );
    assert!(!bob_facts.contains("green tea"), "{bob_facts}");

    let usage = usage_by_user(bot.addr).await;
    assert_eq!(usage.get(&ann_id), Some(&2), "{usage:?}");
    assert_eq!(usage.get(&bob_id), Some(&3), "{usage:?}");
    assert_eq!(model.unscripted_calls(), 0);
    bot.stop().await;
}

/// Scripts an answer and the memory update after it, does `say`, and returns the two requests
/// (the turn's and the update's) once the model had them: requests `seen` and `seen + 1`.
async fn turn(
    model: &FakeOpenAi,
    seen: usize,
    answer: Reply,
    facts: &[(&str, &str)],
    say: impl FnOnce(),
) -> Vec<Value> {
    model.push(answer);
    model.push(memory_update(facts));
    say();
    requests_from(model, seen, 2).await
}

/// Scripts an answer alone (no memory update follows it), does `say`, and returns request
/// `seen` once the model had it.
async fn answer_only(
    model: &FakeOpenAi,
    seen: usize,
    answer: Reply,
    say: impl FnOnce(),
) -> Vec<Value> {
    model.push(answer);
    say();
    requests_from(model, seen, 1).await
}

/// Requests `seen..seen + count`, once the model had them (polled until [`WAIT`] passes).
async fn requests_from(model: &FakeOpenAi, seen: usize, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while model.requests().len() < seen + count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the model never got requests {seen}..{}",
            seen + count
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    model.requests()[seen..seen + count].to_vec()
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn wait_for(driver: &dyn ChannelDriver, what: &str, check: impl Fn(&[String]) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check(&driver.group_texts(GROUP)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; the group saw {:?}",
            driver.group_texts(GROUP)
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn group_answered(driver: &dyn ChannelDriver, text: &str) {
    wait_for(driver, text, |texts| texts.iter().any(|t| t == text)).await;
}

async fn dm_answered(driver: &dyn ChannelDriver, user: u32, text: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !driver.bot_texts(user).iter().any(|t| t == text) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {text:?} for {user}: {:?}",
            driver.bot_texts(user)
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The bot's `n`th text in the direct chat with `user`, once it is final (not the status).
async fn dm_reply(driver: &dyn ChannelDriver, user: u32, n: usize) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let texts = driver.bot_texts(user);
        if let Some(text) = texts.get(n - 1).filter(|t| !t.starts_with("Working")) {
            return text.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reply {n} to {user}: {texts:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
