//! Starts the harness's memory queue, whose updates use `memory.model_name` or the run's model
//! from the harness's current model registry.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::agent_api::{MeteredModel, UsageKind};
use crate::cluster::Cluster;
use crate::config::ConfigHandle;
use crate::harness::{Harness, Inner};
use crate::memory::conversation::{Author, recent_conversation_of};
use crate::memory::queue::shared::QueueOwner;
use crate::memory::queue::{ConversationLoader, MAX_MESSAGE_CHARS, MAX_MESSAGES, ModelResolver};
use crate::memory::{MemoryQueue, MemoryRepo, MemoryService, MemorySettings, MemoryUpdater};
use crate::usage::{Account, UsageStore};
use antler_store::StoreRef;

/// How long shutdown waits for pending memory updates (DeerFlow's `shutdown_flush_timeout`).
pub(crate) const MEMORY_FLUSH_DEADLINE: Duration = Duration::from_secs(30);

/// The memory service, or `None` outside a tokio runtime (the queue needs one for its task).
pub(super) fn start(
    inner: Weak<Inner>,
    store: StoreRef,
    config: &ConfigHandle,
    owner: Option<QueueOwner>,
) -> Option<MemoryService> {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::debug!("No async runtime at start; long-term memory is off for this harness");
        return None;
    }
    // Read at each use: a reload applies to the next memory update without a restart.
    let handle = config.clone();
    let settings = MemorySettings::live(move || handle.current().memory.clone());
    let repo = MemoryRepo::new(store.clone()).with_settings(settings.clone());
    let updater = MemoryUpdater::new(repo.clone(), settings);
    // Weak: the queue lives inside the harness and must not keep it alive.
    let threads = inner.clone();
    let models: ModelResolver = Arc::new(move |conversation| {
        let harness = Harness {
            inner: inner.upgrade()?,
        };
        let config = harness.config().current();
        let registry = harness.models(&config).ok()?;
        let name = config
            .memory
            .model_name
            .clone()
            .or(conversation.model_name.clone())
            .or_else(|| config.models.first().map(|m| m.name.clone()))?;
        let model = registry.get(&name)?;
        // Paid by the person whose memory it is; over their budget the update is skipped.
        let scope = &conversation.scope;
        let account = Account::new(
            UsageStore::new(harness.inner.threads.store().clone()),
            config.clone(),
            &scope.user_id,
            scope.agent_name.as_deref(),
            &conversation.thread_id,
        );
        Some(Arc::new(MeteredModel::new(
            model,
            Arc::new(account),
            UsageKind::Memory,
        )) as _)
    });
    let conversations: ConversationLoader = Arc::new(move |thread_id, user_id| {
        let inner = threads.upgrade()?;
        let read = inner.threads.get(thread_id).and_then(|record| {
            let Some(record) = record else {
                return Ok(None);
            };
            let state = inner.threads.state(thread_id)?;
            Ok(state.map(|(_, state)| (record.user_id, state)))
        });
        match read {
            Ok(found) => found.map(|(owner_id, state)| {
                let author = Author {
                    user_id,
                    owner_id: &owner_id,
                };
                recent_conversation_of(&state.messages, author, MAX_MESSAGES, MAX_MESSAGE_CHARS)
            }),
            Err(error) => {
                tracing::warn!(%error, %thread_id, "Could not read the thread for its memory update");
                None
            }
        }
    });
    match MemoryQueue::start_shared(store, updater, models, conversations, owner) {
        Ok(queue) => Some(MemoryService { repo, queue }),
        Err(error) => {
            tracing::error!(%error, "Could not load the memory queue; long-term memory is off until restart");
            None
        }
    }
}

/// This instance as the owner of its memory updates, when other daemons share the store: the
/// live instances are those holding their `instance:` lease.
pub(super) fn owner(cluster: &Cluster) -> QueueOwner {
    let members = cluster.clone();
    QueueOwner {
        instance_id: cluster.instance_id().to_string(),
        live: Arc::new(move || {
            Ok(members
                .instances()?
                .into_iter()
                .map(|lease| lease.holder)
                .collect())
        }),
        adopt_every: cluster.lease_duration(),
    }
}
