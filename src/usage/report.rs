//! What `/usage`, `GET /api/usage` and `antler usage` show: rows by user, model and kind of
//! call with their cost, totals per kind, the unpriced models, what is left of each limit and
//! the day's top threads.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use serde_json::{Value, json};

use crate::agent_api::shared::group_thousands;
use crate::config::AppConfig;
use crate::config::budgets::PricingConfig;
use crate::usage::budget::{self, LimitState};
use crate::usage::ledger::{self, Spent};
use crate::usage::{UsageKind, UsageRow, UsageStore, UsageTotals, today};
use antler_store::StoreError;

/// How many threads `/usage` lists.
const TOP_THREADS: usize = 5;

/// A row's cost: stored at record time; rows written before costs were stored are priced at
/// today's price when the model has one.
fn row_cost(row: &UsageRow, pricing: &PricingConfig) -> Option<f64> {
    row.totals.cost.or_else(|| {
        let totals = &row.totals;
        pricing.get(&row.model).map(|price| {
            price.cost(
                totals.input_tokens,
                totals.cached_input_tokens,
                totals.output_tokens,
            )
        })
    })
}

/// Whether some of the row's calls had no price.
fn unpriced(row: &UsageRow, pricing: &PricingConfig) -> bool {
    let tokens = row.totals.total_tokens > 0;
    row.totals.unpriced_calls > 0 || (tokens && row_cost(row, pricing).is_none())
}

/// The models counted in tokens only.
fn unpriced_models(rows: &[UsageRow], pricing: &PricingConfig) -> Vec<String> {
    let names: BTreeSet<&str> = rows
        .iter()
        .filter(|row| unpriced(row, pricing))
        .map(|row| row.model.as_str())
        .collect();
    names.into_iter().map(str::to_string).collect()
}

/// Totals per kind of call.
pub fn kind_totals(rows: &[UsageRow]) -> BTreeMap<UsageKind, UsageTotals> {
    let mut kinds: BTreeMap<UsageKind, UsageTotals> = BTreeMap::new();
    for row in rows {
        kinds.entry(row.kind).or_default().merge(&row.totals);
    }
    kinds
}

/// A plain-text table of `rows` (one line per user, model and kind, with the cost where the
/// model has a price), the totals per kind, the unpriced models and a total line.
pub fn report(rows: &[UsageRow], pricing: &PricingConfig, day: Option<NaiveDate>) -> String {
    let window = day.map_or("all kept days".to_string(), |d| d.to_string());
    if rows.is_empty() {
        return format!("No token usage recorded ({window}).");
    }
    let money = |amount: f64| pricing.amount(amount, 4);
    let mut lines = vec![format!("Token usage ({window}):")];
    let (mut tokens, mut cost, mut priced) = (0u64, 0f64, false);
    for row in rows {
        let price = row_cost(row, pricing);
        tokens += row.totals.total_tokens;
        cost += price.unwrap_or(0.0);
        priced |= price.is_some();
        let day = if day.is_none() {
            format!("{} ", row.day)
        } else {
            String::new()
        };
        let kind = match row.kind {
            UsageKind::Lead => String::new(),
            kind => format!(" ({kind})"),
        };
        let who = format!("• {day}{} {}{kind}", row.user_id, row.model);
        // A transcription model's row has seconds and no tokens.
        let audio = row.totals.audio_seconds;
        if row.totals.calls == 0 && row.totals.total_tokens == 0 && audio > 0 {
            lines.push(format!(
                "{who}: {} of audio transcribed",
                audio_length(audio)
            ));
            continue;
        }
        lines.push(format!(
            "{who}: {} tokens ({} in, {} out), {} call{}{}{}",
            group_thousands(row.totals.total_tokens),
            group_thousands(row.totals.input_tokens),
            group_thousands(row.totals.output_tokens),
            row.totals.calls,
            if row.totals.calls == 1 { "" } else { "s" },
            price.map(|c| format!(", {}", money(c))).unwrap_or_default(),
            if audio > 0 {
                format!(", {} of audio transcribed", audio_length(audio))
            } else {
                String::new()
            },
        ));
    }
    let kinds = kind_totals(rows);
    if kinds.len() > 1 {
        let parts: Vec<String> = kinds
            .iter()
            .map(|(kind, totals)| format!("{kind} {}", group_thousands(totals.total_tokens)))
            .collect();
        lines.push(format!("By kind (tokens): {}", parts.join(", ")));
    }
    let unpriced = unpriced_models(rows, pricing);
    if !unpriced.is_empty() {
        lines.push(format!(
            "Unpriced (tokens only; add them to `pricing.models`): {}",
            unpriced.join(", ")
        ));
    }
    lines.push(format!(
        "Total: {} tokens{}",
        group_thousands(tokens),
        if priced {
            format!(", {}", money(cost))
        } else {
            String::new()
        }
    ));
    lines.join("\n")
}

/// What `GET /api/usage` answers: the rows (each with `kind`, `cost`, `calls`, and `runs` as
/// before), the total cost, the currency, the unpriced models, totals per kind and the text.
pub fn report_json(rows: &[UsageRow], config: &AppConfig, days: u64) -> Value {
    let pricing = &config.pricing;
    let text = report(rows, pricing, (days == 1).then(today));
    let json_rows: Vec<Value> = rows
        .iter()
        .map(|row| {
            let mut value = serde_json::to_value(row).unwrap_or_default();
            value["cost"] = json!(row_cost(row, pricing));
            value["runs"] = json!(row.totals.calls);
            value
        })
        .collect();
    let cost: f64 = rows.iter().filter_map(|row| row_cost(row, pricing)).sum();
    let kinds: BTreeMap<String, Value> = kind_totals(rows)
        .into_iter()
        .map(|(kind, totals)| {
            let cost = rows
                .iter()
                .filter(|row| row.kind == kind)
                .filter_map(|row| row_cost(row, pricing))
                .sum::<f64>();
            let value = json!({
                "calls": totals.calls,
                "input_tokens": totals.input_tokens,
                "output_tokens": totals.output_tokens,
                "total_tokens": totals.total_tokens,
                "audio_seconds": totals.audio_seconds,
                "cost": cost,
            });
            (kind.to_string(), value)
        })
        .collect();
    json!({
        "days": days,
        "rows": json_rows,
        "report": text,
        "currency": pricing.currency,
        "cost": cost,
        "unpriced": unpriced_models(rows, pricing),
        "kinds": kinds,
    })
}

/// What `/usage` answers: today's usage of everyone for an admin; for anyone else their own,
/// with what is left of each of their limits and their top threads of the day (`title` names
/// a thread where it knows one).
pub fn usage_text(
    usage: &UsageStore,
    config: &AppConfig,
    user_id: &str,
    admin: bool,
    title: &dyn Fn(&str) -> Option<String>,
) -> Result<String, StoreError> {
    let day = today();
    let rows = usage.rows((!admin).then_some(user_id), Some(day))?;
    let mut text = report(&rows, &config.pricing, Some(day));
    if admin {
        return Ok(text);
    }
    let states = budget::account_states(&usage.store, config, user_id, None, day)?;
    for state in &states {
        text.push('\n');
        text.push_str(&left_line(state, &config.pricing));
    }
    let threads = ledger::top_threads(&usage.store, user_id, day)?;
    if !threads.is_empty() {
        text.push_str("\nTop threads today:");
        for (thread_id, spent) in threads.into_iter().take(TOP_THREADS) {
            // A title is one line here, however the thread's first message was written.
            let name = title(&thread_id)
                .map(|title| title.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| thread_id.clone());
            text.push_str(&format!("\n  {}", thread_line(&name, &spent, config)));
        }
    }
    Ok(text)
}

/// `Daily budget: $5.00, $1.20 left (resets at 00:00 UTC).`
fn left_line(state: &LimitState, pricing: &PricingConfig) -> String {
    let period = match state.period {
        ledger::Period::Day(_) => "Daily",
        ledger::Period::Month(_) => "Monthly",
    };
    format!(
        "{period} budget: {}, {} left (resets {}).",
        state.limit_text(pricing),
        state.left_text(pricing),
        state.reset_text()
    )
}

fn thread_line(name: &str, spent: &Spent, config: &AppConfig) -> String {
    let cost = if spent.cost > 0.0 {
        format!(", {}", config.pricing.amount(spent.cost, 4))
    } else {
        String::new()
    };
    format!("{name}: {} tokens{cost}", group_thousands(spent.tokens))
}

/// `42 s`, `12 min 5 s`: how long the audio a report counts was.
fn audio_length(seconds: u64) -> String {
    match (seconds / 60, seconds % 60) {
        (0, rest) => format!("{rest} s"),
        (minutes, 0) => format!("{minutes} min"),
        (minutes, rest) => format!("{minutes} min {rest} s"),
    }
}
