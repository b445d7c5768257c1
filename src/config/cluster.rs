//! `cluster:`: how this daemon names itself and how long its leases last when several daemons
//! share one store (PostgreSQL). A single daemon on sled holds every lease itself.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

/// Shortest `cluster.lease_seconds`: renewed every third, a shorter lease renews faster than
/// a busy store answers.
pub const MIN_LEASE_SECONDS: u64 = 3;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ClusterConfig {
    /// This daemon's name among the daemons sharing the store: the holder of its leases and
    /// its row in `antler status`. Empty = `{hostname}-{pid}`, unique on every start. Letters,
    /// digits, `-`, `_` and `.`. Read at start.
    pub instance_id: String,
    /// How long a lease (a bot's long-polling connection, a chat being worked, the memory
    /// queue) lasts without renewal; renewed every third of it. When a daemon dies another one
    /// takes its work over within twice this. Read at start.
    pub lease_seconds: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            instance_id: String::new(),
            lease_seconds: 15,
        }
    }
}

impl ClusterConfig {
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        if self.lease_seconds < MIN_LEASE_SECONDS {
            problems.push(ConfigProblem::new(
                "cluster.lease_seconds",
                format!("must be at least {MIN_LEASE_SECONDS}"),
            ));
        }
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if self.instance_id.len() > 64 || !self.instance_id.chars().all(valid) {
            problems.push(ConfigProblem::new(
                "cluster.instance_id",
                "use at most 64 letters, digits, '-', '_' or '.' (or leave it empty for hostname-pid)",
            ));
        }
        problems
    }

    /// The instance id this daemon uses: the configured one, else `{hostname}-{pid}`.
    pub fn effective_instance_id(&self) -> String {
        if !self.instance_id.is_empty() {
            return self.instance_id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "antler".into());
        let host: String = host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        format!("{host}-{}", std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_leases_and_odd_ids_are_refused_by_key() {
        let config = ClusterConfig {
            instance_id: "a b".into(),
            lease_seconds: 1,
        };
        let keys: Vec<String> = config.problems().iter().map(|p| p.path.clone()).collect();
        assert_eq!(keys, ["cluster.lease_seconds", "cluster.instance_id"]);
        assert!(ClusterConfig::default().problems().is_empty());
    }

    #[test]
    fn the_default_id_is_host_and_pid() {
        let id = ClusterConfig::default().effective_instance_id();
        assert!(id.ends_with(&format!("-{}", std::process::id())), "{id}");
        assert!(ClusterConfig::default().problems().is_empty());
    }
}
