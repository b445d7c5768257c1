//! Changes to a thread's state made outside a run (a client renaming a thread through the
//! LangGraph API's state update). Each is a checkpoint of its own, saved as a run's step is,
//! so the next run starts from it and the state's readers see it like any other step.

use std::sync::Arc;

use antler_store::StepCheckpoint;
use antler_store::log::Head;
use antler_store::state::{StateChanges, ThreadState};

use super::{Harness, RunError};

impl Harness {
    /// Applies `change` to the thread's latest state and saves the result as a new checkpoint
    /// (no run id: readers tell it apart as a client's update). `Busy` while a run holds the
    /// thread: the run's next save would conflict with this one, and its answer would be
    /// written on top of a state it never read. Returns the new head.
    pub fn update_thread_state(
        &self,
        user_id: &str,
        thread_id: &str,
        change: impl FnOnce(&mut ThreadState),
    ) -> Result<Head, RunError> {
        let not_found = || RunError::NotFound {
            thread_id: thread_id.to_string(),
        };
        if self.get_thread(user_id, thread_id)?.is_none() {
            return Err(not_found());
        }
        // Held throughout, as `delete_thread` holds it: no run starts mid-update.
        let runs = self.runs();
        if runs.contains_key(thread_id) {
            return Err(RunError::Busy {
                thread_id: thread_id.to_string(),
            });
        }
        let held = self.hold_thread(thread_id)?;
        let threads = &self.inner.threads;
        let (step, mut state) = match threads.state(thread_id)? {
            Some((head, state)) => (head.step + 1, Arc::unwrap_or_clone(state)),
            None => (0, ThreadState::default()),
        };
        change(&mut state);
        threads.save_step(StepCheckpoint {
            thread_id,
            run_id: "",
            step,
            state: &state,
            changes: &StateChanges::new(),
        })?;
        drop(held);
        drop(runs);
        threads.head(thread_id)?.ok_or_else(not_found)
    }
}
