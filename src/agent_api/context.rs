//! What a hook or a tool may know about the run it is part of, passed explicitly.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent_api::{EventSink, RunOptions, StopReason};
use crate::config::AppConfig;
use antler_store::state::ThreadState;

/// Who a run involves. In a thread of one person (the HTTP API, the web chat, the console, a
/// direct chat) both are that person. In a shared conversation (a group chat) the thread belongs
/// to the chat (an owner id no person has) while each turn is the person who sent its message:
/// the history is shared, everything personal is the speaker's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunUsers {
    /// Owns the thread: its record, its files (`/mnt/user-data`), its sandbox and the skills
    /// that sandbox mounts.
    pub owner: String,
    /// Whose turn this is: whose memory is read and written, whose usage and budget it counts
    /// against, whose custom agents it may run, create or change.
    pub speaker: String,
    /// The thread is a conversation of several people: personal memory stays out of it unless
    /// `memory.inject_in_groups`, and the model sees each human message's sender.
    pub shared: bool,
}

impl RunUsers {
    /// A thread of one person: `user_id` owns it and speaks in it.
    pub fn alone(user_id: impl Into<String>) -> Self {
        let owner = user_id.into();
        Self {
            speaker: owner.clone(),
            owner,
            shared: false,
        }
    }
}

/// Everything a hook or tool may know about the run it is part of; passed explicitly.
pub struct RunContext {
    pub thread_id: String,
    pub run_id: String,
    /// The thread's owner and this turn's speaker; each use picks the one it means.
    pub users: RunUsers,
    pub agent_name: Option<String>,
    pub options: RunOptions,
    pub cancel: CancellationToken,
    pub events: EventSink,
    /// The configuration this run uses: the live config, or a request-scoped override that
    /// sub-agents inherit (DeerFlow's ContextVar override, made explicit).
    pub config: Arc<AppConfig>,
    /// Where work that outlives the run goes (the generated title): owned by whoever owns the
    /// runs, stopped and waited for when it shuts down.
    pub background: BackgroundTasks,
    /// The account that pays for this run's model calls (`budgets:`), checked before each;
    /// `None` meters nothing (tests, benches, the SDK without a harness).
    pub meter: Option<crate::agent_api::CallMeterRef>,
    /// What this run's own model calls are for (`lead`, `subagent`, `scheduled`, `webhook`).
    pub usage_kind: crate::agent_api::UsageKind,
    /// Why a middleware capped the run (`LoopCapped`, `TokenCapped`), reported when it ends.
    cap: Mutex<Option<StopReason>>,
}

impl RunContext {
    /// A context with fresh ids and no event consumer, for a thread of one person (`user_id`);
    /// handy for tests and benches. Set [`RunContext::users`] for a shared conversation.
    pub fn new(
        thread_id: impl Into<String>,
        user_id: impl Into<String>,
        config: Arc<AppConfig>,
    ) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: uuid::Uuid::new_v4().to_string(),
            users: RunUsers::alone(user_id),
            agent_name: None,
            options: RunOptions::default(),
            cancel: CancellationToken::new(),
            events: EventSink::disabled(),
            config,
            background: BackgroundTasks::new(),
            meter: None,
            usage_kind: Default::default(),
            cap: Mutex::new(None),
        }
    }

    /// Records that a middleware forced the run to a final answer; a run that then completes
    /// reports `reason` instead of `Completed`.
    pub fn set_stop_reason(&self, reason: StopReason) {
        *self.cap.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }

    pub fn stop_reason(&self) -> Option<StopReason> {
        *self.cap.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's `invoke_agent` span (disabled while traces are off): its custom agent (or
    /// `lead`), thread, channel (`api` for HTTP, web chat and console runs) and speaker.
    pub fn trace_span(&self) -> tracing::Span {
        if !crate::telemetry::enabled() {
            return tracing::Span::none();
        }
        crate::telemetry::spans::run(
            self.agent_name.as_deref().unwrap_or("lead"),
            &self.thread_id,
            Some(self.options.channel_name.as_deref().unwrap_or("api")),
            &self.users.speaker,
        )
    }
}

/// Work a run leaves behind when it ends (a title the model is still writing), owned by whoever
/// owns the runs: the harness stops it after the runs drained, so nothing it does lands in the
/// store after the final flush. Clones share the owner.
#[derive(Clone, Debug, Default)]
pub struct BackgroundTasks {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl BackgroundTasks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `work` until it ends or the owner stops; once stopped, new work is dropped unrun.
    pub fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                _ = stop.cancelled() => {}
                _ = work => {}
            }
        });
    }

    /// Stops the work in flight (it is dropped at its next await) and waits until it is gone.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// What a tool sees of the run: the state as of the tool step, plus the run's identity and
/// cancellation. Passed explicitly; tools never read ambient globals.
pub struct ToolContext<'a> {
    pub run: &'a RunContext,
    pub state: &'a ThreadState,
    pub tool_call_id: &'a str,
}
