//! Approval requests from the harness's side: deciding one (once, by an approver), the run that
//! continues a decided one, the requests a new message supersedes, and the job that denies the
//! ones nobody answered in time.

use std::sync::Arc;
use std::time::Duration;

use super::jobs::Work;
use super::{Harness, RunError, RunRequest, Speaker};
use crate::agent::run::unanswered_calls;
use crate::agent_api::RunOptions;
use crate::agent_api::approval::{
    ApprovalRequest, ApprovalStatus, Approvers, Decision, DecisionRecord,
};
use crate::approvals::{
    ApprovalError, ApprovalGate, ApprovalStore, ChatResume, Decided, Decider, texts,
};
use crate::config::AppConfig;
use crate::middleware::dangling_tool_call::INTERRUPTED_TOOL_RESULT;
use antler_store::messages::{Message, ToolMessage};
use antler_store::state::ThreadState;

/// Who settles a request nobody decided (a timeout, a new message).
pub const SYSTEM_DECIDER: &str = "system";
/// How often the timeout job looks for expired requests.
pub(crate) const EXPIRY_EVERY: Duration = Duration::from_secs(30);

impl Harness {
    /// Every approval request and decision (the `approvals` tree).
    pub fn approvals(&self) -> &ApprovalStore {
        &self.inner.approvals
    }

    /// What the runs' approval middleware parks with: this store, the live config, the
    /// cluster's clock.
    pub(super) fn approval_gate(&self) -> ApprovalGate {
        ApprovalGate {
            store: self.inner.approvals.clone(),
            config: Some(self.inner.config.clone()),
            clock: Arc::new(ClusterClock(self.inner.cluster.clone())),
        }
    }

    /// Records the decision once (compare-and-set on the record); never starts a run. Only the
    /// request's approvers (and admins, always) may decide; a request decided already comes
    /// back with `fresh: false` and unchanged.
    pub fn decide_approval(
        &self,
        approval_id: &str,
        decider: &Decider,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<Decided, ApprovalError> {
        let config = self.inner.config.current();
        let record = DecisionRecord {
            decision,
            by: decider.user_id.clone(),
            by_name: decider.name.clone(),
            reason: reason.filter(|r| !r.trim().is_empty()),
            at: self.approval_gate().now(),
        };
        let status = if decision.approves() {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        let (request, fresh) = self
            .inner
            .approvals
            .settle(approval_id, status, record, |r| {
                may_decide(&config, r, decider)
            })?;
        if fresh {
            tracing::info!(
                approval_id,
                decision = decision.as_str(),
                by = %decider.user_id,
                "An approval request was decided"
            );
        }
        Ok(Decided { request, fresh })
    }

    /// The run that continues a decided request: empty input, the requester as speaker, the
    /// parked run's options.
    pub fn resume_request(&self, request: &ApprovalRequest) -> RunRequest {
        let speaker = if request.requester == request.owner {
            Speaker::Owner
        } else {
            Speaker::Member {
                user_id: request.requester.clone(),
            }
        };
        RunRequest {
            user_id: request.owner.clone(),
            speaker,
            thread_id: request.thread_id.clone(),
            input: Vec::new(),
            options: RunOptions {
                resume_approval: Some(request.id.clone()),
                agent_owner: request.agent_owner.clone(),
                ..request.options.clone()
            },
            want_values: false,
        }
    }

    /// Where a decision made away from a request's chat is handed, to resume it there.
    pub fn set_chat_resume(&self, hook: Arc<dyn ChatResume>) {
        *self
            .inner
            .chat_resume
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    pub fn chat_resume(&self) -> Option<Arc<dyn ChatResume>> {
        self.inner
            .chat_resume
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Continues a request decided away from any chat surface: in its chat when it has one
    /// (and the chat layer is listening), else as a background run here.
    pub async fn hand_over(&self, request: ApprovalRequest) {
        if request.origin.is_some()
            && let Some(hook) = self.chat_resume()
        {
            hook.resume(request);
            return;
        }
        if let Err(error) = self.resume_in_background(&request).await {
            tracing::warn!(%error, approval_id = %request.id, thread_id = %request.thread_id, "Could not resume a decided request; the next message on its thread settles it");
        }
    }

    /// Starts the run that continues `request` and drains its events; the run and the drain
    /// are the harness's (cancelled and waited for at shutdown).
    pub async fn resume_in_background(&self, request: &ApprovalRequest) -> Result<(), RunError> {
        let handle = self.start_run(self.resume_request(request)).await?;
        let mut events = handle.events;
        let outcome = handle.outcome;
        self.inner.tracker.spawn(async move {
            while events.recv_boxed().await.is_some() {}
            let _ = outcome.await;
        });
        Ok(())
    }

    /// Denies (as timed out) every pending request past its `expires_at` and continues each;
    /// returns how many it settled.
    pub async fn expire_approvals(&self) -> usize {
        let now = self.approval_gate().now();
        let expired = match self.inner.approvals.expired(now) {
            Ok(expired) => expired,
            Err(error) => {
                tracing::warn!(%error, "Could not look for expired approval requests");
                return 0;
            }
        };
        let mut settled = 0;
        for request in expired {
            let minutes = (request.expires_at - request.created_at).num_minutes();
            let record = DecisionRecord {
                decision: Decision::Deny,
                by: SYSTEM_DECIDER.into(),
                by_name: None,
                reason: Some(format!("nobody decided within {minutes} minutes")),
                at: now,
            };
            match self
                .inner
                .approvals
                .settle(&request.id, ApprovalStatus::TimedOut, record, |_| Ok(()))
            {
                Ok((request, true)) => {
                    settled += 1;
                    tracing::info!(approval_id = %request.id, "An approval request timed out");
                    self.hand_over(request).await;
                }
                Ok((_, false)) => {}
                Err(error) => {
                    tracing::warn!(%error, approval_id = %request.id, "Could not time out an approval request")
                }
            }
        }
        settled
    }

    /// Starts the timeout job (`job:approvals`, every 30 s).
    pub(super) fn start_approval_job(&self) {
        let expire: Work = Arc::new(|harness: Harness| {
            Box::pin(async move {
                harness.expire_approvals().await;
                true
            })
        });
        self.spawn_job("approvals", EXPIRY_EVERY, expire);
    }

    /// A new message on a thread whose last AI message has unanswered calls: their pending
    /// requests are superseded and every such call gets a result before the message, so the
    /// history stays valid. Returns the input to append.
    pub(super) fn supersede(
        &self,
        thread_id: &str,
        state: &ThreadState,
        input: Vec<Message>,
    ) -> Vec<Message> {
        if input.is_empty() {
            return input;
        }
        let calls = unanswered_calls(state);
        if calls.is_empty() {
            return input;
        }
        let requests = self
            .inner
            .approvals
            .list_thread(thread_id)
            .unwrap_or_else(|error| {
                tracing::warn!(%error, thread_id, "Could not read the thread's approval requests");
                Vec::new()
            });
        let now = self.approval_gate().now();
        let mut messages = Vec::with_capacity(calls.len() + input.len());
        for call in &calls {
            let text = match requests.iter().find(|r| r.tool_call_id == call.id) {
                Some(request) => self.supersede_one(request, now),
                None => INTERRUPTED_TOOL_RESULT.to_string(),
            };
            messages.push(Message::Tool(ToolMessage::error(call, text)));
        }
        messages.extend(input);
        messages
    }

    /// Settles one request a new message overtook; the tool result its call gets.
    fn supersede_one(
        &self,
        request: &ApprovalRequest,
        now: chrono::DateTime<chrono::Utc>,
    ) -> String {
        let record = DecisionRecord {
            decision: Decision::Deny,
            by: SYSTEM_DECIDER.into(),
            by_name: None,
            reason: Some("a new message arrived first".into()),
            at: now,
        };
        let settled = match self.inner.approvals.settle(
            &request.id,
            ApprovalStatus::Superseded,
            record,
            |_| Ok(()),
        ) {
            Ok((settled, _)) => settled,
            Err(error) => {
                tracing::warn!(%error, approval_id = %request.id, "Could not supersede an approval request");
                request.clone()
            }
        };
        // Approved but not run yet (its resume never came): the conversation moved on all the
        // same, and the call is not run behind the new message.
        let shown = if settled.status == ApprovalStatus::Approved {
            ApprovalRequest {
                status: ApprovalStatus::Superseded,
                ..settled
            }
        } else {
            settled
        };
        texts::not_run(&shown).unwrap_or_else(|| INTERRUPTED_TOOL_RESULT.to_string())
    }
}

/// Whether `decider` may decide `request`: admins always, else the request's approvers.
fn may_decide(
    config: &AppConfig,
    request: &ApprovalRequest,
    decider: &Decider,
) -> Result<(), ApprovalError> {
    let user = decider.user_id.as_str();
    if decider.is_admin || crate::identity::is_admin(config, user) {
        return Ok(());
    }
    let (allowed, who) = match &request.approvers {
        Approvers::Requester => (
            request.requester == user,
            format!(
                "only {} (the requester) or an admin can decide",
                request.requester
            ),
        ),
        Approvers::Admins => (false, "only an admin can decide".to_string()),
        Approvers::Users(users) => (
            users.iter().any(|u| u == user),
            format!("only {} or an admin can decide", users.join(", ")),
        ),
    };
    if allowed {
        Ok(())
    } else {
        Err(ApprovalError::NotAllowed { who })
    }
}

/// The cluster's clock (injected in tests) as the approvals' clock.
struct ClusterClock(crate::cluster::Cluster);

impl crate::cluster::WallClock for ClusterClock {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
}

#[cfg(test)]
#[path = "approvals_tests.rs"]
mod tests;
