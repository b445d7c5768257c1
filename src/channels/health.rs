//! Per-channel health, shown by `/readyz` and `antler status`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ChannelHealth {
    Starting,
    Running,
    /// Connected (replies go out, webhooks are served) while another instance sharing the
    /// store runs the long-lived transport; this one takes over if that one stops.
    Standby,
    /// Retrying after a transient failure.
    Degraded {
        reason: String,
    },
    /// Stopped until an operator acts (bad token, another poller, webhook conflict).
    Unhealthy {
        reason: String,
    },
    Stopped,
}

/// Shared, cheap-to-clone table of channel states.
#[derive(Clone, Debug, Default)]
pub struct HealthBoard(Arc<Mutex<BTreeMap<String, ChannelHealth>>>);

impl HealthBoard {
    pub fn set(&self, channel: &str, health: ChannelHealth) {
        crate::metrics::channel_health(
            channel,
            matches!(health, ChannelHealth::Running | ChannelHealth::Standby),
        );
        self.lock().insert(channel.to_string(), health);
    }

    /// Forgets a channel that was switched off.
    pub fn remove(&self, channel: &str) {
        self.lock().remove(channel);
    }

    pub fn get(&self, channel: &str) -> Option<ChannelHealth> {
        self.lock().get(channel).cloned()
    }

    pub fn snapshot(&self) -> BTreeMap<String, ChannelHealth> {
        self.lock().clone()
    }

    /// True when no configured channel is unhealthy.
    pub fn all_healthy(&self) -> bool {
        !self
            .lock()
            .values()
            .any(|health| matches!(health, ChannelHealth::Unhealthy { .. }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ChannelHealth>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
