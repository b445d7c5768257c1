//! Run records of the LangGraph-compatible API: one per run started through it, kept in the
//! store so a client can list, get and join its runs after they end, and after a restart.
//!
//! Records live in their own tree, keyed `{thread_id}/{created_at µs, 20 digits}/{run_id}`, so
//! a thread's runs list in creation order with one prefix scan. A run costs two store writes:
//! its record (and its entry in the in-flight index) when it is acknowledged, and its end
//! status (and the index entry removed) when it ends, each one batch. The in-flight index lets
//! the start-up sweep find the runs a stop left `pending`/`running` without reading every
//! record ever written.

pub mod rollback;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use antler_store::{BatchOp, StoreError, StoreRef};

/// `{thread_id}/{created µs}/{run_id}` → [`ApiRun`] (JSON).
pub const API_RUNS_TREE: &str = "api_runs";
/// The keys of [`API_RUNS_TREE`] whose run is `pending` or `running` → nothing.
pub const API_RUNS_LIVE_TREE: &str = "api_runs_live";

/// A run's life as the SDKs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Pending,
    Running,
    Success,
    Error,
    Interrupted,
    Timeout,
}

impl RunStatus {
    /// Whether the run is over (its record changes no more).
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Pending | RunStatus::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Timeout => "timeout",
        }
    }

    /// The status named `name` (a list filter), if any.
    pub fn parse(name: &str) -> Option<Self> {
        [
            RunStatus::Pending,
            RunStatus::Running,
            RunStatus::Success,
            RunStatus::Error,
            RunStatus::Interrupted,
            RunStatus::Timeout,
        ]
        .into_iter()
        .find(|status| status.as_str() == name)
    }
}

/// What a run does when its thread is busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultitaskStrategy {
    /// Refused (409) while another run is in flight.
    #[default]
    Reject,
    /// Waits `pending` and starts when the thread frees, after the runs enqueued before it.
    Enqueue,
    /// The run in flight is cancelled, keeping its progress; this one starts.
    Interrupt,
    /// The run in flight is cancelled and undone (its changes and its record removed).
    Rollback,
}

impl MultitaskStrategy {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "reject" => Some(Self::Reject),
            "enqueue" => Some(Self::Enqueue),
            "interrupt" => Some(Self::Interrupt),
            "rollback" => Some(Self::Rollback),
            _ => None,
        }
    }
}

/// One run as the SDKs' `Run` type has it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiRun {
    pub run_id: String,
    pub thread_id: String,
    pub assistant_id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub status: RunStatus,
    pub metadata: Map<String, Value>,
    pub multitask_strategy: MultitaskStrategy,
    /// What the run was asked (its input and options), as the SDK's `kwargs`.
    #[serde(default)]
    pub kwargs: Map<String, Value>,
}

impl ApiRun {
    /// The record's key: a thread's runs sort by creation.
    pub fn key(&self) -> Vec<u8> {
        let micros = self.created_at.timestamp_micros().max(0);
        format!("{}/{micros:020}/{}", self.thread_id, self.run_id).into_bytes()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunRecordError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("run record {key} is unreadable: {detail}")]
    Corrupt { key: String, detail: String },
}

/// The run records in a store.
#[derive(Clone)]
pub struct RunRecords {
    store: StoreRef,
}

impl RunRecords {
    pub fn new(store: StoreRef) -> Self {
        Self { store }
    }

    /// Writes `run` (created or changed); a run not yet final is also in the in-flight index.
    pub fn put(&self, run: &ApiRun) -> Result<(), RunRecordError> {
        let key = run.key();
        let value = serde_json::to_vec(run).map_err(|e| corrupt(&key, e))?;
        let live = if run.status.is_final() {
            BatchOp::Delete {
                tree: API_RUNS_LIVE_TREE,
                key: key.clone(),
            }
        } else {
            BatchOp::Put {
                tree: API_RUNS_LIVE_TREE,
                key: key.clone(),
                value: Vec::new(),
            }
        };
        self.store.apply_batch(vec![
            BatchOp::Put {
                tree: API_RUNS_TREE,
                key,
                value,
            },
            live,
        ])?;
        Ok(())
    }

    /// Removes `run`'s record (a run rolled back, or the run of a thread removed with it).
    pub fn delete(&self, run: &ApiRun) -> Result<(), RunRecordError> {
        let key = run.key();
        self.store.apply_batch(vec![
            BatchOp::Delete {
                tree: API_RUNS_TREE,
                key: key.clone(),
            },
            BatchOp::Delete {
                tree: API_RUNS_LIVE_TREE,
                key,
            },
        ])?;
        Ok(())
    }

    /// Removes every record of a thread (the thread is being removed).
    pub fn forget_thread(&self, thread_id: &str) -> Result<(), RunRecordError> {
        let prefix = format!("{thread_id}/");
        let mut ops = Vec::new();
        for (key, _) in self.store.scan_prefix(API_RUNS_TREE, prefix.as_bytes())? {
            ops.push(BatchOp::Delete {
                tree: API_RUNS_LIVE_TREE,
                key: key.clone(),
            });
            ops.push(BatchOp::Delete {
                tree: API_RUNS_TREE,
                key,
            });
        }
        if !ops.is_empty() {
            self.store.apply_batch(ops)?;
        }
        Ok(())
    }

    /// A thread's runs, oldest first.
    pub fn list(&self, thread_id: &str) -> Result<Vec<ApiRun>, RunRecordError> {
        let prefix = format!("{thread_id}/");
        self.store
            .scan_prefix(API_RUNS_TREE, prefix.as_bytes())?
            .into_iter()
            .map(|(key, value)| decode(&key, &value))
            .collect()
    }

    /// The run `run_id` of `thread_id`, if recorded.
    pub fn get(&self, thread_id: &str, run_id: &str) -> Result<Option<ApiRun>, RunRecordError> {
        let prefix = format!("{thread_id}/");
        let suffix = format!("/{run_id}");
        for (key, value) in self.store.scan_prefix(API_RUNS_TREE, prefix.as_bytes())? {
            if key.ends_with(suffix.as_bytes()) {
                return decode(&key, &value).map(Some);
            }
        }
        Ok(None)
    }

    /// Marks `interrupted` every run left `pending` or `running` whose thread `in_flight` says
    /// has no run in flight (a stop in the middle of it), and returns them. Called at start,
    /// before any run of this process.
    pub fn sweep(&self, in_flight: impl Fn(&str) -> bool) -> Result<Vec<ApiRun>, RunRecordError> {
        let mut swept = Vec::new();
        for (key, _) in self.store.scan_prefix(API_RUNS_LIVE_TREE, b"")? {
            let Some(value) = self.store.get(API_RUNS_TREE, &key)? else {
                self.store.delete(API_RUNS_LIVE_TREE, &key)?;
                continue;
            };
            let mut run = decode(&key, &value)?;
            if run.status.is_final() || in_flight(&run.thread_id) {
                continue;
            }
            run.status = RunStatus::Interrupted;
            run.updated_at = Utc::now();
            self.put(&run)?;
            swept.push(run);
        }
        Ok(swept)
    }
}

fn decode(key: &[u8], value: &[u8]) -> Result<ApiRun, RunRecordError> {
    serde_json::from_slice(value).map_err(|e| corrupt(key, e))
}

fn corrupt(key: &[u8], error: serde_json::Error) -> RunRecordError {
    RunRecordError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        detail: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn run(thread: &str, id: &str, micros: i64, status: RunStatus) -> ApiRun {
        let at = DateTime::from_timestamp_micros(micros).unwrap();
        ApiRun {
            run_id: id.into(),
            thread_id: thread.into(),
            assistant_id: "lead_agent".into(),
            created_at: at,
            updated_at: at,
            status,
            metadata: Map::new(),
            multitask_strategy: MultitaskStrategy::Reject,
            kwargs: Map::new(),
        }
    }

    #[test]
    fn a_threads_runs_list_in_order_and_the_sweep_ends_the_unfinished() {
        let records = RunRecords::new(Arc::new(antler_store::MemoryStore::new()));
        records
            .put(&run("t1", "b", 2_000, RunStatus::Running))
            .unwrap();
        records
            .put(&run("t1", "a", 1_000, RunStatus::Success))
            .unwrap();
        records
            .put(&run("t2", "c", 1_500, RunStatus::Pending))
            .unwrap();
        let ids: Vec<String> = records
            .list("t1")
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(
            records.get("t2", "c").unwrap().unwrap().status,
            RunStatus::Pending
        );
        assert!(records.get("t1", "c").unwrap().is_none());

        // t2 still has a run in flight (another instance's): only t1's is swept.
        let swept = records.sweep(|thread| thread == "t2").unwrap();
        assert_eq!(swept.len(), 1);
        assert_eq!(
            records.get("t1", "b").unwrap().unwrap().status,
            RunStatus::Interrupted
        );
        assert_eq!(
            records.get("t2", "c").unwrap().unwrap().status,
            RunStatus::Pending
        );
        // A second sweep finds nothing left of t1.
        assert!(records.sweep(|thread| thread == "t2").unwrap().is_empty());
        records.forget_thread("t1").unwrap();
        assert!(records.list("t1").unwrap().is_empty());
        assert_eq!(records.list("t2").unwrap().len(), 1);
    }
}
