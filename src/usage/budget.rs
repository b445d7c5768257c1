//! Budgets against the ledger: which limit of a user or an agent is reached, what is left of
//! each, and the sentences a person reads about them (the stop, the refusal, the 80 % warning).

use chrono::NaiveDate;

use crate::agent_api::shared::group_thousands;
use crate::config::AppConfig;
use crate::config::budgets::{BudgetLimits, PricingConfig};
use crate::usage::ledger::{self, LedgerRecord, Payer, Period, Spent};
use antler_store::{StoreError, StoreRef};

/// The share of a limit at which the warning is given.
pub const WARNING_SHARE: f64 = 0.8;

/// What a limit counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measure {
    Tokens(u64),
    Money(f64),
}

/// One limit of one payer, with what was spent against it.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitState {
    /// The custom agent's name for an agent's budget; `None` for the user's own.
    pub agent: Option<String>,
    pub period: Period,
    pub limit: Measure,
    pub spent: Spent,
}

impl LimitState {
    /// The share of the limit spent (1.0 = reached).
    /// Spent over the limit; a limit of zero is spent from the start.
    pub fn share(&self) -> f64 {
        match self.limit {
            Measure::Tokens(0) => 1.0,
            Measure::Tokens(limit) => self.spent.tokens as f64 / limit as f64,
            Measure::Money(limit) if limit <= 0.0 => 1.0,
            Measure::Money(limit) => self.spent.cost / limit,
        }
    }

    pub fn reached(&self) -> bool {
        self.share() >= 1.0
    }

    /// `daily`/`monthly` and what the limit counts: the last part of a warning claim's key.
    pub fn metric(&self) -> &'static str {
        match (self.period, self.limit) {
            (Period::Day(_), Measure::Tokens(_)) => "daily_tokens",
            (Period::Day(_), Measure::Money(_)) => "daily_cost",
            (Period::Month(_), _) => "monthly_cost",
        }
    }

    fn adjective(&self) -> &'static str {
        match self.period {
            Period::Day(_) => "daily",
            Period::Month(_) => "monthly",
        }
    }

    fn whose(&self) -> String {
        match &self.agent {
            Some(agent) => format!("agent {agent}'s "),
            None => String::new(),
        }
    }

    /// `$5.00` or `100,000 tokens`.
    pub fn limit_text(&self, pricing: &PricingConfig) -> String {
        match self.limit {
            Measure::Tokens(limit) => format!("{} tokens", group_thousands(limit)),
            Measure::Money(limit) => pricing.money(limit),
        }
    }

    pub fn spent_text(&self, pricing: &PricingConfig) -> String {
        match self.limit {
            Measure::Tokens(_) => format!("{} tokens", group_thousands(self.spent.tokens)),
            Measure::Money(_) => pricing.money(self.spent.cost),
        }
    }

    pub fn left_text(&self, pricing: &PricingConfig) -> String {
        match self.limit {
            Measure::Tokens(limit) => format!(
                "{} tokens",
                group_thousands(limit.saturating_sub(self.spent.tokens))
            ),
            Measure::Money(limit) => pricing.money((limit - self.spent.cost).max(0.0)),
        }
    }

    /// `at 00:00 UTC` for a day, `on 2027-01-01 (00:00 UTC)` for a month.
    pub fn reset_text(&self) -> String {
        match self.period {
            Period::Day(_) => "at 00:00 UTC".to_string(),
            Period::Month(_) => format!("on {} (00:00 UTC)", self.period.resets()),
        }
    }

    /// What a run stopped by this limit answers.
    pub fn stop_notice(&self, pricing: &PricingConfig) -> String {
        format!(
            "stopped: {}{} budget of {} reached; resets {}",
            self.whose(),
            self.adjective(),
            self.limit_text(pricing),
            self.reset_text()
        )
    }

    /// What a person gets instead of a new run.
    pub fn refusal(&self, pricing: &PricingConfig) -> String {
        let whose = match &self.agent {
            Some(agent) => format!("Agent {agent} has used its"),
            None => "You have used your".to_string(),
        };
        let (what, figures) = match self.limit {
            Measure::Tokens(limit) => (
                "token budget",
                format!(
                    "{} of {} tokens",
                    group_thousands(self.spent.tokens),
                    group_thousands(limit)
                ),
            ),
            Measure::Money(limit) => (
                "budget",
                format!(
                    "{} of {}",
                    pricing.money(self.spent.cost),
                    pricing.money(limit)
                ),
            ),
        };
        format!(
            "{whose} {} {what} ({figures}). New requests are paused until it resets {}; ask an \
             admin to raise `budgets` if you need more.",
            self.adjective(),
            self.reset_text()
        )
    }

    /// The 80 % warning.
    pub fn warning(&self, pricing: &PricingConfig) -> String {
        format!(
            "Budget notice: {}% of the {}{} budget of {} is used ({} left); it resets {}.",
            (self.share() * 100.0).floor().min(100.0),
            self.whose(),
            self.adjective(),
            self.limit_text(pricing),
            self.left_text(pricing),
            self.reset_text()
        )
    }

    pub fn warning_key(&self, payer: Payer<'_>) -> Vec<u8> {
        let mut key = ledger::ledger_key(payer, self.period);
        key.push(0);
        key.extend_from_slice(self.metric().as_bytes());
        key
    }
}

/// The limits of one payer as states, from its ledger record of `today`'s month.
pub fn limit_states(
    record: &LedgerRecord,
    payer: Payer<'_>,
    limits: &BudgetLimits,
    today: NaiveDate,
) -> Vec<LimitState> {
    let agent = match payer {
        Payer::Agent(name) => Some(name.to_string()),
        Payer::User(_) => None,
    };
    let day = (Period::Day(today), record.on(today));
    let month = (Period::Month(today), record.month);
    let measures = [
        (day, limits.daily_tokens.map(Measure::Tokens)),
        (day, limits.daily_cost.map(Measure::Money)),
        (month, limits.monthly_cost.map(Measure::Money)),
    ];
    measures
        .into_iter()
        .filter_map(|((period, spent), limit)| {
            Some(LimitState {
                agent: agent.clone(),
                period,
                limit: limit?,
                spent,
            })
        })
        .collect()
}

/// The limits of `payer` (its own entry, the default), if any.
pub fn payer_limits(config: &AppConfig, payer: Payer<'_>) -> Option<BudgetLimits> {
    match payer {
        Payer::User(id) => config.budgets.user_limits(id),
        Payer::Agent(name) => config.budgets.agent_limits(name),
    }
}

/// Every limit that applies to a call paid by `user_id` (in a run of `agent`): the user's,
/// then the agent's.
pub fn account_states(
    store: &StoreRef,
    config: &AppConfig,
    user_id: &str,
    agent: Option<&str>,
    today: NaiveDate,
) -> Result<Vec<LimitState>, StoreError> {
    let agent = agent.map(str::to_lowercase);
    let payers = std::iter::once(Payer::User(user_id)).chain(agent.as_deref().map(Payer::Agent));
    let mut states = Vec::new();
    for payer in payers {
        if let Some(limits) = payer_limits(config, payer) {
            let record = ledger::ledger_record(store, payer, today)?;
            states.extend(limit_states(&record, payer, &limits, today));
        }
    }
    Ok(states)
}

/// The first limit reached, if any.
pub fn first_reached(states: Vec<LimitState>) -> Option<LimitState> {
    states.into_iter().find(LimitState::reached)
}
