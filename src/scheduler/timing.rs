//! When a schedule's slots fall: cron (croner, five fields) and `at` read in the schedule's
//! IANA timezone (chrono-tz), across DST changes (a slot in the spring gap fires at the first
//! valid time after it, a slot in the autumn overlap once); `every_seconds` counted from the
//! schedule's creation. No hand-written cron parsing.

use chrono::{DateTime, Utc};

use crate::scheduler::SchedulerError;
use crate::scheduler::model::{Schedule, When};

/// Checks `when` and `timezone` as a creation or change gives them: a valid cron of five
/// fields, an `at` that parses (and is in the future of `now`), a known timezone, slots no
/// closer than `min_interval_seconds`. The error says what to write instead.
pub fn validate(
    when: &When,
    timezone: &str,
    now: DateTime<Utc>,
    min_interval_seconds: u64,
) -> Result<(), SchedulerError> {
    let _ = (when, timezone, now, min_interval_seconds);
    todo!("lane core")
}

/// The first slot of `schedule` strictly after `after`; `None` when there is none (a one-shot
/// whose time passed).
pub fn next_after(schedule: &Schedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let _ = (schedule, after);
    todo!("lane core")
}

/// The next `count` slots strictly after `after`, for the tool's answer and `/schedules`.
pub fn upcoming(schedule: &Schedule, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
    let mut slots = Vec::with_capacity(count);
    let mut at = after;
    while slots.len() < count {
        let Some(next) = next_after(schedule, at) else {
            break;
        };
        slots.push(next);
        at = next;
    }
    slots
}

/// `at` as the schedule's local time, for people: `Mon 2026-12-07 09:00 CET`.
pub fn local_label(timezone: &str, at: DateTime<Utc>) -> String {
    match timezone.parse::<chrono_tz::Tz>() {
        Ok(tz) => at.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z").to_string(),
        Err(_) => at.format("%a %Y-%m-%d %H:%M UTC").to_string(),
    }
}
