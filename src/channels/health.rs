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
pub struct HealthBoard {
    states: Arc<Mutex<BTreeMap<String, ChannelHealth>>>,
    /// What a running channel cannot do (a missing scope), by channel, then by feature: the
    /// channel still answers, so this is not a state of its own.
    warnings: Arc<Mutex<BTreeMap<String, BTreeMap<&'static str, String>>>>,
}

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
        self.lock_warnings().remove(channel);
    }

    /// Records that `feature` of `channel` does not work and why; true when this is news (the
    /// caller logs it then, so the log says it once, not on every message).
    pub fn warn(&self, channel: &str, feature: &'static str, warning: &str) -> bool {
        let mut warnings = self.lock_warnings();
        let features = warnings.entry(channel.to_string()).or_default();
        features.insert(feature, warning.to_string()).as_deref() != Some(warning)
    }

    /// `feature` of `channel` works (again).
    pub fn clear_warning(&self, channel: &str, feature: &'static str) {
        let mut warnings = self.lock_warnings();
        if let Some(features) = warnings.get_mut(channel) {
            features.remove(feature);
            if features.is_empty() {
                warnings.remove(channel);
            }
        }
    }

    /// Every channel's warnings, for `/readyz` and `antler status`.
    pub fn warnings(&self) -> BTreeMap<String, Vec<String>> {
        self.lock_warnings()
            .iter()
            .map(|(channel, features)| (channel.clone(), features.values().cloned().collect()))
            .collect()
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
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_warnings(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeMap<&'static str, String>>> {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_news_once_and_goes_when_cleared() {
        let board = HealthBoard::default();
        assert!(board.warn("slack", "history", "grant channels:history"));
        assert!(!board.warn("slack", "history", "grant channels:history"));
        assert_eq!(
            board.warnings()["slack"],
            vec!["grant channels:history".to_string()]
        );
        board.clear_warning("slack", "history");
        assert!(board.warnings().is_empty());
        assert!(board.warn("slack", "history", "grant channels:history"));
    }
}
