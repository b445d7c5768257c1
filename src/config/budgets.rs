//! The `budgets` and `pricing` config sections: how many tokens a user may spend a day, and
//! what a model's tokens cost (for `/usage` and `antler usage`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A user past today's budget gets a notice instead of a new run until 00:00 UTC.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BudgetsConfig {
    /// Tokens (input + output, every model) a user may spend per UTC day; unset = unlimited.
    pub default_daily_tokens: Option<u64>,
    /// Per-user overrides of `default_daily_tokens`, by Antler user id (`telegram-123`, …).
    pub users: BTreeMap<String, u64>,
}

impl BudgetsConfig {
    /// The daily budget of `user_id`, if any.
    pub fn daily_tokens_for(&self, user_id: &str) -> Option<u64> {
        self.users
            .get(user_id)
            .copied()
            .or(self.default_daily_tokens)
    }
}

/// One model's price; a model without an entry shows no cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ModelPrice {
    /// USD per million input (prompt) tokens.
    pub input_per_million: f64,
    /// USD per million output (answer) tokens.
    pub output_per_million: f64,
}

impl ModelPrice {
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_per_million
            + output_tokens as f64 * self.output_per_million)
            / 1_000_000.0
    }
}

/// `pricing:` — model name → price; models without an entry have no cost shown.
pub type PricingConfig = BTreeMap<String, ModelPrice>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_override_wins_over_the_default() {
        let budgets = BudgetsConfig {
            default_daily_tokens: Some(1000),
            users: BTreeMap::from([("telegram-7".into(), 50)]),
        };
        assert_eq!(budgets.daily_tokens_for("telegram-7"), Some(50));
        assert_eq!(budgets.daily_tokens_for("telegram-8"), Some(1000));
        assert_eq!(BudgetsConfig::default().daily_tokens_for("x"), None);
    }

    #[test]
    fn cost_is_per_million_tokens() {
        let price = ModelPrice {
            input_per_million: 2.0,
            output_per_million: 8.0,
        };
        assert!((price.cost(500_000, 250_000) - 3.0).abs() < 1e-9);
    }
}
