//! Approvals (`approvals:`): tool calls that wait for a person's yes. The policy says which
//! calls (`policy`), a middleware parks them (`gate`), the `approvals` tree keeps every request
//! and decision (`store`), and the words the model reads about a decision are in `texts`.
//! Deciding and resuming are the harness's (`Harness::decide_approval`, `resume_request`).

pub mod gate;
pub mod policy;
pub mod store;
pub mod texts;

pub use gate::{ApprovalGate, ApprovalMiddleware, GateMode};
pub use store::{APPROVALS_BY_THREAD_TREE, APPROVALS_CONSUMED_TREE, APPROVALS_TREE, ApprovalStore};

use crate::agent_api::approval::{ApprovalRequest, ApprovalStatus};

/// Which requests [`ApprovalStore::list`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalFilter {
    /// Only requests this user asked (`requester`), owns (`owner`) or decided.
    pub user: Option<String>,
    pub status: Option<ApprovalStatus>,
    /// At most this many, newest first; 0: all.
    pub limit: usize,
}

impl ApprovalFilter {
    pub fn matches(&self, request: &ApprovalRequest) -> bool {
        let user_ok = self.user.as_deref().is_none_or(|user| {
            request.requester == user
                || request.owner == user
                || request.decision.as_ref().is_some_and(|d| d.by == user)
        });
        user_ok && self.status.is_none_or(|status| request.status == status)
    }
}

/// Who is deciding, as the surface that took the decision knows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decider {
    /// Their Antler user id.
    pub user_id: String,
    /// Their display name, for "approved by …".
    pub name: Option<String>,
    /// Whether the surface knows them as an admin (a channel's admin); config admins are
    /// recognised without it.
    pub is_admin: bool,
}

/// A decision as applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    pub request: ApprovalRequest,
    /// `false`: it was decided before (a double click, a redelivery): nothing changed.
    pub fresh: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval request {id}; `/approve` takes the id shown with the request")]
    NotFound { id: String },
    /// The decider is not among the request's approvers; `who` says who can decide.
    #[error("{who}")]
    NotAllowed { who: String },
    #[error("approvals store failed: {0}")]
    Store(String),
}

impl From<antler_store::StoreError> for ApprovalError {
    fn from(error: antler_store::StoreError) -> Self {
        ApprovalError::Store(error.to_string())
    }
}

/// Resumes a decided request in the chat it was posted in (set by the channel layer at start).
pub trait ChatResume: Send + Sync {
    fn resume(&self, request: ApprovalRequest);
}
