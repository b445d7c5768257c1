//! `UsageStore`: token usage per user, UTC day and model, in the `usage` tree.
//!
//! One record per (user, day, model), updated in place (compare-and-set, so two runs of one
//! user in two daemons never lose an update): the data grows with days and models, never with
//! runs, and nothing of it is held in memory. Days older than the longest report window
//! ([`MAX_DAYS`](crate::usage::MAX_DAYS)) are dropped when a user's first run of a day is recorded.

use chrono::{NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use antler_store::messages::Usage;
use antler_store::{BatchOp, Expect, StoreError, StoreRef};

pub const USAGE_TREE: &str = "usage";
/// A CAS that keeps failing means something rewrites the key in a loop; give up loudly.
const MAX_ATTEMPTS: usize = 16;

/// What a user spent on one model in one day.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// Runs that used this model (a run using two models counts for both).
    pub runs: u64,
    /// Seconds of voice notes and audio transcribed with this (transcription) model.
    #[serde(default)]
    pub audio_seconds: u64,
}

impl UsageTotals {
    fn add(&mut self, usage: &Usage) {
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.total_tokens += usage.total_tokens;
        self.runs += 1;
    }
}

/// One row of a usage report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UsageRow {
    pub user_id: String,
    pub day: NaiveDate,
    pub model: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

#[derive(Clone)]
pub struct UsageStore {
    store: StoreRef,
}

/// Today in UTC: the budget window.
pub fn today() -> NaiveDate {
    Utc::now().date_naive()
}

fn key(user_id: &str, day: NaiveDate, model: &str) -> Vec<u8> {
    format!("{user_id}\0{day}\0{model}").into_bytes()
}

fn corrupt(key: &[u8], detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        key: String::from_utf8_lossy(key).replace('\0', "/"),
        detail: detail.to_string(),
    }
}

fn parse_row(key: &[u8], value: &[u8]) -> Result<UsageRow, StoreError> {
    let text = std::str::from_utf8(key).map_err(|e| corrupt(key, e))?;
    let mut parts = text.splitn(3, '\0');
    let (Some(user_id), Some(day), Some(model)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(corrupt(key, "the key is not user/day/model"));
    };
    let day = day.parse().map_err(|e| corrupt(key, e))?;
    let totals = serde_json::from_slice(value).map_err(|e| corrupt(key, e))?;
    Ok(UsageRow {
        user_id: user_id.to_string(),
        day,
        model: model.to_string(),
        totals,
    })
}

impl UsageStore {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    /// Adds one run's usage of `model` to `user_id`'s totals for `day`; `true` when that made
    /// a new record (the user's first run of the day on this model).
    pub fn record(
        &self,
        user_id: &str,
        day: NaiveDate,
        model: &str,
        usage: &Usage,
    ) -> Result<bool, StoreError> {
        self.update(user_id, day, model, |totals| totals.add(usage))
    }

    /// Adds `seconds` of audio transcribed with `model` to `user_id`'s totals for `day`;
    /// `true` when that made a new record.
    pub fn record_audio(
        &self,
        user_id: &str,
        day: NaiveDate,
        model: &str,
        seconds: u64,
    ) -> Result<bool, StoreError> {
        self.update(user_id, day, model, |totals| {
            totals.audio_seconds += seconds
        })
    }

    fn update(
        &self,
        user_id: &str,
        day: NaiveDate,
        model: &str,
        change: impl Fn(&mut UsageTotals),
    ) -> Result<bool, StoreError> {
        let key = key(user_id, day, model);
        for _ in 0..MAX_ATTEMPTS {
            let current = self.store.get(USAGE_TREE, &key)?;
            let mut totals: UsageTotals = match &current {
                Some(bytes) => serde_json::from_slice(bytes).map_err(|e| corrupt(&key, e))?,
                None => UsageTotals::default(),
            };
            change(&mut totals);
            let value = serde_json::to_vec(&totals).map_err(|e| corrupt(&key, e))?;
            let expect = Expect {
                tree: USAGE_TREE,
                key: key.clone(),
                value: current,
            };
            let put = BatchOp::Put {
                tree: USAGE_TREE,
                key: key.clone(),
                value,
            };
            if self.store.apply_batch_if(&expect, vec![put])? {
                return Ok(expect.value.is_none());
            }
        }
        Err(StoreError::Io(format!(
            "usage of {user_id} kept changing under {MAX_ATTEMPTS} attempts to add a run; retry"
        )))
    }

    /// Tokens `user_id` spent on `day`, every model.
    pub fn tokens_on(&self, user_id: &str, day: NaiveDate) -> Result<u64, StoreError> {
        Ok(self
            .rows(Some(user_id), Some(day))?
            .iter()
            .map(|row| row.totals.total_tokens)
            .sum())
    }

    /// Rows of one user (or everyone) for one day (or every kept day), in key order.
    pub fn rows(
        &self,
        user_id: Option<&str>,
        day: Option<NaiveDate>,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let prefix = match (user_id, day) {
            (Some(user), Some(day)) => format!("{user}\0{day}\0"),
            (Some(user), None) => format!("{user}\0"),
            (None, _) => String::new(),
        };
        let mut rows = Vec::new();
        for (key, value) in self.store.scan_prefix(USAGE_TREE, prefix.as_bytes())? {
            let row = parse_row(&key, &value)?;
            if day.is_none_or(|day| row.day == day) {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// Deletes the records of days before `oldest_kept` (of one user, or everyone); returns
    /// how many went.
    pub fn prune(
        &self,
        user_id: Option<&str>,
        oldest_kept: NaiveDate,
    ) -> Result<usize, StoreError> {
        let prefix = user_id.map(|user| format!("{user}\0")).unwrap_or_default();
        let mut ops = Vec::new();
        for (key, value) in self.store.scan_prefix(USAGE_TREE, prefix.as_bytes())? {
            if parse_row(&key, &value)?.day < oldest_kept {
                ops.push(BatchOp::Delete {
                    tree: USAGE_TREE,
                    key,
                });
            }
        }
        let pruned = ops.len();
        if pruned > 0 {
            self.store.apply_batch(ops)?;
        }
        Ok(pruned)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use antler_store::MemoryStore;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
        }
    }

    #[test]
    fn runs_add_up_per_user_day_and_model_in_one_record_each() {
        let usage_store = UsageStore::new(Arc::new(MemoryStore::new()));
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let before = day.pred_opt().unwrap();
        for _ in 0..3 {
            usage_store.record("u1", day, "gpt", &usage(10, 5)).unwrap();
        }
        usage_store
            .record("u1", day, "claude", &usage(1, 1))
            .unwrap();
        usage_store
            .record("u1", before, "gpt", &usage(100, 0))
            .unwrap();
        usage_store.record("u2", day, "gpt", &usage(7, 0)).unwrap();
        assert_eq!(usage_store.tokens_on("u1", day).unwrap(), 47);
        assert_eq!(usage_store.tokens_on("u2", day).unwrap(), 7);
        let rows = usage_store.rows(Some("u1"), Some(day)).unwrap();
        assert_eq!(rows.len(), 2, "one record per model, not per run");
        let gpt = rows.iter().find(|r| r.model == "gpt").unwrap();
        assert_eq!(gpt.totals.runs, 3);
        assert_eq!(usage_store.rows(None, Some(day)).unwrap().len(), 3);
        assert_eq!(usage_store.prune(Some("u2"), day).unwrap(), 0);
        assert_eq!(usage_store.prune(None, day).unwrap(), 1);
        assert_eq!(usage_store.rows(Some("u1"), None).unwrap().len(), 2);
    }
}
