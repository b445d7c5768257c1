//! `UsageStore`: usage per user, UTC day, model and kind of call, in the `usage` tree.
//!
//! One record per (user, day, model, kind), updated in place with compare-and-set (two calls of
//! one user in two daemons never lose an update): the data grows with days and models, never
//! with calls, and nothing of it is held in memory. Records written before the kind was kept
//! (`user/day/model`) read as `lead`. The cost of a call is computed from `pricing` when it is
//! recorded and stored with the record, so a later price change does not rewrite history.
//! Days older than the longest report window ([`MAX_DAYS`](crate::usage::MAX_DAYS)) are
//! dropped when a user's first call of a day is recorded.

use chrono::{NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::usage::UsageKind;
use crate::usage::ledger::{cas_update, corrupt};
use antler_store::messages::Usage;
use antler_store::{BatchOp, StoreError, StoreRef};

pub const USAGE_TREE: &str = "usage";

/// What a user spent on one model, for one kind of call, in one day.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The part of `input_tokens` served from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Model calls (records written when usage was summed per run counted runs here).
    #[serde(alias = "runs")]
    pub calls: u64,
    /// Seconds of voice notes and audio transcribed with this (transcription) model.
    #[serde(default)]
    pub audio_seconds: u64,
    /// What the calls cost in `pricing.currency` at the time of each call; `None` in records
    /// written before costs were stored (reports price those at today's prices).
    #[serde(default)]
    pub cost: Option<f64>,
    /// Calls of a model `pricing` had no price for (counted in tokens only).
    #[serde(default)]
    pub unpriced_calls: u64,
}

impl UsageTotals {
    fn add(&mut self, usage: &Usage, cost: Option<f64>) {
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.total_tokens += usage.total_tokens;
        self.cached_input_tokens += usage.cached_input_tokens;
        self.calls += 1;
        match cost {
            Some(cost) => *self.cost.get_or_insert(0.0) += cost,
            None => self.unpriced_calls += 1,
        }
    }

    pub(crate) fn merge(&mut self, other: &UsageTotals) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.calls += other.calls;
        self.audio_seconds += other.audio_seconds;
        self.unpriced_calls += other.unpriced_calls;
        if let Some(cost) = other.cost {
            *self.cost.get_or_insert(0.0) += cost;
        }
    }
}

/// One row of a usage report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UsageRow {
    pub user_id: String,
    pub day: NaiveDate,
    pub model: String,
    pub kind: UsageKind,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

#[derive(Clone)]
pub struct UsageStore {
    pub(crate) store: StoreRef,
}

/// Today in UTC: the daily budgets' window.
pub fn today() -> NaiveDate {
    Utc::now().date_naive()
}

fn key(user_id: &str, day: NaiveDate, model: &str, kind: UsageKind) -> Vec<u8> {
    format!("{user_id}\0{day}\0{model}\0{kind}").into_bytes()
}

fn parse_row(key: &[u8], value: &[u8]) -> Result<UsageRow, StoreError> {
    let text = std::str::from_utf8(key).map_err(|e| corrupt(key, e))?;
    let mut parts = text.splitn(4, '\0');
    let (Some(user_id), Some(day), Some(model)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(corrupt(key, "the key is not user/day/model[/kind]"));
    };
    let kind = match parts.next() {
        None => UsageKind::Lead,
        Some(kind) => UsageKind::parse(kind).ok_or_else(|| corrupt(key, "unknown kind"))?,
    };
    let day = day.parse().map_err(|e| corrupt(key, e))?;
    let totals = serde_json::from_slice(value).map_err(|e| corrupt(key, e))?;
    Ok(UsageRow {
        user_id: user_id.to_string(),
        day,
        model: model.to_string(),
        kind,
        totals,
    })
}

impl UsageStore {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    /// Adds one `kind` call of `model` (costing `cost`, `None` when the model has no price) to
    /// `user_id`'s totals for `day`; `true` when that made a new record.
    pub fn record_call(
        &self,
        user_id: &str,
        day: NaiveDate,
        model: &str,
        kind: UsageKind,
        usage: &Usage,
        cost: Option<f64>,
    ) -> Result<bool, StoreError> {
        self.update(user_id, day, model, kind, |totals| totals.add(usage, cost))
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
        self.update(user_id, day, model, UsageKind::Transcription, |totals| {
            totals.audio_seconds += seconds
        })
    }

    fn update(
        &self,
        user_id: &str,
        day: NaiveDate,
        model: &str,
        kind: UsageKind,
        change: impl Fn(&mut UsageTotals),
    ) -> Result<bool, StoreError> {
        let key = key(user_id, day, model, kind);
        let (before, _) = cas_update(&self.store, USAGE_TREE, &key, change)?;
        Ok(before.is_none())
    }

    /// Tokens `user_id` spent on `day`, every model and kind.
    pub fn tokens_on(&self, user_id: &str, day: NaiveDate) -> Result<u64, StoreError> {
        Ok(self
            .rows(Some(user_id), Some(day))?
            .iter()
            .map(|row| row.totals.total_tokens)
            .sum())
    }

    /// Rows of one user (or everyone) for one day (or every kept day), in key order; a
    /// record of the old layout and a new one of the same model and kind are one row.
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
        let mut rows: Vec<UsageRow> = Vec::new();
        for (key, value) in self.store.scan_prefix(USAGE_TREE, prefix.as_bytes())? {
            let row = parse_row(&key, &value)?;
            if day.is_some_and(|day| row.day != day) {
                continue;
            }
            // Key order puts `user/day/model` right before `user/day/model/lead`.
            let same = |r: &UsageRow| {
                (r.user_id == row.user_id) && r.day == row.day && r.model == row.model
            };
            match rows
                .iter_mut()
                .rev()
                .find(|r| same(r) && r.kind == row.kind)
            {
                Some(existing) => existing.totals.merge(&row.totals),
                None => rows.push(row),
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
            ..Default::default()
        }
    }

    #[test]
    fn calls_add_up_per_user_day_model_and_kind_in_one_record_each() {
        let usage_store = UsageStore::new(Arc::new(MemoryStore::new()));
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let before = day.pred_opt().unwrap();
        let lead = UsageKind::Lead;
        for _ in 0..3 {
            let spent = usage(10, 5);
            usage_store
                .record_call("u1", day, "gpt", lead, &spent, Some(0.5))
                .unwrap();
        }
        let title = usage(1, 1);
        usage_store
            .record_call("u1", day, "gpt", UsageKind::Title, &title, None)
            .unwrap();
        let old = usage(100, 0);
        usage_store
            .record_call("u1", before, "gpt", lead, &old, None)
            .unwrap();
        let other = usage(7, 0);
        usage_store
            .record_call("u2", day, "gpt", lead, &other, None)
            .unwrap();
        assert_eq!(usage_store.tokens_on("u1", day).unwrap(), 47);
        assert_eq!(usage_store.tokens_on("u2", day).unwrap(), 7);
        let rows = usage_store.rows(Some("u1"), Some(day)).unwrap();
        assert_eq!(rows.len(), 2, "one record per model and kind, not per call");
        let gpt = rows.iter().find(|r| r.kind == lead).unwrap();
        assert_eq!(gpt.totals.calls, 3);
        assert_eq!(gpt.totals.cost, Some(1.5), "stored at record time");
        let titles = rows.iter().find(|r| r.kind == UsageKind::Title).unwrap();
        assert_eq!(
            (titles.totals.cost, titles.totals.unpriced_calls),
            (None, 1)
        );
        assert_eq!(usage_store.rows(None, Some(day)).unwrap().len(), 3);
        assert_eq!(usage_store.prune(Some("u2"), day).unwrap(), 0);
        assert_eq!(usage_store.prune(None, day).unwrap(), 1);
        assert_eq!(usage_store.rows(Some("u1"), None).unwrap().len(), 2);
    }

    /// Records of the layout before kinds (`user/day/model`, `runs`) read as `lead` calls and
    /// merge with new ones of the same model.
    #[test]
    fn old_records_read_as_lead_calls() {
        let store: StoreRef = Arc::new(MemoryStore::new());
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let old = br#"{"input_tokens":9,"output_tokens":1,"total_tokens":10,"runs":2}"#;
        store
            .put(USAGE_TREE, format!("u\0{day}\0gpt").as_bytes(), old)
            .unwrap();
        let usage_store = UsageStore::new(store);
        let spent = usage(4, 1);
        usage_store
            .record_call("u", day, "gpt", UsageKind::Lead, &spent, Some(0.25))
            .unwrap();
        let rows = usage_store.rows(Some("u"), Some(day)).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].kind, UsageKind::Lead);
        assert_eq!(rows[0].totals.calls, 3);
        assert_eq!(rows[0].totals.total_tokens, 15);
        assert_eq!(rows[0].totals.cost, Some(0.25));
    }
}
