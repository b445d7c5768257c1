//! The `budgets` and `pricing` config sections: what a user or a custom agent may spend (tokens
//! a UTC day, money a UTC day or a calendar month) and what a model's tokens cost.
//!
//! Both keep reading their first forms: `budgets.default_daily_tokens` and
//! `budgets.users.{id}: <tokens>` are daily token limits; `pricing` as a plain map of model →
//! `{input_per_million, output_per_million}` is a USD price list.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A limit checked before every model call; the run that reaches it stops there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BudgetsConfig {
    /// The limits of every user without an entry in `users`.
    pub default: Option<BudgetLimits>,
    /// The old form of `default.daily_tokens`; `default` wins when both are set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_daily_tokens: Option<u64>,
    /// Per-user limits by Antler user id (`telegram-123`, …); a bare number is `daily_tokens`.
    pub users: BTreeMap<String, BudgetLimits>,
    /// Per custom agent (by name): everything spent by that agent's runs, whoever asked.
    pub agents: BTreeMap<String, BudgetLimits>,
}

/// Any of the three limits; unset ones do not apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(from = "LimitsForm", into = "LimitsFields")]
pub struct BudgetLimits {
    /// Tokens (input + output, every model) per UTC day.
    pub daily_tokens: Option<u64>,
    /// Money (in `pricing.currency`) per UTC day.
    pub daily_cost: Option<f64>,
    /// Money per calendar month (UTC).
    pub monthly_cost: Option<f64>,
}

impl BudgetLimits {
    pub fn is_empty(&self) -> bool {
        self.daily_tokens.is_none() && self.daily_cost.is_none() && self.monthly_cost.is_none()
    }

    /// Whether any limit needs the month's total.
    pub fn monthly(&self) -> bool {
        self.monthly_cost.is_some()
    }
}

impl From<u64> for BudgetLimits {
    fn from(daily_tokens: u64) -> Self {
        Self {
            daily_tokens: Some(daily_tokens),
            ..Default::default()
        }
    }
}

/// How a limit may be written: a bare number (the old form, daily tokens) or the fields.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum LimitsForm {
    Tokens(u64),
    Fields(LimitsFields),
}

#[derive(Clone, Copy, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
struct LimitsFields {
    #[serde(skip_serializing_if = "Option::is_none")]
    daily_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    daily_cost: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    monthly_cost: Option<f64>,
}

impl From<LimitsForm> for BudgetLimits {
    fn from(form: LimitsForm) -> Self {
        match form {
            LimitsForm::Tokens(tokens) => tokens.into(),
            LimitsForm::Fields(fields) => Self {
                daily_tokens: fields.daily_tokens,
                daily_cost: fields.daily_cost,
                monthly_cost: fields.monthly_cost,
            },
        }
    }
}

impl From<BudgetLimits> for LimitsFields {
    fn from(limits: BudgetLimits) -> Self {
        Self {
            daily_tokens: limits.daily_tokens,
            daily_cost: limits.daily_cost,
            monthly_cost: limits.monthly_cost,
        }
    }
}

impl BudgetsConfig {
    /// The limits of `user_id`: their own entry, else `default` (or the old
    /// `default_daily_tokens`); `None` when nothing limits them.
    pub fn user_limits(&self, user_id: &str) -> Option<BudgetLimits> {
        let limits = self
            .users
            .get(user_id)
            .copied()
            .or(self.default)
            .or(self.default_daily_tokens.map(BudgetLimits::from))?;
        (!limits.is_empty()).then_some(limits)
    }

    /// The limits of the custom agent `name` (over all its users).
    pub fn agent_limits(&self, name: &str) -> Option<BudgetLimits> {
        let limits = self.agents.get(name).or_else(|| {
            self.agents
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, limits)| limits)
        })?;
        (!limits.is_empty()).then_some(*limits)
    }

    /// The daily token budget of `user_id`, if any.
    pub fn daily_tokens_for(&self, user_id: &str) -> Option<u64> {
        self.user_limits(user_id)?.daily_tokens
    }

    /// What is wrong, by key: `(key, what to do)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut check = |key: String, limits: &BudgetLimits| {
            for (field, value) in [
                ("daily_cost", limits.daily_cost),
                ("monthly_cost", limits.monthly_cost),
            ] {
                if let Some(value) = value
                    && !(value.is_finite() && value > 0.0)
                {
                    problems.push((
                        format!("{key}.{field}"),
                        "must be a positive amount in pricing.currency; remove it for no limit"
                            .to_string(),
                    ));
                }
            }
            if limits.daily_tokens == Some(0) && !key.starts_with("budgets.users.") {
                problems.push((
                    format!("{key}.daily_tokens"),
                    "0 would refuse every model call; set a positive number of tokens or remove it"
                        .to_string(),
                ));
            }
        };
        if let Some(default) = &self.default {
            check("budgets.default".into(), default);
        }
        for (id, limits) in &self.users {
            check(format!("budgets.users.{id}"), limits);
        }
        for (name, limits) in &self.agents {
            check(format!("budgets.agents.{name}"), limits);
        }
        problems
    }
}

/// One model's price per million tokens in `pricing.currency`; a model without an entry is
/// counted in tokens and reported as unpriced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ModelPrice {
    /// Per million input (prompt) tokens not served from the cache.
    #[serde(alias = "input_per_million")]
    pub input: f64,
    /// Per million output (answer) tokens.
    #[serde(alias = "output_per_million")]
    pub output: f64,
    /// Per million input tokens served from the provider's prompt cache; unset = `input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
}

impl ModelPrice {
    /// What `input_tokens` (of which `cached_input_tokens` came from the cache) and
    /// `output_tokens` cost.
    pub fn cost(&self, input_tokens: u64, cached_input_tokens: u64, output_tokens: u64) -> f64 {
        let cached = cached_input_tokens.min(input_tokens);
        ((input_tokens - cached) as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// `pricing:` — the currency, named once, and each model's price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(from = "PricingForm")]
pub struct PricingConfig {
    /// An ISO 4217 code (`USD`, `EUR`, …) every price and money budget is in.
    pub currency: String,
    pub models: BTreeMap<String, ModelPrice>,
}

impl Default for PricingConfig {
    fn default() -> Self {
        Self {
            currency: "USD".into(),
            models: BTreeMap::new(),
        }
    }
}

impl PricingConfig {
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        self.models.get(model)
    }

    /// `$5.00`, `€5.00`, `5.00 CHF`: an amount as notices show it.
    /// Cents as usual; an amount under a cent keeps enough decimals to be told from zero
    /// (`$0.0004`, not `$0.00`), so a small budget's notice still says something.
    pub fn money(&self, amount: f64) -> String {
        let decimals = if amount == 0.0 || amount.abs() >= 0.01 {
            2
        } else {
            // Two significant digits, at least cents, at most six decimals.
            let leading = (-amount.abs().log10()).floor() as usize;
            (leading + 2).clamp(2, 6)
        };
        self.amount(amount, decimals)
    }

    /// An amount with `decimals` decimals (reports show a call's fractions of a cent).
    pub fn amount(&self, amount: f64, decimals: usize) -> String {
        let symbol = match self.currency.as_str() {
            "USD" => "$",
            "EUR" => "€",
            "GBP" => "£",
            "JPY" | "CNY" => "¥",
            _ => return format!("{amount:.decimals$} {}", self.currency),
        };
        format!("{symbol}{amount:.decimals$}")
    }

    /// What is wrong, by key.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let code = &self.currency;
        if code.len() != 3 || !code.chars().all(|c| c.is_ascii_uppercase()) {
            problems.push((
                "pricing.currency".to_string(),
                "must be a three-letter currency code such as USD or EUR".to_string(),
            ));
        }
        for (model, price) in &self.models {
            let prices = [Some(price.input), Some(price.output), price.cached_input];
            if prices
                .into_iter()
                .flatten()
                .any(|p| !p.is_finite() || p < 0.0)
            {
                problems.push((
                    format!("pricing.models.{model}"),
                    format!("prices must be finite and not negative ({code} per million tokens)"),
                ));
            }
        }
        problems
    }
}

/// `pricing` as it may be written: `{currency, models}`, or the old model → price map in USD.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum PricingForm {
    Current(CurrentPricing),
    Old(BTreeMap<String, ModelPrice>),
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CurrentPricing {
    #[serde(default = "usd")]
    currency: String,
    #[serde(default)]
    models: BTreeMap<String, ModelPrice>,
}

fn usd() -> String {
    "USD".into()
}

impl From<PricingForm> for PricingConfig {
    fn from(form: PricingForm) -> Self {
        match form {
            PricingForm::Current(pricing) => Self {
                currency: pricing.currency,
                models: pricing.models,
            },
            PricingForm::Old(models) => Self {
                currency: usd(),
                models,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the config loader reads a section: YAML to a JSON tree, then typed.
    fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
        let tree: serde_json::Value = serde_saphyr::from_str(text).unwrap();
        serde_json::from_value(tree)
    }

    #[test]
    fn small_amounts_keep_their_significant_digits() {
        let pricing = PricingConfig::default();
        assert_eq!(pricing.money(5.0), "$5.00");
        assert_eq!(pricing.money(0.5), "$0.50");
        assert_eq!(pricing.money(0.05), "$0.05");
        assert_eq!(pricing.money(0.0004), "$0.00040");
        assert_eq!(pricing.money(0.000_15), "$0.00015");
        assert_eq!(pricing.money(0.0), "$0.00");
    }

    #[test]
    fn a_user_entry_wins_over_the_default_and_old_forms_still_load() {
        let budgets: BudgetsConfig = yaml(
            "default_daily_tokens: 1000\nusers:\n  telegram-7: 50\n  vip: {daily_cost: 5}\n\
             agents:\n  Researcher: {monthly_cost: 100}\n",
        )
        .unwrap();
        assert_eq!(budgets.daily_tokens_for("telegram-7"), Some(50));
        assert_eq!(budgets.daily_tokens_for("telegram-8"), Some(1000));
        assert_eq!(budgets.user_limits("vip").unwrap().daily_cost, Some(5.0));
        assert_eq!(budgets.daily_tokens_for("vip"), None);
        let agent = budgets.agent_limits("researcher").unwrap();
        assert_eq!(agent.monthly_cost, Some(100.0));
        assert!(budgets.problems().is_empty());
        assert_eq!(BudgetsConfig::default().user_limits("x"), None);
        let new: BudgetsConfig = yaml("default: {daily_tokens: 10, daily_cost: 0}").unwrap();
        assert_eq!(new.daily_tokens_for("anyone"), Some(10));
        let problems = new.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "budgets.default.daily_cost");
        let typo = yaml::<BudgetsConfig>("default: {daily_costs: 1}");
        assert!(typo.is_err());
    }

    #[test]
    fn pricing_reads_both_forms_and_prices_cached_input() {
        let current: PricingConfig =
            yaml("currency: EUR\nmodels:\n  gpt: {input: 2.5, output: 10, cached_input: 1.25}\n")
                .unwrap();
        assert_eq!(current.currency, "EUR");
        let price = current.get("gpt").unwrap();
        // 1M fresh input, 1M cached, 0.5M output.
        let cost = price.cost(2_000_000, 1_000_000, 500_000);
        assert!((cost - (2.5 + 1.25 + 5.0)).abs() < 1e-9, "{cost}");
        assert_eq!(current.money(5.0), "€5.00");
        let old: PricingConfig =
            yaml("gpt: {input_per_million: 2, output_per_million: 8}").unwrap();
        assert_eq!(old.currency, "USD");
        assert!((old.get("gpt").unwrap().cost(500_000, 0, 250_000) - 3.0).abs() < 1e-9);
        assert_eq!(old.money(5.0), "$5.00");
        let bad: PricingConfig = yaml("currency: dollars\nmodels: {m: {input: -1}}").unwrap();
        let keys: Vec<String> = bad.problems().into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["pricing.currency", "pricing.models.m"]);
    }
}
