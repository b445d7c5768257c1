//! Usage and budgets: every model call metered with its kind and cost, budgets in tokens and
//! money per user and per custom agent, enforced before every model call.
//!
//! A run's calls are paid by an [`Account`] (the harness puts it in the run's context; the
//! model-call chain asks it before each call and tells it the usage after, see
//! `agent_api::metering`). Rows per user, day, model and kind are in [`UsageStore`]; the
//! per-period totals budgets read in the [`ledger`]. Before a run starts, [`budget_notice`]
//! refuses it when a limit is already reached. `/usage`, `GET /api/usage` and `antler usage`
//! print [`report`].

pub mod account;
pub mod budget;
pub mod kind;
pub mod ledger;
mod report;
pub mod store;

use chrono::Utc;

use crate::config::AppConfig;
use antler_store::StoreError;

pub use crate::config::budgets::{BudgetLimits, BudgetsConfig, ModelPrice, PricingConfig};
pub use account::Account;
pub use kind::UsageKind;
pub use report::{kind_totals, report, report_json, usage_text};
pub use store::{UsageRow, UsageStore, UsageTotals, today};

/// The notice a user gets instead of a run when a limit of theirs (or of the custom agent
/// `agent` the run would use) is reached; `None` while within every limit.
pub fn budget_notice(
    usage: &UsageStore,
    config: &AppConfig,
    user_id: &str,
) -> Result<Option<String>, StoreError> {
    let today = Utc::now().date_naive();
    let states = budget::account_states(&usage.store, config, user_id, None, today)?;
    Ok(budget::first_reached(states).map(|state| state.refusal(&config.pricing)))
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

#[cfg(test)]
mod tests;
