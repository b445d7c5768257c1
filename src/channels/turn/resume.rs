//! The turn of a resume entry: the decided request's message settled (the decision and who
//! made it, the buttons gone), then the run that continues the parked call streamed into the
//! chat and its answer delivered once, like any turn's. A superseded request only settles: the
//! message that superseded it has its own turn.

use antler_channel::ChatKey;

use crate::agent_api::StopReason;
use crate::agent_api::approval::ApprovalStatus;
use crate::channels::approvals;
use crate::channels::deps::{TurnDeps, TurnError};
use crate::channels::journal::JournalEntry;
use crate::channels::outbound::send_all;
use crate::channels::outbox::{OutboxAction, OutboxRecord, OutboxStep};
use crate::channels::runtime::ChannelRuntime;
use crate::channels::turn::{Started, deliver_answer, finish, plan_status, run, start};
use crate::paths::ThreadPaths;

pub(super) async fn resume(
    deps: &TurnDeps,
    runtime: &ChannelRuntime,
    key: &ChatKey,
    entry: &JournalEntry,
    approval_id: &str,
) -> Result<bool, TurnError> {
    let Some(request) = deps.harness.approvals().get(approval_id)? else {
        tracing::warn!(approval_id, chat = %key, "A resume entry names an approval request the store does not have");
        return Ok(true);
    };
    if request.status == ApprovalStatus::Pending {
        tracing::warn!(approval_id, chat = %key, "A resume entry for a request nobody decided; nothing to resume");
        return Ok(true);
    }
    let is_group = !entry.message.is_direct;
    let posted = request.origin.as_ref().and_then(|o| o.message_id.clone());
    let can_settle = runtime.parts.buttons.is_some() || runtime.parts.edit.is_some();
    if let Some(target) = posted.as_ref().filter(|_| can_settle) {
        let settle = OutboxRecord::new(
            OutboxStep::Settle.key(&entry.key),
            key.clone(),
            is_group,
            OutboxAction::Settle {
                target: target.clone(),
                text: approvals::settled_text(&request),
            },
        );
        send_all(deps, runtime, key, is_group, vec![settle]).await;
    }
    if request.status == ApprovalStatus::Superseded {
        return Ok(true);
    }
    // What the resumed run says replies to the request's message.
    let mut entry = entry.clone();
    entry.message.platform_message_id = posted.unwrap_or_default();
    let entry = &entry;
    let planned = deps.outbox.for_entry(&entry.key)?;
    if finish::redeliver_planned(deps, runtime, key, is_group, &planned).await {
        approvals::send_planned(deps, runtime, key, &planned).await;
        return Ok(true);
    }
    let config = deps.config.current();
    let paths = ThreadPaths::new(&config.data_dir(), &request.owner, &request.thread_id)?;
    let status_id = plan_status(deps, runtime, key, entry).await;
    let run_request = deps.harness.resume_request(&request);
    let handle = match start(deps, runtime, key, entry, status_id.clone(), run_request).await? {
        Started::Run(handle) => handle,
        Started::Answered => return Ok(true),
        Started::Interrupted => return Ok(false),
    };
    let streamed = run::stream(
        deps,
        runtime,
        &config,
        key,
        is_group,
        status_id.clone(),
        handle,
    )
    .await;
    if streamed.stop() == Some(StopReason::Cancelled) && deps.interrupted() {
        return Ok(false);
    }
    let answer = finish::compose(&streamed, &paths);
    deliver_answer(deps, runtime, key, entry, status_id, &streamed, answer).await;
    Ok(true)
}
