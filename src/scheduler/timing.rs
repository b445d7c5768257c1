//! When a schedule's slots fall: cron (croner, five fields) and `at` read in the schedule's
//! IANA timezone (chrono-tz), across DST changes (a slot in the spring gap fires at the first
//! valid time after it, a slot in the autumn overlap once); `every_seconds` counted from the
//! schedule's creation. No hand-written cron parsing.

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

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
    let tz = parse_timezone(timezone)?;
    match when {
        When::EverySeconds(seconds) => {
            if *seconds < min_interval_seconds {
                return Err(SchedulerError::Invalid(format!(
                    "`every_seconds: {seconds}` is too often; the shortest allowed interval is \
                     {min_interval_seconds} s (`scheduler.min_interval_seconds`): give \
                     {min_interval_seconds} or more"
                )));
            }
        }
        When::At(text) => {
            let at = parse_at(text, tz)?;
            if at <= now {
                return Err(SchedulerError::Invalid(format!(
                    "`at: {text}` ({}) is in the past; give a future time",
                    local_label(timezone, at)
                )));
            }
        }
        When::Cron(pattern) => {
            let cron = parse_cron(pattern)?;
            let Some(gap) = shortest_gap(&cron, tz, now) else {
                return Err(SchedulerError::Invalid(format!(
                    "`cron: {pattern}` never fires; check the day of month and month fields"
                )));
            };
            if gap < min_interval_seconds {
                return Err(SchedulerError::Invalid(format!(
                    "`cron: {pattern}` fires every {gap} s; the shortest allowed interval is \
                     {min_interval_seconds} s (`scheduler.min_interval_seconds`)"
                )));
            }
        }
    }
    Ok(())
}

/// The first slot of `schedule` strictly after `after`; `None` when there is none (a one-shot
/// whose time passed).
pub fn next_after(schedule: &Schedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let tz = schedule.timezone.parse::<Tz>().ok()?;
    match &schedule.when {
        When::Cron(pattern) => next_cron(&parse_cron(pattern).ok()?, tz, after),
        When::At(text) => parse_at(text, tz).ok().filter(|at| *at > after),
        When::EverySeconds(seconds) => {
            let step = i64::try_from(*seconds).ok()?.checked_mul(1000)?;
            if step <= 0 {
                return None;
            }
            let anchor = schedule.created_at.timestamp_millis();
            let elapsed = after.timestamp_millis() - anchor;
            // Slots are created_at + k·N for k ≥ 1.
            let k = if elapsed < 0 { 1 } else { elapsed / step + 1 };
            DateTime::from_timestamp_millis(anchor.checked_add(k.checked_mul(step)?)?)
        }
    }
}

/// Slots looked at for the shortest gap: this many at least, and at least two days' worth,
/// so a pattern that bunches its slots in one hour of the day is caught.
const GAP_SLOTS: usize = 50;
const GAP_MAX_SLOTS: usize = 3_000;
const GAP_SPAN_SECONDS: i64 = 2 * 24 * 3600;

/// The smallest number of seconds between two consecutive slots of `cron` from `now` on;
/// `None` if it fires fewer than twice.
fn shortest_gap(cron: &Cron, tz: Tz, now: DateTime<Utc>) -> Option<u64> {
    let first = next_cron(cron, tz, now)?;
    let mut previous = first;
    let mut shortest: Option<u64> = None;
    for count in 1..GAP_MAX_SLOTS {
        let Some(next) = next_cron(cron, tz, previous) else {
            break;
        };
        let gap = u64::try_from((next - previous).num_seconds()).unwrap_or(0);
        shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        previous = next;
        if count >= GAP_SLOTS && (next - first).num_seconds() >= GAP_SPAN_SECONDS {
            break;
        }
    }
    shortest
}

fn next_cron(cron: &Cron, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut from = after.with_timezone(&tz);
    // croner counts in whole seconds; a slot is never at or before `after`.
    for _ in 0..2 {
        let next = cron.find_next_occurrence(&from, false).ok()?;
        let next = next.with_timezone(&Utc);
        if next > after {
            return Some(next);
        }
        from = next.with_timezone(&tz);
    }
    None
}

fn parse_timezone(timezone: &str) -> Result<Tz, SchedulerError> {
    timezone.parse::<Tz>().map_err(|_| {
        SchedulerError::Invalid(format!(
            "`{timezone}` is not an IANA timezone; use a name such as `Europe/Berlin`, \
             `America/New_York` or `UTC`"
        ))
    })
}

/// Five fields only: croner would read six as seconds first and seven with a year, which a
/// person writing `0 9 * * MON` never means.
fn parse_cron(pattern: &str) -> Result<Cron, SchedulerError> {
    let fields = pattern.split_whitespace().count();
    if fields != 5 {
        return Err(SchedulerError::Invalid(format!(
            "`cron: {pattern}` has {fields} fields; write five: minute hour day-of-month month \
             day-of-week, e.g. `0 9 * * MON` (seconds and years are not supported)"
        )));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(pattern)
        .map_err(|error| {
            SchedulerError::Invalid(format!(
                "`cron: {pattern}` is not a valid cron ({error}); write five fields: minute \
                 hour day-of-month month day-of-week, e.g. `0 9 * * MON` or `*/30 * * * *`"
            ))
        })
}

/// `at` as an instant: an explicit offset or `Z` wins; a local time is read in `tz`, in a DST
/// gap as the first valid time after it, in an overlap as the earlier of the two.
fn parse_at(text: &str, tz: Tz) -> Result<DateTime<Utc>, SchedulerError> {
    let text_trimmed = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text_trimmed) {
        return Ok(at.with_timezone(&Utc));
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(text_trimmed, format).ok())
    .ok_or_else(|| {
        SchedulerError::Invalid(format!(
            "`at: {text}` is not a time; write `YYYY-MM-DDTHH:MM[:SS]` in the schedule's \
                 timezone, e.g. `2026-12-06T08:00:00`"
        ))
    })?;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(at) => return Ok(at.with_timezone(&Utc)),
        LocalResult::Ambiguous(earlier, _) => return Ok(earlier.with_timezone(&Utc)),
        LocalResult::None => {}
    }
    // In a gap: the first whole minute that exists (gaps are whole hours or half hours).
    let mut local = naive.with_second(0).unwrap_or(naive);
    for _ in 0..(24 * 60) {
        local += chrono::Duration::minutes(1);
        if let Some(at) = tz.from_local_datetime(&local).earliest() {
            return Ok(at.with_timezone(&Utc));
        }
    }
    Err(SchedulerError::Invalid(format!(
        "`at: {text}` does not exist in {tz}; give another time"
    )))
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
        Ok(tz) => at
            .with_timezone(&tz)
            .format("%a %Y-%m-%d %H:%M %Z")
            .to_string(),
        Err(_) => at.format("%a %Y-%m-%d %H:%M UTC").to_string(),
    }
}

#[cfg(test)]
#[path = "timing_tests.rs"]
mod tests;
