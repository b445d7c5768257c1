//! The run of a chat turn: started once the thread is free, its events streamed into the status
//! message (text, tool activity) with the typing indicator kept alive.

use std::time::Duration;

use antler_channel::ChatKey;

use crate::agent::RunOutcome;
use crate::agent_api::approval::ApprovalRequest;
use crate::agent_api::metering::BUDGET_WARNING_EVENT;
use crate::agent_api::{RunEvent, StopReason};
use crate::channels::deps::TurnDeps;
use crate::channels::runtime::ChannelRuntime;
use crate::channels::stream::{StatusStream, Typing};
use crate::config::AppConfig;
use crate::harness::{RunError, RunHandle, RunRequest};

/// How long a turn waits for a run started elsewhere (HTTP API) on the same thread.
const BUSY_WAIT: Duration = Duration::from_secs(30);
/// How often the status message and the typing indicator get a chance to refresh.
const TICK: Duration = Duration::from_millis(200);

/// What a finished run left for the answer.
pub(super) struct Streamed {
    /// `None` when the run's task panicked.
    pub(super) outcome: Option<RunOutcome>,
    /// The assistant text shown so far (the answer if the state has none).
    pub(super) text: String,
    /// An error the run reported.
    pub(super) error: Option<String>,
    /// The request a parked run (`awaiting_approval`) is waiting on.
    pub(super) approval: Option<ApprovalRequest>,
    /// Budget warnings (80 %) the run's calls gave, shown after the answer.
    pub(super) notices: Vec<String>,
}

impl Streamed {
    pub(super) fn stop(&self) -> Option<StopReason> {
        self.outcome.as_ref().map(|outcome| outcome.stop)
    }

    /// The request the run parked on, when it stopped to wait for one.
    pub(super) fn parked_on(&self) -> Option<&ApprovalRequest> {
        (self.stop() == Some(StopReason::AwaitingApproval))
            .then_some(self.approval.as_ref())
            .flatten()
    }
}

/// Starts the run, waiting up to [`BUSY_WAIT`] for another run on the thread to finish;
/// `ShuttingDown` once the turn is interrupted meanwhile.
pub(super) async fn start(deps: &TurnDeps, request: RunRequest) -> Result<RunHandle, RunError> {
    let deadline = tokio::time::Instant::now() + BUSY_WAIT;
    loop {
        if deps.interrupted() {
            return Err(RunError::ShuttingDown);
        }
        match deps.harness.start_run(request.clone()).await {
            Err(RunError::Busy { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
}

pub(super) async fn stream(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    config: &AppConfig,
    key: &ChatKey,
    is_group: bool,
    status_id: Option<String>,
    mut handle: RunHandle,
) -> Streamed {
    let mut status = StatusStream::new(
        runtime,
        key,
        is_group,
        status_id,
        runtime.edit_interval(config, is_group),
        config.channels.stream.show_progress,
    );
    let mut typing = Typing::new(runtime, key, is_group);
    let mut ticker = tokio::time::interval(TICK);
    let mut error = None;
    let mut approval = None;
    let mut notices = Vec::new();
    loop {
        tokio::select! {
            event = handle.events.recv() => match event {
                None => break,
                Some(RunEvent::TextDelta { message_id, delta }) => status.push_text(&message_id, &delta),
                Some(RunEvent::ToolStarted { call }) => status.set_progress(Some(format!("· {}", call.name))),
                Some(RunEvent::ToolFinished { .. }) => status.set_progress(None),
                Some(RunEvent::Error { message, .. }) => error = Some(message),
                Some(RunEvent::ApprovalRequested(request)) => approval = Some(*request),
                Some(RunEvent::Custom { name, data }) if name == BUDGET_WARNING_EVENT => {
                    notices.extend(data["message"].as_str().map(str::to_string));
                }
                Some(event) => status.apply_progress(&event),
            },
            // Another instance took the chat over: stop at once, it runs the turn again.
            () = deps.claim_lost.cancelled(), if !handle.cancel.is_cancelled() => handle.cancel.cancel(),
            _ = ticker.tick() => {
                if !deps.claim_live() {
                    handle.cancel.cancel();
                    continue;
                }
                typing.tick().await;
                status.tick().await;
            }
        }
    }
    let outcome = match handle.outcome.await {
        Ok(outcome) => Some(outcome),
        Err(join) => {
            tracing::warn!(error = %join, "A channel run panicked");
            None
        }
    };
    Streamed {
        outcome,
        text: status.text().to_string(),
        error,
        approval,
        notices,
    }
}
