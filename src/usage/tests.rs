use std::sync::Arc;

use super::*;
use crate::agent_api::CallMeter;
use crate::config::budgets::BudgetLimits;
use crate::model::ModelError;
use antler_store::MemoryStore;
use antler_store::messages::Usage;

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        ..Default::default()
    }
}

/// `gpt` at $1 per million tokens either way.
fn priced_config() -> AppConfig {
    let mut config = AppConfig::default();
    config.pricing.models.insert(
        "gpt".into(),
        ModelPrice {
            input: 1.0,
            output: 1.0,
            cached_input: None,
        },
    );
    config
}

fn account(store: &UsageStore, config: &AppConfig, user: &str, agent: Option<&str>) -> Account {
    Account::new(store.clone(), Arc::new(config.clone()), user, agent, "t1")
}

fn refused(account: &Account) -> Option<String> {
    match account.admit(UsageKind::Lead) {
        Ok(()) => None,
        Err(ModelError::BudgetExceeded { notice }) => Some(notice),
        Err(other) => panic!("unexpected {other}"),
    }
}

#[test]
fn a_daily_cost_limit_stops_the_call_after_the_one_that_reached_it() {
    let store = UsageStore::new(Arc::new(MemoryStore::new()));
    let mut config = priced_config();
    config.budgets.default = Some(BudgetLimits {
        daily_cost: Some(5.0),
        ..Default::default()
    });
    let alice = account(&store, &config, "alice", None);
    // $2 a call: the third call passes the limit; only the fourth is refused.
    for _ in 0..3 {
        assert_eq!(refused(&alice), None);
        alice.record(UsageKind::Lead, "gpt", &usage(1_000_000, 1_000_000), false);
    }
    let notice = refused(&alice).expect("over the daily cost");
    assert_eq!(
        notice,
        "stopped: daily budget of $5.00 reached; resets at 00:00 UTC"
    );
    // Another user is not touched, and the start-of-run check agrees for alice.
    assert_eq!(refused(&account(&store, &config, "bob", None)), None);
    let start = budget_notice(&store, &config, "alice").unwrap().unwrap();
    assert!(start.contains("daily budget ($6.00 of $5.00)"), "{start}");
    let rows = store.rows(Some("alice"), Some(today())).unwrap();
    assert_eq!(rows[0].totals.cost, Some(6.0), "cost stored at record time");
}

#[test]
fn monthly_and_agent_limits_apply_across_days_and_users() {
    let store = UsageStore::new(Arc::new(MemoryStore::new()));
    let mut config = priced_config();
    config.budgets.users.insert(
        "alice".into(),
        BudgetLimits {
            monthly_cost: Some(3.0),
            ..Default::default()
        },
    );
    config
        .budgets
        .agents
        .insert("Researcher".into(), 3_000_000.into());
    let alice = account(&store, &config, "alice", None);
    alice.record(UsageKind::Lead, "gpt", &usage(2_000_000, 1_000_000), false);
    let notice = refused(&alice).expect("over the month");
    assert!(notice.starts_with("stopped: monthly budget of $3.00 reached; resets on "));
    assert!(notice.ends_with("-01 (00:00 UTC)"), "{notice}");

    // The agent's daily tokens count what all its users spent through it.
    let bob = account(&store, &config, "bob", Some("researcher"));
    let carol = account(&store, &config, "carol", Some("Researcher"));
    bob.record(
        UsageKind::Lead,
        "local",
        &usage(1_000_000, 1_000_000),
        false,
    );
    assert_eq!(refused(&carol), None);
    carol.record(UsageKind::Subagent, "local", &usage(1_000_000, 0), false);
    let notice = refused(&bob).expect("the agent's budget is spent");
    assert_eq!(
        notice,
        "stopped: agent researcher's daily budget of 3,000,000 tokens reached; resets at 00:00 UTC"
    );
    // Outside the agent, bob has no limit.
    assert_eq!(refused(&account(&store, &config, "bob", None)), None);
    let text = report(
        &store.rows(None, Some(today())).unwrap(),
        &config.pricing,
        None,
    );
    assert!(text.contains("Unpriced (tokens only"), "{text}");
    assert!(text.contains("local"), "{text}");
    assert!(text.contains("carol local (subagent)"), "{text}");
}

#[test]
fn the_warning_at_80_percent_is_claimed_once_per_period() {
    let store = UsageStore::new(Arc::new(MemoryStore::new()));
    let mut config = priced_config();
    config.budgets.default = Some(BudgetLimits {
        daily_tokens: Some(1000),
        ..Default::default()
    });
    let first = account(&store, &config, "alice", None);
    // A second daemon's account for the same user: the claim is in the store.
    let second = account(&store, &config, "alice", None);
    assert_eq!(
        first.record(UsageKind::Lead, "gpt", &usage(700, 0), true),
        None
    );
    // Not deliverable (a title call): no claim is spent on it.
    assert_eq!(
        first.record(UsageKind::Title, "gpt", &usage(100, 0), false),
        None
    );
    let warning = second
        .record(UsageKind::Lead, "gpt", &usage(10, 0), true)
        .expect("81 % of the daily tokens");
    assert_eq!(
        warning,
        "Budget notice: 81% of the daily budget of 1,000 tokens is used (190 tokens left); it \
         resets at 00:00 UTC."
    );
    assert_eq!(
        first.record(UsageKind::Lead, "gpt", &usage(10, 0), true),
        None
    );
    assert_eq!(
        second.record(UsageKind::Lead, "gpt", &usage(10, 0), true),
        None
    );
}

#[test]
fn usage_text_shows_money_what_is_left_and_the_top_threads() {
    let store = UsageStore::new(Arc::new(MemoryStore::new()));
    let mut config = priced_config();
    config.budgets.default = Some(BudgetLimits {
        daily_cost: Some(5.0),
        daily_tokens: Some(10_000_000),
        monthly_cost: Some(50.0),
    });
    let in_thread =
        |thread: &str| Account::new(store.clone(), Arc::new(config.clone()), "u", None, thread);
    in_thread("t-big").record(UsageKind::Lead, "gpt", &usage(1_000_000, 500_000), false);
    in_thread("t-small").record(UsageKind::Title, "gpt", &usage(100, 0), false);
    let title = |id: &str| (id == "t-big").then(|| "Quarterly plan".to_string());
    let text = usage_text(&store, &config, "u", false, &title).unwrap();
    assert!(
        text.contains("• u gpt: 1,500,000 tokens (1,000,000 in, 500,000 out), 1 call, $1.5000"),
        "{text}"
    );
    assert!(text.contains("• u gpt (title): 100 tokens"), "{text}");
    assert!(
        text.contains("Daily budget: $5.00, $3.50 left (resets at 00:00 UTC)."),
        "{text}"
    );
    assert!(
        text.contains("Daily budget: 10,000,000 tokens, 8,499,900 tokens left"),
        "{text}"
    );
    assert!(
        text.contains("Monthly budget: $50.00, $48.50 left (resets on "),
        "{text}"
    );
    let big = text
        .find("Quarterly plan: 1,500,000 tokens, $1.5000")
        .expect(&text);
    let small = text.find("t-small: 100 tokens").expect(&text);
    assert!(big < small, "most spent first: {text}");
    let json = report_json(&store.rows(None, Some(today())).unwrap(), &config, 1);
    assert_eq!(json["currency"], "USD");
    assert_eq!(json["kinds"]["title"]["total_tokens"], 100);
    assert_eq!(json["rows"][0]["kind"], "lead");
    assert_eq!(json["rows"][0]["runs"], 1, "the old field stays");
}

#[test]
fn transcribed_seconds_add_up_per_model_and_show_in_the_report() {
    let usage_store = UsageStore::new(Arc::new(MemoryStore::new()));
    let day = today();
    assert!(usage_store.record_audio("u", day, "whisper-1", 42).unwrap());
    assert!(
        !usage_store
            .record_audio("u", day, "whisper-1", 700)
            .unwrap()
    );
    let rows = usage_store.rows(Some("u"), Some(day)).unwrap();
    let whisper = rows.iter().find(|r| r.model == "whisper-1").unwrap();
    assert_eq!(whisper.totals.audio_seconds, 742);
    assert_eq!(whisper.kind, UsageKind::Transcription);
    let text = report(&rows, &PricingConfig::default(), Some(day));
    assert!(
        text.contains("• u whisper-1 (transcription): 12 min 22 s of audio transcribed"),
        "{text}"
    );
    // Records written before the field existed read as no audio.
    let old: UsageTotals =
        serde_json::from_str(r#"{"input_tokens":1,"output_tokens":1,"total_tokens":2,"runs":1}"#)
            .unwrap();
    assert_eq!((old.audio_seconds, old.calls), (0, 1));
}
