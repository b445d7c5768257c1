//! [`Account`]: who pays for a run's model calls (the speaker, the custom agent, the thread),
//! as the [`CallMeter`] the model-call chain asks before each call and tells after it.
//!
//! Before a call: the ledger records of the payers with limits (at most two reads). After it:
//! the usage row (with the kind and the cost at today's price), the thread's day total and the
//! ledger records, each one compare-and-set; then, when the caller can show it, the 80 %
//! warning of a limit crossing that share, claimed once per period.

use std::sync::Arc;

use chrono::{Days, NaiveDate, Utc};

use crate::agent_api::{CallMeter, UsageKind};
use crate::config::AppConfig;
use crate::model::ModelError;
use crate::usage::budget::{self, WARNING_SHARE};
use crate::usage::ledger::{self, LedgerRecord, Payer, THREADS_TREE};
use crate::usage::{MAX_DAYS, UsageStore};
use antler_store::StoreError;
use antler_store::messages::Usage;

pub struct Account {
    usage: UsageStore,
    /// The run's configuration snapshot: budgets and prices as they were when it started.
    config: Arc<AppConfig>,
    user_id: String,
    /// The custom agent's name, lower-cased.
    agent: Option<String>,
    thread_id: String,
}

impl Account {
    pub fn new(
        usage: UsageStore,
        config: Arc<AppConfig>,
        user_id: &str,
        agent: Option<&str>,
        thread_id: &str,
    ) -> Self {
        Self {
            usage,
            config,
            user_id: user_id.to_string(),
            agent: agent.map(str::to_lowercase),
            thread_id: thread_id.to_string(),
        }
    }

    fn payers(&self) -> Vec<Payer<'_>> {
        let mut payers = vec![Payer::User(&self.user_id)];
        payers.extend(self.agent.as_deref().map(Payer::Agent));
        payers
    }

    /// The notice of the first limit reached, if any.
    pub fn reached(&self, today: NaiveDate) -> Result<Option<String>, StoreError> {
        let states = budget::account_states(
            &self.usage.store,
            &self.config,
            &self.user_id,
            self.agent.as_deref(),
            today,
        )?;
        Ok(budget::first_reached(states).map(|state| state.stop_notice(&self.config.pricing)))
    }

    /// Writes one call everywhere it counts; returns the warning to show, if one was claimed.
    fn write(
        &self,
        kind: UsageKind,
        model: &str,
        usage: &Usage,
        warn: bool,
    ) -> Result<Option<String>, StoreError> {
        let today = Utc::now().date_naive();
        let cost = self.config.pricing.get(model).map(|price| {
            price.cost(
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.output_tokens,
            )
        });
        crate::metrics::model_tokens(model, usage.input_tokens, usage.output_tokens);
        if let Some(cost) = cost {
            crate::metrics::model_cost(model, kind.as_str(), cost);
        }
        let store = &self.usage.store;
        let new_day = self
            .usage
            .record_call(&self.user_id, today, model, kind, usage, cost)?;
        let (tokens, money) = (usage.total_tokens, cost.unwrap_or(0.0));
        let thread = ledger::thread_key(&self.user_id, today, &self.thread_id);
        ledger::add(store, THREADS_TREE, &thread, tokens, money)?;
        let mut warning = None;
        for payer in self.payers() {
            let record = ledger::add_call(store, payer, today, tokens, money)?;
            if warn && warning.is_none() {
                warning = self.warning(payer, &record, today)?;
            }
        }
        if new_day {
            self.prune(today);
        }
        Ok(warning)
    }

    /// The warning of the first of `payer`'s limits between [`WARNING_SHARE`] and reached
    /// whose warning this call claims, from the ledger record the call was added to.
    fn warning(
        &self,
        payer: Payer<'_>,
        record: &LedgerRecord,
        today: NaiveDate,
    ) -> Result<Option<String>, StoreError> {
        let Some(limits) = budget::payer_limits(&self.config, payer) else {
            return Ok(None);
        };
        for state in budget::limit_states(record, payer, &limits, today) {
            // Past the limit the stop notice says more than a warning would.
            if (WARNING_SHARE..1.0).contains(&state.share())
                && ledger::claim_warning(&self.usage.store, &state.warning_key(payer))?
            {
                return Ok(Some(state.warning(&self.config.pricing)));
            }
        }
        Ok(None)
    }

    /// Once a day per user: what no report or budget reads any more goes.
    fn prune(&self, today: NaiveDate) {
        let Some(oldest) = today.checked_sub_days(Days::new(MAX_DAYS)) else {
            return;
        };
        let thread_days = today.checked_sub_days(Days::new(1)).unwrap_or(today);
        let pruned = self
            .usage
            .prune(Some(&self.user_id), oldest)
            .and_then(|_| ledger::prune(&self.usage.store, &self.payers(), today, thread_days));
        if let Err(error) = pruned {
            tracing::warn!(%error, user_id = %self.user_id, "Could not drop old usage records");
        }
    }
}

impl CallMeter for Account {
    fn admit(&self, _kind: UsageKind) -> Result<(), ModelError> {
        match self.reached(Utc::now().date_naive()) {
            Ok(None) => Ok(()),
            Ok(Some(notice)) => Err(ModelError::BudgetExceeded { notice }),
            // The ledger cannot be read: the call goes ahead (a store outage shows elsewhere)
            // rather than every run failing on its budget.
            Err(error) => {
                tracing::warn!(%error, user_id = %self.user_id, "Could not read the budget ledger");
                Ok(())
            }
        }
    }

    fn record(&self, kind: UsageKind, model: &str, usage: &Usage, warn: bool) -> Option<String> {
        match self.write(kind, model, usage, warn) {
            Ok(warning) => warning,
            Err(error) => {
                tracing::warn!(%error, user_id = %self.user_id, model, %kind, "Could not record a model call's usage");
                None
            }
        }
    }
}
