//! Starting a run of the API and following it to its end: its record written before it is
//! acknowledged, the busy-thread strategies (`multitask_strategy`), its events encoded into its
//! frame buffer, its end status written, a rollback applied, a stateless run's thread removed.
//!
//! Each run has one follower task, tracked with the harness's runs (shutdown waits for it as
//! for them). A run that has to wait for its thread (`enqueue`, `interrupt`, `rollback`) is
//! followed from the start by the same task, which waits its turn in the thread's FIFO, then
//! for the run before it to end (its follower's end, or every [`BUSY_POLL`] for a run started
//! elsewhere, such as a chat), then starts it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::run_live::{ApiRuns, LiveRun, lock};
use super::stream::{Encoder, Frame, StreamRequest};
use super::thread_runs::run_error;
use crate::agent::RunOutcome;
use crate::agent_api::{RunEvent, StopReason};
use crate::api_runs::{ApiRun, MultitaskStrategy, RunStatus, rollback};
use crate::harness::{RunError, RunHandle, RunRequest};
use crate::http::ApiError;
use antler_store::ThreadStatus;

/// How often a run waiting for a thread busy with a run started elsewhere looks again.
pub(crate) const BUSY_POLL: Duration = Duration::from_millis(200);

/// What starting a run of the API takes.
pub(crate) struct RunStart {
    pub(crate) request: RunRequest,
    pub(crate) assistant_id: String,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) kwargs: Map<String, Value>,
    pub(crate) strategy: MultitaskStrategy,
    /// Its frames are kept for readers (`None`: nobody streams it, as for `/runs/wait`).
    pub(crate) stream: Option<StreamRequest>,
    /// Its thread goes when it ends (a stateless run without `on_completion: keep`).
    pub(crate) temporary: bool,
}

/// A run acknowledged: started, or waiting for its thread.
pub(crate) struct Started {
    pub(crate) run: Arc<LiveRun>,
    /// Its outcome, when asked for.
    pub(crate) outcome: Option<oneshot::Receiver<RunOutcome>>,
}

impl ApiRuns {
    /// Starts a run (or, its thread busy and its strategy not `reject`, queues it) and returns
    /// once its record is written.
    pub(crate) async fn start(
        self: &Arc<Self>,
        mut start: RunStart,
        want_outcome: bool,
    ) -> Result<Started, ApiError> {
        let run_id = uuid::Uuid::new_v4().to_string();
        start.request.options.run_id = Some(run_id.clone());
        let now = Utc::now();
        let record = ApiRun {
            run_id,
            thread_id: start.request.thread_id.clone(),
            assistant_id: start.assistant_id.clone(),
            created_at: now,
            updated_at: now,
            status: RunStatus::Pending,
            metadata: std::mem::take(&mut start.metadata),
            multitask_strategy: start.strategy,
            kwargs: std::mem::take(&mut start.kwargs),
        };
        let run = Arc::new(LiveRun::new(
            record,
            &start.request.user_id,
            start.temporary,
        ));
        let outcome = want_outcome.then(|| {
            let (sender, receiver) = oneshot::channel();
            *lock(&run.outcome) = Some(sender);
            receiver
        });
        let thread_id = run.thread_id.clone();
        let busy = self.harness.active_run(&thread_id).is_some();
        if !busy || start.strategy == MultitaskStrategy::Reject {
            match self.start_now(&run, start.request.clone()).await {
                Ok(handle) => {
                    self.mark_running(&run)?;
                    self.insert(run.clone());
                    let follower = self.clone().follow(run.clone(), handle, start.stream);
                    self.harness.spawn_follower(follower);
                    return Ok(Started { run, outcome });
                }
                Err(RunError::Busy { .. }) if start.strategy != MultitaskStrategy::Reject => {}
                Err(error) => return Err(busy_detail(run_error(error), &start.strategy)),
            }
        }
        if matches!(
            start.strategy,
            MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback
        ) {
            self.interrupt_current(&thread_id, start.strategy == MultitaskStrategy::Rollback);
        }
        self.records
            .put(&run.record())
            .map_err(ApiError::internal)?;
        self.harness.threads().flush_soon();
        self.insert(run.clone());
        let waiter = self
            .clone()
            .wait_and_start(run.clone(), start.request, start.stream);
        self.harness.spawn_follower(waiter);
        Ok(Started { run, outcome })
    }

    /// Cancels the run in flight on `thread_id` (undoing it too with `rollback`).
    pub(crate) fn interrupt_current(&self, thread_id: &str, rollback: bool) {
        let Some(active) = self.harness.active_run(thread_id) else {
            return;
        };
        if rollback && let Some(run) = self.live(thread_id, &active) {
            run.request_rollback();
        }
        self.harness.cancel_run(thread_id, &active);
    }

    /// Notes the thread's head (for a rollback) and starts the run.
    async fn start_now(&self, run: &LiveRun, request: RunRequest) -> Result<RunHandle, RunError> {
        let head = rollback::head_before(self.harness.threads(), &run.thread_id)?;
        let handle = Box::pin(self.harness.start_run(request)).await?;
        *lock(&run.head_before) = Some(head);
        Ok(handle)
    }

    fn mark_running(&self, run: &LiveRun) -> Result<(), ApiError> {
        let mut record = lock(&run.record);
        record.status = RunStatus::Running;
        record.updated_at = Utc::now();
        self.records.put(&record).map_err(ApiError::internal)?;
        // Durable within milliseconds (group commit), as the thread's busy status is.
        self.harness.threads().flush_soon();
        Ok(())
    }

    /// A queued run: waits its turn in the thread's FIFO, then for the thread to free, then
    /// starts and is followed. A cancel meanwhile ends it `interrupted` without starting.
    async fn wait_and_start(
        self: Arc<Self>,
        run: Arc<LiveRun>,
        request: RunRequest,
        stream: Option<StreamRequest>,
    ) {
        let queue = self.queue_of(&run.thread_id);
        let turn = tokio::select! {
            turn = queue.lock_owned() => turn,
            () = run.waiting.cancelled() => return self.end_unstarted(&run, RunStatus::Interrupted, None),
        };
        loop {
            let before = self.running_on(&run.thread_id);
            let wait_for_thread = async {
                match before {
                    Some(before) => before.frames.ended().await,
                    None if self.harness.active_run(&run.thread_id).is_some() => {
                        tokio::time::sleep(BUSY_POLL).await;
                    }
                    None => {}
                }
            };
            tokio::select! {
                () = wait_for_thread => {}
                () = run.waiting.cancelled() => return self.end_unstarted(&run, RunStatus::Interrupted, None),
            }
            if self.harness.active_run(&run.thread_id).is_some() {
                continue;
            }
            match self.start_now(&run, request.clone()).await {
                Ok(handle) => {
                    if let Err(error) = self.mark_running(&run) {
                        tracing::warn!(error = %error.message, run_id = %run.run_id, "Could not record that a queued run started");
                    }
                    drop(turn);
                    return self.follow(run, handle, stream).await;
                }
                Err(RunError::Busy { .. }) => continue,
                Err(error) => {
                    let error = run_error(error);
                    return self.end_unstarted(&run, RunStatus::Error, Some(error));
                }
            }
        }
    }

    /// Ends a run that never started: its record, an `error` frame if it failed, its end.
    fn end_unstarted(&self, run: &LiveRun, status: RunStatus, error: Option<ApiError>) {
        if let Some(error) = error {
            run.frames.push(Frame {
                event: "error".into(),
                data: json!({"error": error.code, "message": error.message}).to_string(),
            });
        }
        self.end(run, status);
        self.finish(run, None);
    }

    /// Follows a started run: its events into its frames (when streamed), then its end.
    async fn follow(
        self: Arc<Self>,
        run: Arc<LiveRun>,
        handle: RunHandle,
        stream: Option<StreamRequest>,
    ) {
        let RunHandle {
            events, outcome, ..
        } = handle;
        let mut held = None;
        match stream {
            Some(request) => {
                let mut encoder = Encoder::new(request, &run.run_id, &run.thread_id);
                let mut events = events;
                let mut frames = Vec::new();
                while let Some(event) = events.recv().await {
                    // The end is sent once the record says so: a client that saw it reads
                    // the run's final status.
                    if matches!(event, RunEvent::Finished { .. }) {
                        held = Some(event);
                        break;
                    }
                    encoder.encode(&event, &mut frames);
                    for frame in frames.drain(..) {
                        run.frames.push(frame);
                    }
                }
                let outcome = outcome.await;
                let status = outcome
                    .as_ref()
                    .map_or(RunStatus::Error, |o| status_of(o.stop));
                self.end(&run, status);
                if let Some(event) = held {
                    encoder.encode(&event, &mut frames);
                    for frame in frames.drain(..) {
                        run.frames.push(frame);
                    }
                }
                self.finish(&run, outcome.ok());
            }
            None => {
                // Nobody reads the events of a run waited for: dropping them at once keeps the
                // run's streamed text from queueing up until it ends.
                drop(events);
                let outcome = outcome.await;
                let status = outcome
                    .as_ref()
                    .map_or(RunStatus::Error, |o| status_of(o.stop));
                self.end(&run, status);
                // A client joining its stream still learns how it ended.
                if let Ok(outcome) = &outcome {
                    run.frames.push(Frame {
                        event: "end".into(),
                        data: json!({"stop_reason": outcome.stop}).to_string(),
                    });
                }
                self.finish(&run, outcome.ok());
            }
        }
    }

    /// Writes a run's end: its final status, or, rolled back, the thread put back and the
    /// record removed; a stateless run's thread removed.
    fn end(&self, run: &LiveRun, status: RunStatus) {
        let mut record = lock(&run.record).clone();
        let rolled_back = run.rollback.load(Ordering::SeqCst);
        let written = if rolled_back {
            self.undo(run, &record)
        } else {
            record.status = status;
            record.updated_at = Utc::now();
            self.records.put(&record).map_err(|e| e.to_string())
        };
        if let Err(error) = written {
            tracing::warn!(%error, run_id = %run.run_id, "Could not record the end of a run");
        }
        self.harness.threads().flush_soon();
        if run.temporary {
            self.remove_thread(run, &record);
        }
        *lock(&run.record) = record;
    }

    /// Puts the thread back to before the run and removes the run's record.
    fn undo(&self, run: &LiveRun, record: &ApiRun) -> Result<(), String> {
        let head = lock(&run.head_before).clone();
        if let Some(head) = head {
            let threads = self.harness.threads();
            rollback::restore(threads, &run.thread_id, &run.run_id, head.as_ref())
                .map_err(|e| e.to_string())?;
            threads
                .set_status(&run.thread_id, ThreadStatus::Idle)
                .map_err(|e| e.to_string())?;
        }
        self.records.delete(record).map_err(|e| e.to_string())
    }

    /// A stateless run's thread (and its files and record) removed at its end.
    fn remove_thread(&self, run: &LiveRun, record: &ApiRun) {
        if let Err(error) = self.harness.delete_thread(&run.user_id, &run.thread_id) {
            tracing::warn!(%error, thread_id = %run.thread_id, "Could not remove a stateless run's thread");
            return;
        }
        let config = self.harness.config().current();
        if let Ok(paths) =
            crate::paths::ThreadPaths::new(&config.data_dir(), &run.user_id, &run.thread_id)
            && let Some(thread_dir) = paths.user_data().parent()
            && let Err(error) = std::fs::remove_dir_all(thread_dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(%error, thread_id = %run.thread_id, "Could not remove a stateless run's files");
        }
        if let Err(error) = self.records.forget_thread(&record.thread_id) {
            tracing::warn!(%error, run_id = %run.run_id, "Could not remove a stateless run's record");
        }
    }

    /// The run is over for its readers: frames closed, its outcome handed to its waiter.
    fn finish(&self, run: &LiveRun, outcome: Option<RunOutcome>) {
        run.frames.finish();
        *lock(&run.ended_at) = Some(Instant::now());
        let waiter = lock(&run.outcome).take();
        if let (Some(waiter), Some(outcome)) = (waiter, outcome) {
            let _ = waiter.send(outcome);
        }
    }
}

/// A run's status from how it stopped: a pause for a person (a clarification, an approval) is
/// a run that did its part; a cancel interrupts it.
pub(crate) fn status_of(stop: StopReason) -> RunStatus {
    match stop {
        StopReason::Cancelled => RunStatus::Interrupted,
        StopReason::Error | StopReason::RecursionLimit => RunStatus::Error,
        StopReason::Completed
        | StopReason::Interrupted
        | StopReason::LoopCapped
        | StopReason::TokenCapped
        | StopReason::SubagentLimitCapped
        | StopReason::AwaitingApproval
        | StopReason::BudgetExceeded => RunStatus::Success,
    }
}

/// A busy thread's refusal names the strategies that would have waited.
fn busy_detail(error: ApiError, strategy: &MultitaskStrategy) -> ApiError {
    if error.code == "thread_busy" && *strategy == MultitaskStrategy::Reject {
        return ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "thread_busy",
            format!(
                "{}; or send multitask_strategy \"enqueue\" (wait for it), \"interrupt\" or \"rollback\" (replace it)",
                error.message
            ),
        );
    }
    error
}
