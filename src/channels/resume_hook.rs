//! The harness's [`ChatResume`] hook: a decision made away from a request's chat (the HTTP
//! API, the timeout) journals the request's resume entry (`channels::approvals`) in its chat
//! and wakes the chat's worker.

use std::sync::{Arc, Weak};

use antler_channel::{ChatKey, InboundMessage};

use crate::agent_api::approval::ApprovalRequest;
use crate::approvals::ChatResume;
use crate::channels::approvals::resume_entry;
use crate::channels::journal::{Index, Recorded};
use crate::channels::manager::{ChannelManager, ManagerInner};
use crate::channels::slots::Job;
use antler_store::StoreError;

/// Resumes decided requests in their chats: the harness's [`ChatResume`], set when the channels
/// start (`Channels::start`). Holds the manager weakly (the manager holds the harness).
pub(crate) struct ChatResumeHook {
    inner: Weak<ManagerInner>,
}

impl ChatResumeHook {
    pub(crate) fn new(manager: &ChannelManager) -> Self {
        Self {
            inner: Arc::downgrade(manager.inner()),
        }
    }
}

impl ChatResume for ChatResumeHook {
    fn resume(&self, request: ApprovalRequest) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        if let Err(error) = inner.queue_resume(&request) {
            tracing::warn!(%error, approval_id = %request.id, "Could not queue the resumption of a decided request in its chat; decide again to retry");
        }
    }
}

impl ManagerInner {
    /// Journals `request`'s resume entry in its chat (once: a second call finds it recorded)
    /// and hands it to the chat's worker. A channel not connected now answers it once it is
    /// (`recover`).
    pub(crate) fn queue_resume(
        self: &Arc<Self>,
        request: &ApprovalRequest,
    ) -> Result<(), StoreError> {
        let Some((key, message)) = resume_entry(request, &self.deps.chats)? else {
            return Ok(());
        };
        self.queue_entry(&key, message)?;
        Ok(())
    }

    /// Journals a synthetic entry the daemon writes itself (a resume, a schedule's fire or
    /// notice) in `key`'s chat and hands it to the chat's worker; `false` when it was
    /// journalled before (the first one is, or was, answered). A channel not connected now
    /// answers it once it is (`recover`).
    pub(crate) fn queue_entry(
        self: &Arc<Self>,
        key: &ChatKey,
        message: InboundMessage,
    ) -> Result<bool, StoreError> {
        let journal_key = match self.deps.journal.record(&message, key, Index::Queue)? {
            Recorded::New(journal_key) => journal_key,
            Recorded::Duplicate => return Ok(false),
        };
        self.deps.journal.flush()?;
        if let Some(runtime) = self.runtime(&key.channel) {
            let job = Job {
                chat: key.clone(),
                journal_key,
                runtime,
                message,
            };
            self.dispatch(key, Some(job));
        }
        Ok(true)
    }
}

#[cfg(test)]
#[path = "resume_hook_tests.rs"]
mod tests;
