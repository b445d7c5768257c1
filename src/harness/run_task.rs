//! One run's task, from the agent's first step to the thread's final status: the events relayed
//! to the caller, the sub-agents waited for, the status stored, and only then the run's end
//! reported. (Usage is recorded per model call, by the run's `Account`.)

use tokio::sync::mpsc::UnboundedSender;

use crate::agent::{Agent, RunOutcome};
use crate::agent_api::{RunContext, RunEvent, RunEvents, StopReason};
use crate::harness::RunGuard;
use crate::subagents::SubagentTasks;
use crate::usage::{Account, UsageKind, UsageStore};
use antler_store::messages::Message;
use antler_store::state::ThreadState;
use antler_store::{ThreadStatus, ThreadStore};

/// Everything the run task owns.
pub(super) struct RunTask {
    pub(super) agent: Agent,
    pub(super) subagents: Option<SubagentTasks>,
    pub(super) ctx: RunContext,
    pub(super) state: ThreadState,
    pub(super) input: Vec<Message>,
    /// What the agent emits.
    pub(super) agent_events: RunEvents,
    /// What the caller reads ([`crate::harness::RunHandle::events`]).
    pub(super) caller_events: UnboundedSender<Box<RunEvent>>,
    pub(super) threads: ThreadStore,
    /// Frees the thread for the next run when dropped.
    pub(super) guard: RunGuard,
}

impl RunTask {
    /// Runs the agent to its end. `Finished` is held back until the thread's final status is
    /// stored, so a client that sees the end of a run never reads a stale `busy` status.
    pub(super) async fn run(mut self) -> RunOutcome {
        let relay = relay(&mut self.agent_events, &self.caller_events);
        let (outcome, finished) =
            tokio::join!(self.agent.run(self.state, self.input, &self.ctx), relay);
        self.threads.checkin(&self.ctx.thread_id);
        if let Some(subagents) = &self.subagents {
            // Sub-agents of a cancelled run wind down after it; what they report (their end)
            // still belongs to this run.
            subagents.wait().await;
            while let Some(event) = self.agent_events.try_recv() {
                let _ = self.caller_events.send(Box::new(event));
            }
        }
        let failed = outcome.stop == StopReason::Error;
        crate::telemetry::spans::record_stop_current(outcome.stop.as_str(), failed);
        finish_run(&self.threads, &self.ctx.thread_id, outcome.stop);
        drop(self.guard);
        if let Some(finished) = finished {
            let _ = self.caller_events.send(finished);
        }
        outcome
    }
}

/// Makes the run's speaker (and its custom agent) pay for its model calls, as the kind of
/// run it is: a schedule's slot, a webhook delivery (`hooks::WEBHOOK_CHANNEL`), or a person's.
pub(super) fn meter(ctx: &mut RunContext, store: &antler_store::StoreRef) {
    ctx.usage_kind = if ctx.options.schedule_fire.is_some() {
        UsageKind::Scheduled
    } else if ctx.options.channel_name.as_deref() == Some("webhook") {
        UsageKind::Webhook
    } else {
        UsageKind::Lead
    };
    let account = Account::new(
        UsageStore::new(store.clone()),
        ctx.config.clone(),
        &ctx.users.speaker,
        ctx.agent_name.as_deref(),
        &ctx.thread_id,
    );
    ctx.meter = Some(std::sync::Arc::new(account));
}

/// Forwards the agent's events to the caller until `Finished`, which it returns instead of
/// forwarding.
async fn relay(
    agent_events: &mut RunEvents,
    caller_events: &UnboundedSender<Box<RunEvent>>,
) -> Option<Box<RunEvent>> {
    while let Some(event) = agent_events.recv_boxed().await {
        if matches!(*event, RunEvent::Finished { .. }) {
            return Some(event);
        }
        let _ = caller_events.send(event);
    }
    None
}

/// Records the thread's final status. Durability comes from the store's group-commit flusher
/// (a few milliseconds later) instead of an fsync per run: under load one flush covers many runs,
/// and a crash in that window only loses the status change, which `reset_busy` repairs at start.
/// Written inline: a record write takes microseconds, and a blocking-pool hop per run made a
/// burst of runs spawn hundreds of threads (each with its own allocator arena).
fn finish_run(threads: &ThreadStore, thread_id: &str, stop: StopReason) {
    let status = match stop {
        // Waiting for a person: a clarification question or an approval to answer, or a
        // cancelled run waiting for the next message (what LangGraph clients read as
        // `interrupted`; the next run brings the thread back to `idle`).
        StopReason::Interrupted | StopReason::Cancelled | StopReason::AwaitingApproval => {
            ThreadStatus::Interrupted
        }
        reason if reason.is_answered() => ThreadStatus::Idle,
        _ => ThreadStatus::Error,
    };
    if let Err(error) = threads.set_status(thread_id, status) {
        tracing::warn!(%error, "Could not record the end of a run");
    }
    threads.flush_soon();
}

impl super::Harness {
    /// Spawns a task that follows a run from outside the harness (the API's record of it, its
    /// frames for the clients streaming it), tracked with the runs: shutdown waits for it as
    /// for them, and it ends when the run it follows does.
    pub fn spawn_follower<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tracker.spawn(task);
    }
}
