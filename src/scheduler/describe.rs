//! How a schedule reads for people and models: one line in a list (`/schedules`, the tool's
//! `list`), and what a creation answers (the next fire times in the schedule's own zone, and
//! what happens to slots missed while the daemon was down).

use chrono::{DateTime, Utc};

use crate::scheduler::model::{CatchUp, Deliver, Schedule, ScheduleStatus, When};
use crate::scheduler::timing::{local_label, upcoming};

/// `0 9 * * MON`, `once at 2026-12-06T08:00:00`, `every 1800 s`: `when` as written.
pub fn when_label(when: &When) -> String {
    match when {
        When::Cron(pattern) => format!("cron `{pattern}`"),
        When::At(at) => format!("once at {at}"),
        When::EverySeconds(seconds) => format!("every {seconds} s"),
    }
}

/// One schedule in a list: id, name, when, status, next fire (local), last outcome, missed.
/// `with_owner` names whose it is (an admin's list of everyone's).
pub fn list_line(schedule: &Schedule, with_owner: bool) -> String {
    let mut line = format!("`{}` {}", schedule.id, schedule.name);
    if with_owner {
        line.push_str(&format!(" (of {})", schedule.owner));
    }
    line.push_str(&format!(
        ": {} ({})",
        when_label(&schedule.when),
        schedule.timezone
    ));
    match (schedule.status, schedule.next_fire) {
        (ScheduleStatus::Active, Some(next)) => {
            line.push_str(&format!(", next {}", local_label(&schedule.timezone, next)));
        }
        (status, _) => line.push_str(&format!(", {}", status.as_str())),
    }
    if let Some(last) = &schedule.last {
        line.push_str(&format!(
            ", last {} ({})",
            last.outcome.as_str(),
            local_label(&schedule.timezone, last.slot)
        ));
    }
    if schedule.missed > 0 {
        line.push_str(&format!(", {} missed", schedule.missed));
    }
    line
}

/// A list of schedules, or the sentence that says there are none and how to make one.
pub fn list_text(schedules: &[Schedule], with_owner: bool) -> String {
    if schedules.is_empty() {
        return "No schedules. Ask me to do something on a schedule (\"every Monday at 9, …\") \
                to create one."
            .into();
    }
    let lines: Vec<String> = schedules
        .iter()
        .map(|schedule| format!("- {}", list_line(schedule, with_owner)))
        .collect();
    format!("Schedules ({}):\n{}", schedules.len(), lines.join("\n"))
}

/// What a creation answers: the schedule, its next `count` fire times in its own zone, where
/// runs answer and what happens to missed slots.
pub fn created_text(
    schedule: &Schedule,
    now: DateTime<Utc>,
    count: usize,
    max_catch_up: u32,
) -> String {
    let next: Vec<String> = upcoming(schedule, now, count)
        .into_iter()
        .map(|at| local_label(&schedule.timezone, at))
        .collect();
    let place = match schedule.deliver {
        Deliver::Here => "Each run answers in this conversation.",
        Deliver::NewThread => "Each run starts a new thread (answered in this chat, if any).",
    };
    let missed = match schedule.catch_up {
        CatchUp::Latest => {
            "Slots missed while the service is down: the latest runs once when it is back."
                .to_string()
        }
        CatchUp::None => {
            "Slots missed while the service is down are skipped (and recorded).".to_string()
        }
        CatchUp::All => format!(
            "Slots missed while the service is down all run when it is back (up to \
             {max_catch_up})."
        ),
    };
    format!(
        "Created schedule `{}` \"{}\": {} in {}.\nNext runs: {}.\n{place}\n{missed}\nTell the \
         person these times. `/schedules` lists their schedules; `/unschedule {}` removes this \
         one.",
        schedule.id,
        schedule.name,
        when_label(&schedule.when),
        schedule.timezone,
        next.join("; "),
        schedule.id,
    )
}
