//! The agent loop. PLACEHOLDER (owned by the loop work): types only.

use crate::state::ThreadState;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model gave a final answer.
    Completed,
    /// A hook ended the run to wait for the user (e.g. a clarification question).
    Interrupted,
    RecursionLimit,
    Cancelled,
    Error,
}

pub struct RunOutcome {
    pub state: ThreadState,
    pub stop: StopReason,
    pub error: Option<String>,
}
