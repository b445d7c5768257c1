//! The budget ledger: what each user and each custom agent spent this calendar month and this
//! UTC day (tokens and money), one small record per payer and month in the `usage_ledger` tree.
//!
//! A budget check before a model call reads at most two of these records (the user's, the
//! agent's) instead of summing usage rows; every recorded call adds to them with one
//! compare-and-set each, so several daemons on one store agree on what is left. The `usage_threads` tree keeps each thread's totals per user and
//! day (`/usage`'s top threads); `usage_warnings` the 80 % warnings already given, claimed
//! with an insert-if-absent so two daemons never both warn.

use chrono::{Datelike, NaiveDate};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use antler_store::{BatchOp, Expect, StoreError, StoreRef};

pub const LEDGER_TREE: &str = "usage_ledger";
pub const THREADS_TREE: &str = "usage_threads";
pub const WARNINGS_TREE: &str = "usage_warnings";
/// A CAS that keeps failing means something rewrites the key in a loop; give up loudly.
const MAX_ATTEMPTS: usize = 16;

/// Tokens and money spent in one period (or on one thread in one day).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    pub tokens: u64,
    pub cost: f64,
}

/// Whose spending a ledger record sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payer<'a> {
    User(&'a str),
    /// A custom agent, over all its users (by its name, lower-cased).
    Agent(&'a str),
}

/// The window a limit covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    Day(NaiveDate),
    Month(NaiveDate),
}

impl Period {
    /// `2026-12-06` for a day, `2026-12` for a month.
    pub fn label(self) -> String {
        match self {
            Period::Day(day) => day.to_string(),
            Period::Month(day) => format!("{:04}-{:02}", day.year(), day.month()),
        }
    }

    /// When the period's limit starts over.
    pub fn resets(self) -> NaiveDate {
        match self {
            Period::Day(day) => day.succ_opt().unwrap_or(day),
            Period::Month(day) => {
                let (year, month) = match day.month() {
                    12 => (day.year() + 1, 1),
                    month => (day.year(), month + 1),
                };
                NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(day)
            }
        }
    }
}

pub(crate) fn corrupt(key: &[u8], detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        key: String::from_utf8_lossy(key).replace('\0', "/"),
        detail: detail.to_string(),
    }
}

pub fn ledger_key(payer: Payer<'_>, period: Period) -> Vec<u8> {
    let (scope, id) = match payer {
        Payer::User(id) => ("u", id),
        Payer::Agent(name) => ("a", name),
    };
    format!("{scope}\0{id}\0{}", period.label()).into_bytes()
}

pub fn thread_key(user_id: &str, day: NaiveDate, thread_id: &str) -> Vec<u8> {
    format!("{user_id}\0{day}\0{thread_id}").into_bytes()
}

/// Reads one record; the default when there is none.
pub fn read<T: DeserializeOwned + Default>(
    store: &StoreRef,
    tree: &str,
    key: &[u8],
) -> Result<T, StoreError> {
    match store.get(tree, key)? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| corrupt(key, e)),
        None => Ok(T::default()),
    }
}

/// Changes one JSON record with compare-and-set, retrying when another writer got in between;
/// returns the record before (`None`: there was none) and after.
pub fn cas_update<T: Serialize + DeserializeOwned + Default + Clone>(
    store: &StoreRef,
    tree: &'static str,
    key: &[u8],
    change: impl Fn(&mut T),
) -> Result<(Option<T>, T), StoreError> {
    for _ in 0..MAX_ATTEMPTS {
        let current = store.get(tree, key)?;
        let before: Option<T> = match &current {
            Some(bytes) => Some(serde_json::from_slice(bytes).map_err(|e| corrupt(key, e))?),
            None => None,
        };
        let mut after = before.clone().unwrap_or_default();
        change(&mut after);
        let value = serde_json::to_vec(&after).map_err(|e| corrupt(key, e))?;
        let expect = Expect {
            tree,
            key: key.to_vec(),
            value: current,
        };
        let put = BatchOp::Put {
            tree,
            key: key.to_vec(),
            value,
        };
        if store.apply_batch_if(&expect, vec![put])? {
            return Ok((before, after));
        }
    }
    Err(StoreError::Io(format!(
        "usage record {} kept changing under {MAX_ATTEMPTS} attempts to add a call; retry",
        String::from_utf8_lossy(key).replace('\0', "/")
    )))
}

/// One payer's month: its total, and the total of the latest day it spent on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerRecord {
    pub month: Spent,
    /// The day `today` counts (`None` before the first call).
    pub day: Option<NaiveDate>,
    pub today: Spent,
}

impl LedgerRecord {
    /// What was spent on `day` (nothing when the record counts another day).
    pub fn on(&self, day: NaiveDate) -> Spent {
        if self.day == Some(day) {
            self.today
        } else {
            Spent::default()
        }
    }
}

/// A payer's ledger record of `day`'s month.
pub fn ledger_record(
    store: &StoreRef,
    payer: Payer<'_>,
    day: NaiveDate,
) -> Result<LedgerRecord, StoreError> {
    read(store, LEDGER_TREE, &ledger_key(payer, Period::Month(day)))
}

/// Adds a call's tokens and cost to the payer's month and day; returns the record after.
pub fn add_call(
    store: &StoreRef,
    payer: Payer<'_>,
    day: NaiveDate,
    tokens: u64,
    cost: f64,
) -> Result<LedgerRecord, StoreError> {
    let key = ledger_key(payer, Period::Month(day));
    let (_, after) = cas_update(store, LEDGER_TREE, &key, |record: &mut LedgerRecord| {
        if record.day != Some(day) {
            record.day = Some(day);
            record.today = Spent::default();
        }
        for spent in [&mut record.month, &mut record.today] {
            spent.tokens += tokens;
            spent.cost += cost;
        }
    })?;
    Ok(after)
}

/// Adds a call's tokens and cost to a record; returns what it held after.
pub fn add(
    store: &StoreRef,
    tree: &'static str,
    key: &[u8],
    tokens: u64,
    cost: f64,
) -> Result<Spent, StoreError> {
    let (_, after) = cas_update(store, tree, key, |spent: &mut Spent| {
        spent.tokens += tokens;
        spent.cost += cost;
    })?;
    Ok(after)
}

/// Claims the warning `key` (once ever: the key names its period); `true` for the one caller
/// that claimed it.
pub fn claim_warning(store: &StoreRef, key: &[u8]) -> Result<bool, StoreError> {
    if store.get(WARNINGS_TREE, key)?.is_some() {
        return Ok(false);
    }
    let expect = Expect {
        tree: WARNINGS_TREE,
        key: key.to_vec(),
        value: None,
    };
    let put = BatchOp::Put {
        tree: WARNINGS_TREE,
        key: key.to_vec(),
        value: b"1".to_vec(),
    };
    store.apply_batch_if(&expect, vec![put])
}

/// The threads of `user_id` on `day`, most spent first.
pub fn top_threads(
    store: &StoreRef,
    user_id: &str,
    day: NaiveDate,
) -> Result<Vec<(String, Spent)>, StoreError> {
    let prefix = format!("{user_id}\0{day}\0");
    let mut threads = Vec::new();
    for (key, value) in store.scan_prefix(THREADS_TREE, prefix.as_bytes())? {
        let spent: Spent = serde_json::from_slice(&value).map_err(|e| corrupt(&key, e))?;
        let thread = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
        threads.push((thread, spent));
    }
    threads.sort_by(|a, b| {
        (b.1.cost, b.1.tokens)
            .partial_cmp(&(a.1.cost, a.1.tokens))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(threads)
}

/// Drops what no budget or report reads any more for `user_id` (and their agent): ledger
/// days before yesterday and months before last month, thread totals and warnings of days
/// before `oldest_kept`.
pub fn prune(
    store: &StoreRef,
    payers: &[Payer<'_>],
    today: NaiveDate,
    oldest_thread_day: NaiveDate,
) -> Result<(), StoreError> {
    let yesterday = Period::Day(today.pred_opt().unwrap_or(today)).label();
    let last_month = Period::Month(
        NaiveDate::from_ymd_opt(today.year(), today.month(), 1)
            .and_then(|first| first.pred_opt())
            .unwrap_or(today),
    )
    .label();
    let mut ops = Vec::new();
    for payer in payers {
        let prefix = ledger_key(*payer, Period::Day(today));
        let prefix = &prefix[..prefix.len() - yesterday.len()];
        for tree in [LEDGER_TREE, WARNINGS_TREE] {
            for (key, _) in store.scan_prefix(tree, prefix)? {
                let label = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
                let label = label.split('\0').next().unwrap_or_default().to_string();
                let old = match label.len() {
                    10 => label < yesterday,
                    _ => label < last_month,
                };
                if old {
                    ops.push(BatchOp::Delete { tree, key });
                }
            }
        }
        if let Payer::User(user_id) = payer {
            let prefix = format!("{user_id}\0");
            for (key, _) in store.scan_prefix(THREADS_TREE, prefix.as_bytes())? {
                let day = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
                let day = day.split('\0').next().unwrap_or_default().to_string();
                if day < oldest_thread_day.to_string() {
                    ops.push(BatchOp::Delete {
                        tree: THREADS_TREE,
                        key,
                    });
                }
            }
        }
    }
    if !ops.is_empty() {
        store.apply_batch(ops)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use antler_store::MemoryStore;

    #[test]
    fn periods_reset_at_the_next_day_and_month() {
        let day = NaiveDate::from_ymd_opt(2026, 12, 31).unwrap();
        assert_eq!(Period::Day(day).resets().to_string(), "2027-01-01");
        assert_eq!(Period::Month(day).resets().to_string(), "2027-01-01");
        assert_eq!(Period::Month(day).label(), "2026-12");
        let mid = NaiveDate::from_ymd_opt(2026, 2, 10).unwrap();
        assert_eq!(Period::Month(mid).resets().to_string(), "2026-03-01");
    }

    #[test]
    fn records_add_up_per_day_and_month_and_old_ones_go() {
        let store: StoreRef = Arc::new(MemoryStore::new());
        let today = NaiveDate::from_ymd_opt(2026, 12, 6).unwrap();
        let yesterday = today.pred_opt().unwrap();
        let old = NaiveDate::from_ymd_opt(2026, 10, 1).unwrap();
        let user = Payer::User("u");
        add_call(&store, user, old, 7, 0.1).unwrap();
        add_call(&store, user, yesterday, 10, 0.5).unwrap();
        add_call(&store, user, today, 5, 0.25).unwrap();
        let record = add_call(&store, user, today, 5, 0.25).unwrap();
        assert_eq!(
            record.on(today),
            Spent {
                tokens: 10,
                cost: 0.5
            }
        );
        assert_eq!(
            record.on(yesterday),
            Spent::default(),
            "a new day starts at zero"
        );
        assert_eq!(
            record.month,
            Spent {
                tokens: 20,
                cost: 1.0
            }
        );
        assert!(claim_warning(&store, b"u\0u\x002026-10\0monthly_cost").unwrap());
        assert!(!claim_warning(&store, b"u\0u\x002026-10\0monthly_cost").unwrap());
        prune(&store, &[user], today, today).unwrap();
        let left = store.scan_prefix(LEDGER_TREE, b"").unwrap();
        assert_eq!(left.len(), 1, "October went, December stays");
        assert!(store.scan_prefix(WARNINGS_TREE, b"").unwrap().is_empty());
        assert_eq!(ledger_record(&store, user, today).unwrap(), record);
    }
}
