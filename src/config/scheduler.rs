//! `scheduler.*`: the agent's own schedule (the `schedule_task` tool, `/schedules`, the
//! `/api/schedules` routes): whether it runs, the timezone a schedule without one uses, and
//! the limits that keep a schedule from running away with the owner's budget.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ConfigProblem;

/// The tool group of `schedule_task`: a group that exists while `scheduler.enabled`, besides
/// the default or configured `tool_groups`, so a custom agent may name it.
pub const SCHEDULE_GROUP: &str = "schedule";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SchedulerConfig {
    /// Whether schedules fire and the `schedule_task` tool (tool group `schedule`) is offered.
    /// Off: nothing fires (schedules are kept) and the tool is not given to agents.
    pub enabled: bool,
    /// The IANA timezone (`Europe/Berlin`) of a schedule created without one.
    pub default_timezone: String,
    /// Failed runs in a row after which a schedule pauses itself (and says so in its chat).
    pub max_consecutive_failures: u32,
    /// With `catch_up: all`, at most this many missed slots are run after an outage; older
    /// ones are recorded as missed.
    pub max_catch_up: u32,
    /// Scheduled runs at once across the daemon; the others wait in order of their slots.
    pub max_concurrent: u32,
    /// Up to this many seconds of random delay before a slot's run, so schedules sharing a
    /// minute do not start together (0: none).
    pub jitter_seconds: u64,
    /// Schedules a user may have (paused ones count; admins are not limited).
    pub max_per_user: u32,
    /// The shortest interval between two slots of one schedule (`every_seconds`, or a cron
    /// that fires more often): shorter ones are refused with the reason. Admins set it.
    pub min_interval_seconds: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            default_timezone: "UTC".into(),
            max_consecutive_failures: 3,
            max_catch_up: 5,
            max_concurrent: 2,
            jitter_seconds: 0,
            max_per_user: 20,
            min_interval_seconds: 300,
        }
    }
}

impl SchedulerConfig {
    /// Problems, each naming its key.
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut push = |key: &str, message: String| {
            problems.push(ConfigProblem {
                path: format!("scheduler.{key}"),
                message,
            })
        };
        if self.default_timezone.parse::<chrono_tz::Tz>().is_err() {
            push(
                "default_timezone",
                format!(
                    "`{}` is not an IANA timezone; use a name such as `UTC` or `Europe/Berlin`",
                    self.default_timezone
                ),
            );
        }
        if self.max_concurrent == 0 {
            push("max_concurrent", "must be at least 1".into());
        }
        if self.max_consecutive_failures == 0 {
            push("max_consecutive_failures", "must be at least 1".into());
        }
        if self.min_interval_seconds == 0 {
            push("min_interval_seconds", "must be at least 1".into());
        }
        if self.jitter_seconds > 3600 {
            push("jitter_seconds", "must be at most 3600 (an hour)".into());
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_key() {
        assert!(SchedulerConfig::default().problems().is_empty());
        let bad = SchedulerConfig {
            default_timezone: "Mars/Olympus".into(),
            max_concurrent: 0,
            ..Default::default()
        };
        let keys: Vec<_> = bad.problems().into_iter().map(|p| p.path).collect();
        assert_eq!(
            keys,
            ["scheduler.default_timezone", "scheduler.max_concurrent"]
        );
    }
}
