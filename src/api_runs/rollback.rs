//! Undoing a run: the thread put back to the checkpoint it had before the run started.
//!
//! Before a run starts its thread's log head is noted (a cached clone or one point read, no
//! state copied). The log is append-only and the fold ignores records at or past a head's
//! `next_seq`, so the state of that head can be rebuilt any time later; saving it as a new
//! checkpoint removes the messages the run appended (a save keeps the slots of the messages
//! still present and removes the others), and channels go back to their values of then.

use antler_store::log::{self, Head};
use antler_store::state::{StateChanges, ThreadState};
use antler_store::threads::ThreadError;
use antler_store::{StepCheckpoint, ThreadStore};

#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    #[error(transparent)]
    Thread(#[from] ThreadError),
    #[error("the checkpoint log of thread {thread_id} is unreadable: {detail}")]
    Log { thread_id: String, detail: String },
}

/// The head to come back to if the run about to start is rolled back (`None`: the thread has
/// no checkpoint yet).
pub fn head_before(threads: &ThreadStore, thread_id: &str) -> Result<Option<Head>, ThreadError> {
    threads.head(thread_id)
}

/// Puts `thread_id` back to the state of `before` (the empty state for `None`), as a new
/// checkpoint of `run_id`. Call it once the run being undone has ended.
pub fn restore(
    threads: &ThreadStore,
    thread_id: &str,
    run_id: &str,
    before: Option<&Head>,
) -> Result<(), RollbackError> {
    let state = match before {
        None => ThreadState::default(),
        Some(head) => {
            let records = threads
                .store()
                .scan_prefix(log::LOG, &log::prefix(thread_id))
                .map_err(ThreadError::from)?;
            log::fold(head, &records)
                .map_err(|(_, error)| RollbackError::Log {
                    thread_id: thread_id.to_string(),
                    detail: error.to_string(),
                })?
                .state
        }
    };
    let step = before.map_or(0, |head| head.step);
    threads.save_step(StepCheckpoint {
        thread_id,
        run_id,
        step,
        state: &state,
        changes: &StateChanges::new(),
    })?;
    Ok(())
}
