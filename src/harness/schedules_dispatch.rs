//! Starting claimed slots: at most `scheduler.max_concurrent` at once, the waiting ones in
//! slot order; the owner's budget checked first (a spent one skips the slot with a notice, it
//! is not queued); a chat's slot handed to the channel layer (its permit held until the chat
//! reports the end), any other run here in the background and finished from its outcome.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use super::progress::{Progress, question_progress};
use super::schedules::{Queued, SCHEDULE_FIRE_META, lock};
use super::{Harness, Inner, RunError, RunHandle};
use crate::agent::RunOutcome;
use crate::agent_api::StopReason;
use crate::scheduler::timing::local_label;
use crate::scheduler::{Fire, FireOutcome, Schedule};
use crate::usage::{UsageStore, budget_notice};

/// How long a chat's slot keeps its permit without the chat reporting its end: a safety net
/// (a chat turn that never reports would otherwise hold a permit for good); the slot stays
/// claimed and the chat layer may still finish it.
const CHAT_FIRE_PATIENCE: Duration = Duration::from_secs(30 * 60);
/// A slot whose thread has a run in progress (a person talking there) waits for it this long,
/// looking again every [`BUSY_RETRY`].
const BUSY_PATIENCE: Duration = Duration::from_secs(10 * 60);
const BUSY_RETRY: Duration = Duration::from_secs(5);

/// The dispatcher's task: takes a permit, then the earliest queued slot, and starts it.
pub(super) async fn dispatcher(
    weak: Weak<Inner>,
    stop: CancellationToken,
    queued: Arc<Notify>,
    max_concurrent: usize,
) {
    let permits = Arc::new(Semaphore::new(max_concurrent));
    loop {
        let permit = tokio::select! {
            () = stop.cancelled() => return,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let (item, active) = loop {
            {
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                if let Some(item) = next_startable(&inner) {
                    let active = ActiveSchedule {
                        inner: Arc::downgrade(&inner),
                        schedule_id: item.schedule.id.clone(),
                    };
                    break (item, active);
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = queued.notified() => {}
            }
        };
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let harness = Harness { inner };
        let tracker = harness.inner.runner.tracker.clone();
        tracker.spawn(harness.dispatch(item, FirePermit { permit, active }));
    }
}

/// The earliest queued slot whose schedule has no slot running (marked running now).
fn next_startable(inner: &Inner) -> Option<Queued> {
    let mut queue = lock(&inner.runner.queue);
    let mut active = lock(&inner.runner.active);
    let key = queue
        .iter()
        .find(|(_, item)| !active.contains(&item.schedule.id))
        .map(|(key, _)| key.clone())?;
    let item = queue.remove(&key)?;
    active.insert(item.schedule.id.clone());
    Some(item)
}

/// What a started slot holds until it ends: its concurrency permit and its schedule's turn.
pub(super) struct FirePermit {
    permit: OwnedSemaphorePermit,
    active: ActiveSchedule,
}

/// Its schedule's turn: released (and the dispatcher woken for the schedule's next slot) when
/// the slot ends, however it ends.
struct ActiveSchedule {
    inner: Weak<Inner>,
    schedule_id: String,
}

impl Drop for ActiveSchedule {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            lock(&inner.runner.active).remove(&self.schedule_id);
            inner.runner.queued.notify_one();
        }
    }
}

impl FirePermit {
    fn release(self) {
        let FirePermit { permit, active } = self;
        drop(permit);
        drop(active);
    }
}

impl Harness {
    /// Starts one claimed slot (holding `permit` until it ends).
    async fn dispatch(self, item: Queued, permit: FirePermit) {
        let Queued { schedule, fire } = item;
        let store = self.inner.scheduler.store();
        let schedule = match store.get(&schedule.id) {
            Ok(Some(current)) => current,
            Ok(None) => {
                self.finish_fire(
                    &fire,
                    FireOutcome::Missed,
                    Some("the schedule was removed before this slot ran".into()),
                );
                return;
            }
            Err(error) => {
                tracing::warn!(%error, schedule = %schedule.id, "Could not read a schedule again; running it as claimed");
                schedule
            }
        };
        let config = self.inner.config.current();
        let usage = UsageStore::new(self.inner.threads.store().clone());
        match budget_notice(&usage, &config, &schedule.owner) {
            Ok(Some(notice)) => return self.skip_for_budget(&schedule, &fire, &notice),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, owner = %schedule.owner, "Could not read the owner's usage; running the slot")
            }
        }
        if schedule.target.chat_key().is_some() {
            if let Some(hook) = self.chat_schedule() {
                return self.fire_in_chat(hook, &schedule, &fire, permit).await;
            }
            tracing::warn!(fire = %fire.key(), "No chat layer is running: the scheduled slot runs in its thread only");
        }
        self.run_in_thread(&schedule, fire, permit).await;
    }

    /// Hands the slot to its chat and keeps its permit until the chat reports the end.
    async fn fire_in_chat(
        &self,
        hook: Arc<dyn crate::scheduler::ChatSchedule>,
        schedule: &Schedule,
        fire: &Fire,
        permit: FirePermit,
    ) {
        let key = fire.key();
        let (ended, wait) = oneshot::channel();
        lock(&self.inner.runner.held).insert(key.clone(), ended);
        if let Err(error) = hook.fire(schedule, fire) {
            tracing::warn!(%error, fire = %key, "Could not hand a scheduled slot to its chat");
            self.finish_fire(fire, FireOutcome::Failed, Some(error.to_string()));
            return;
        }
        let stop = self.inner.runner.stop.clone();
        tokio::select! {
            _ = wait => {}
            () = stop.cancelled() => {}
            () = tokio::time::sleep(CHAT_FIRE_PATIENCE) => {
                tracing::warn!(fire = %key, "A chat's scheduled slot did not report its end in time; freeing its place");
            }
        }
        lock(&self.inner.runner.held).remove(&key);
        permit.release();
    }

    /// Runs the slot in its thread as a background run, continuing what a restart left: a
    /// thread that holds the fire's answer is finished as ran, one that holds its question
    /// runs on without input.
    async fn run_in_thread(&self, schedule: &Schedule, fire: Fire, permit: FirePermit) {
        let mut request = self.schedule_run_request(schedule, &fire);
        match self.progress(&fire).await {
            Progress::Answered => {
                self.finish_fire(
                    &fire,
                    FireOutcome::Ran,
                    Some("answered before a restart".into()),
                );
                return;
            }
            Progress::Asked => request.input.clear(),
            Progress::NotStarted => {}
        }
        let stop = self.inner.runner.stop.clone();
        let mut waited = Duration::ZERO;
        let handle = loop {
            match self.start_run(request.clone()).await {
                Ok(handle) => break handle,
                Err(RunError::Busy { .. }) if waited < BUSY_PATIENCE => {
                    tokio::select! {
                        // Stays claimed: the next start runs it.
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(BUSY_RETRY) => waited += BUSY_RETRY,
                    }
                }
                Err(RunError::BudgetSpent { notice }) => {
                    return self.skip_for_budget(schedule, &fire, &notice);
                }
                Err(RunError::ShuttingDown) => return,
                Err(error) => {
                    self.fail_in_thread(schedule, &fire, &error.to_string());
                    return;
                }
            }
        };
        // The rest belongs with the run: on the harness's run tracker, so the shutdown's grace
        // waits for the slot's end as for the run's.
        let harness = self.clone();
        let schedule = schedule.clone();
        self.inner.tracker.spawn(async move {
            let RunHandle {
                mut events,
                outcome,
                ..
            } = handle;
            while events.recv_boxed().await.is_some() {}
            match outcome.await {
                Ok(outcome) => harness.end_of_run(&schedule, &fire, &outcome),
                Err(error) => harness.fail_in_thread(
                    &schedule,
                    &fire,
                    &format!("the run stopped unexpectedly: {error}"),
                ),
            }
            permit.release();
        });
    }

    /// Records a background run's end from how it stopped. A run cancelled by the shutdown
    /// leaves the slot claimed: the next start continues it.
    fn end_of_run(&self, schedule: &Schedule, fire: &Fire, outcome: &RunOutcome) {
        let detail = match outcome.stop {
            StopReason::Completed
            | StopReason::LoopCapped
            | StopReason::TokenCapped
            | StopReason::SubagentLimitCapped => None,
            StopReason::Interrupted => Some("stopped to wait for a person".to_string()),
            StopReason::AwaitingApproval => Some("waiting for an approval".to_string()),
            StopReason::BudgetExceeded => Some("stopped at the budget".to_string()),
            StopReason::Cancelled if !self.is_accepting() => return,
            StopReason::Cancelled => {
                return self.fail_in_thread(schedule, fire, "the run was cancelled");
            }
            StopReason::Error | StopReason::RecursionLimit => {
                let reason = outcome
                    .error
                    .as_ref()
                    .map_or_else(|| outcome.stop.as_str().to_string(), |e| e.message.clone());
                return self.fail_in_thread(schedule, fire, &reason);
            }
        };
        self.finish_fire(fire, FireOutcome::Ran, detail);
    }

    /// A failed slot of a thread's schedule: a short notice in the thread, then its record.
    fn fail_in_thread(&self, schedule: &Schedule, fire: &Fire, reason: &str) {
        let text = format!(
            "⚠ Schedule {} could not run for {}: {}",
            schedule.name,
            local_label(&schedule.timezone, fire.slot),
            crate::agent_api::shared::truncate_chars(reason, 300)
        );
        self.schedule_notice(schedule, fire, &format!("{}:failed", fire.key()), &text);
        self.finish_fire(fire, FireOutcome::Failed, Some(reason.to_string()));
    }

    /// The owner's budget is spent: the slot is skipped (not queued) and the conversation told.
    fn skip_for_budget(&self, schedule: &Schedule, fire: &Fire, notice: &str) {
        let text = format!(
            "⏭ Schedule {} skipped its run for {}: {notice}",
            schedule.name,
            local_label(&schedule.timezone, fire.slot),
        );
        self.schedule_notice(schedule, fire, &format!("{}:budget", fire.key()), &text);
        self.finish_fire(fire, FireOutcome::SkippedBudget, Some(notice.to_string()));
    }

    /// Whether the fire's question (and its answer) are in its thread.
    async fn progress(&self, fire: &Fire) -> Progress {
        let key = fire.key();
        let state = match self.thread_state(&fire.thread_id).await {
            Ok(Some(state)) => state,
            Ok(None) => return Progress::NotStarted,
            Err(error) => {
                tracing::warn!(%error, thread_id = %fire.thread_id, "Could not read a scheduled slot's thread; running it");
                return Progress::NotStarted;
            }
        };
        question_progress(&state, SCHEDULE_FIRE_META, &key)
    }

    fn is_accepting(&self) -> bool {
        self.inner
            .accepting
            .load(std::sync::atomic::Ordering::SeqCst)
    }
}
