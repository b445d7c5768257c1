//! Token usage per user and model, and the per-user daily budgets built on it.
//!
//! The harness meters every run ([`RunMeter`]: the usage of each AI message, by model) and
//! stores it once when the run ends ([`UsageStore`]); before starting a run it asks
//! [`budget_notice`] whether the user still has budget today, and refuses the run (no model
//! call) with that notice when not. `/usage` and `antler usage` print [`report`].

pub mod kind;
pub mod store;

use std::collections::BTreeMap;

use chrono::{NaiveDate, Utc};

use crate::agent_api::RunEvent;
use crate::agent_api::shared::group_thousands;
use crate::config::AppConfig;
use antler_store::StoreError;
use antler_store::messages::{Message, Usage};

pub use crate::config::budgets::{BudgetsConfig, ModelPrice, PricingConfig};
pub use kind::UsageKind;
pub use store::{UsageRow, UsageStore, UsageTotals, today};

/// The usage of one run, by model, from its events.
#[derive(Debug, Default)]
pub struct RunMeter {
    by_model: BTreeMap<String, Usage>,
}

impl RunMeter {
    /// Counts an AI message's usage under the model that wrote it (`fallback_model` when the
    /// provider did not say).
    /// Summary calls count too (their `Summarized` event), and so do sub-agents (their end).
    pub fn observe(&mut self, event: &RunEvent, fallback_model: &str) {
        let (model, usage) = match event {
            RunEvent::Message {
                message: Message::Ai(ai),
            } => match ai.usage {
                Some(usage) => (ai.model.as_deref().unwrap_or(fallback_model), usage),
                None => return,
            },
            RunEvent::Summarized { model, usage } => (model.as_str(), *usage),
            // Work done on the run's behalf (a sub-agent's end) reports its tokens by model.
            RunEvent::TaskEnded(end) => {
                for (model, usage) in &end.usage_by_model {
                    self.by_model.entry(model.clone()).or_default().add(usage);
                }
                return;
            }
            _ => return,
        };
        self.by_model
            .entry(model.to_string())
            .or_default()
            .add(&usage);
    }

    /// Adds the run's usage to `user_id`'s totals for today; a failure is logged (the run's
    /// answer stands) and the usage of this run is lost.
    pub fn save(self, usage: &UsageStore, user_id: &str) {
        let day = today();
        let mut new_day = false;
        for (model, used) in self.by_model {
            crate::metrics::model_tokens(&model, used.input_tokens, used.output_tokens);
            match usage.record(user_id, day, &model, &used) {
                Ok(created) => new_day |= created,
                Err(error) => {
                    tracing::warn!(%error, user_id, model, "Could not record the run's token usage")
                }
            }
        }
        // Once a day per user: what no report can ask for any more goes.
        let oldest = day.checked_sub_days(chrono::Days::new(MAX_DAYS));
        if new_day
            && let Some(oldest) = oldest
            && let Err(error) = usage.prune(Some(user_id), oldest)
        {
            tracing::warn!(%error, user_id, "Could not drop old token usage records");
        }
    }
}

/// The notice a user over today's budget gets instead of a run; `None` while within it.
pub fn budget_notice(
    usage: &UsageStore,
    config: &AppConfig,
    user_id: &str,
) -> Result<Option<String>, StoreError> {
    let Some(budget) = config.budgets.daily_tokens_for(user_id) else {
        return Ok(None);
    };
    let used = usage.tokens_on(user_id, today())?;
    if used < budget {
        return Ok(None);
    }
    let now = Utc::now();
    let reset = now
        .date_naive()
        .succ_opt()
        .and_then(|d| d.and_hms_opt(0, 0, 0));
    let wait = reset
        .map(|reset| reset.and_utc() - now)
        .map(|left| {
            format!(
                " (in {}h {:02}m)",
                left.num_hours(),
                left.num_minutes() % 60
            )
        })
        .unwrap_or_default();
    Ok(Some(format!(
        "You have used your daily token budget ({} of {} tokens). New requests are paused until \
         it resets at 00:00 UTC{wait}; ask an admin to raise `budgets` if you need more today.",
        group_thousands(used),
        group_thousands(budget),
    )))
}

/// What `/usage` answers: today's usage of everyone for an admin; for anyone else their own,
/// with what is left of their budget.
pub fn usage_text(
    usage: &UsageStore,
    config: &AppConfig,
    user_id: &str,
    admin: bool,
) -> Result<String, StoreError> {
    let day = today();
    let rows = usage.rows((!admin).then_some(user_id), Some(day))?;
    let mut text = report(&rows, &config.pricing, Some(day));
    if !admin && let Some(budget) = config.budgets.daily_tokens_for(user_id) {
        let used: u64 = rows.iter().map(|r| r.totals.total_tokens).sum();
        text.push_str(&format!(
            "\nDaily budget: {} tokens, {} left (resets 00:00 UTC).",
            group_thousands(budget),
            group_thousands(budget.saturating_sub(used)),
        ));
    }
    Ok(text)
}

/// The longest window a usage report covers (days).
pub const MAX_DAYS: u64 = 366;

/// The rows of the last `days` days (today included) of one user, or of everyone.
pub fn window_rows(
    usage: &UsageStore,
    user_id: Option<&str>,
    days: u64,
) -> Result<Vec<UsageRow>, StoreError> {
    let today = today();
    let since = today
        .checked_sub_days(chrono::Days::new(days.saturating_sub(1)))
        .unwrap_or(today);
    let single = (days <= 1).then_some(today);
    let mut rows = usage.rows(user_id, single)?;
    rows.retain(|row| row.day >= since);
    Ok(rows)
}

/// A plain-text table of `rows` (one line per user and model, costs from `pricing` where the
/// model has a price), with a total line.
pub fn report(rows: &[UsageRow], pricing: &PricingConfig, day: Option<NaiveDate>) -> String {
    let window = day.map_or("all kept days".to_string(), |d| d.to_string());
    if rows.is_empty() {
        return format!("No token usage recorded ({window}).");
    }
    let mut lines = vec![format!("Token usage ({window}):")];
    let (mut tokens, mut cost) = (0u64, 0f64);
    for row in rows {
        let price = pricing
            .get(&row.model)
            .map(|p| p.cost(row.totals.input_tokens, row.totals.output_tokens));
        tokens += row.totals.total_tokens;
        cost += price.unwrap_or(0.0);
        let day = if day.is_none() {
            format!("{} ", row.day)
        } else {
            String::new()
        };
        // A transcription model's row has seconds and no tokens.
        let audio = row.totals.audio_seconds;
        if row.totals.runs == 0 && row.totals.total_tokens == 0 && audio > 0 {
            lines.push(format!(
                "• {day}{} {}: {} of audio transcribed",
                row.user_id,
                row.model,
                audio_length(audio)
            ));
            continue;
        }
        lines.push(format!(
            "• {day}{} {}: {} tokens ({} in, {} out), {} runs{}{}",
            row.user_id,
            row.model,
            group_thousands(row.totals.total_tokens),
            group_thousands(row.totals.input_tokens),
            group_thousands(row.totals.output_tokens),
            row.totals.runs,
            price.map(|c| format!(", ${c:.4}")).unwrap_or_default(),
            if audio > 0 {
                format!(", {} of audio transcribed", audio_length(audio))
            } else {
                String::new()
            },
        ));
    }
    let priced = rows.iter().any(|r| pricing.contains_key(&r.model));
    lines.push(format!(
        "Total: {} tokens{}",
        group_thousands(tokens),
        if priced {
            format!(", ${cost:.4}")
        } else {
            String::new()
        }
    ));
    lines.join("\n")
}

/// `42 s`, `12 min 5 s`: how long the audio a report counts was.
fn audio_length(seconds: u64) -> String {
    match (seconds / 60, seconds % 60) {
        (0, rest) => format!("{rest} s"),
        (minutes, 0) => format!("{minutes} min"),
        (minutes, rest) => format!("{minutes} min {rest} s"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use antler_store::MemoryStore;
    use antler_store::messages::{AiMessage, Text};

    fn ai(model: Option<&str>, total: u64) -> RunEvent {
        RunEvent::Message {
            message: Message::Ai(AiMessage {
                model: model.map(Text::from),
                usage: Some(Usage {
                    input_tokens: total - 1,
                    output_tokens: 1,
                    total_tokens: total,
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_user_over_budget_gets_a_notice_and_others_do_not() {
        let usage = UsageStore::new(Arc::new(MemoryStore::new()));
        let mut config = AppConfig::default();
        assert_eq!(budget_notice(&usage, &config, "u").unwrap(), None);
        config.budgets.default_daily_tokens = Some(100);
        config.budgets.users.insert("vip".into(), 1000);
        let mut meter = RunMeter::default();
        meter.observe(&ai(Some("gpt"), 60), "main");
        meter.observe(&ai(None, 30), "main");
        meter.observe(
            &RunEvent::Summarized {
                model: "main".into(),
                usage: Usage {
                    input_tokens: 9,
                    output_tokens: 1,
                    total_tokens: 10,
                },
            },
            "main",
        );
        meter.save(&usage, "u");
        meter = RunMeter::default();
        meter.observe(&ai(None, 100), "main");
        meter.save(&usage, "vip");
        let notice = budget_notice(&usage, &config, "u").unwrap().unwrap();
        assert!(notice.contains("100 of 100 tokens"), "{notice}");
        assert!(notice.contains("00:00 UTC"), "{notice}");
        assert_eq!(budget_notice(&usage, &config, "vip").unwrap(), None);
        let rows = usage.rows(Some("u"), Some(today())).unwrap();
        let models: Vec<&str> = rows.iter().map(|r| r.model.as_str()).collect();
        assert_eq!(models, ["gpt", "main"]);
    }

    /// A sub-agent's tokens count for the user of the run that delegated, under each model.
    #[test]
    fn a_sub_agents_end_is_metered_by_model() {
        let usage = UsageStore::new(Arc::new(MemoryStore::new()));
        let spent = |total| Usage {
            input_tokens: total - 1,
            output_tokens: 1,
            total_tokens: total,
        };
        let end = crate::agent_api::TaskEnd {
            task_id: "call_1".into(),
            subagent_type: "general-purpose".into(),
            status: crate::agent_api::TaskStatus::Completed,
            stop_reason: None,
            model: Some("small".into()),
            token_usage: spent(50),
            usage_by_model: BTreeMap::from([
                ("small".to_string(), spent(20)),
                ("main".to_string(), spent(30)),
            ]),
            result: Some("done".into()),
            error: None,
        };
        let mut meter = RunMeter::default();
        meter.observe(&ai(None, 5), "main");
        meter.observe(&RunEvent::TaskEnded(Box::new(end)), "main");
        meter.save(&usage, "u");
        let rows = usage.rows(Some("u"), Some(today())).unwrap();
        let totals: Vec<(&str, u64)> = rows
            .iter()
            .map(|r| (r.model.as_str(), r.totals.total_tokens))
            .collect();
        assert_eq!(totals, [("main", 35), ("small", 20)]);
    }

    #[test]
    fn the_report_prices_models_with_a_price() {
        let usage = UsageStore::new(Arc::new(MemoryStore::new()));
        let mut meter = RunMeter::default();
        meter.observe(&ai(Some("gpt"), 1_000_001), "main");
        meter.observe(&ai(Some("local"), 10), "main");
        meter.save(&usage, "u");
        let pricing = PricingConfig::from([(
            "gpt".to_string(),
            ModelPrice {
                input_per_million: 1.0,
                output_per_million: 0.0,
            },
        )]);
        let text = report(
            &usage.rows(None, Some(today())).unwrap(),
            &pricing,
            Some(today()),
        );
        assert!(text.contains("u gpt: 1,000,001 tokens"), "{text}");
        assert!(text.contains("$1.0000"), "{text}");
        assert!(text.contains("Total: 1,000,011 tokens, $1.0000"), "{text}");
    }

    #[test]
    fn transcribed_seconds_add_up_per_model_and_show_in_the_report() {
        let usage = UsageStore::new(Arc::new(MemoryStore::new()));
        let day = today();
        assert!(usage.record_audio("u", day, "whisper-1", 42).unwrap());
        assert!(!usage.record_audio("u", day, "whisper-1", 700).unwrap());
        let mut meter = RunMeter::default();
        meter.observe(&ai(Some("gpt"), 10), "main");
        meter.save(&usage, "u");
        let rows = usage.rows(Some("u"), Some(day)).unwrap();
        let whisper = rows.iter().find(|r| r.model == "whisper-1").unwrap();
        assert_eq!(whisper.totals.audio_seconds, 742);
        assert_eq!(whisper.totals.runs, 0);
        let text = report(&rows, &PricingConfig::default(), Some(day));
        assert!(
            text.contains("• u whisper-1: 12 min 22 s of audio transcribed"),
            "{text}"
        );
        assert!(text.contains("• u gpt: 10 tokens"), "{text}");
        // Records written before the field existed read as no audio.
        let old: UsageTotals = serde_json::from_str(
            r#"{"input_tokens":1,"output_tokens":1,"total_tokens":2,"runs":1}"#,
        )
        .unwrap();
        assert_eq!(old.audio_seconds, 0);
    }
}
