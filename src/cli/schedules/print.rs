//! How `antler schedules` prints: the list as aligned columns, one schedule as labelled lines
//! with its next fire times and recent fires.

use chrono::{DateTime, SecondsFormat, Utc};

use crate::scheduler::timing::{local_label, upcoming as next_slots};
use crate::scheduler::{Fire, Schedule, ScheduleStatus, When};

/// The schedules as aligned columns, or a line saying there are none.
pub(super) fn table(schedules: &[Schedule]) -> String {
    if schedules.is_empty() {
        return "No schedules.\n".to_string();
    }
    let header = ["ID", "OWNER", "NAME", "WHEN", "NEXT FIRE", "STATUS", "LAST"].map(str::to_string);
    let rows: Vec<[String; 7]> = schedules.iter().map(row).collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("  ").trim_end());
        text.push('\n');
    }
    text
}

/// One schedule: its fields, its next fire times (`(RFC 3339, local)`) and its recent fires.
pub(super) fn details(
    schedule: &Schedule,
    upcoming: &[(String, String)],
    fires: &[Fire],
) -> String {
    let mut lines = vec![
        format!("id:        {}", schedule.id),
        format!("name:      {}", schedule.name),
        format!("owner:     {}", schedule.owner),
        format!("status:    {}", schedule.status.as_str()),
        format!("when:      {}", when_text(&schedule.when)),
        format!("timezone:  {}", schedule.timezone),
        format!("catch up:  {}", enum_text(&schedule.catch_up)),
        format!("deliver:   {}", enum_text(&schedule.deliver)),
        format!("thread:    {}", schedule.thread_id),
    ];
    if let Some(chat) = schedule.target.chat_key() {
        lines.push(format!("chat:      {chat}"));
    }
    if let Some(agent) = &schedule.agent_name {
        lines.push(format!("agent:     {agent}"));
    }
    if let Some(model) = &schedule.model_name {
        lines.push(format!("model:     {model}"));
    }
    lines.push(format!("prompt:    {}", schedule.prompt));
    if schedule.consecutive_failures > 0 {
        lines.push(format!(
            "failures:  {} in a row",
            schedule.consecutive_failures
        ));
    }
    if schedule.missed > 0 {
        lines.push(format!("missed:    {}", schedule.missed));
    }
    lines.push(format!("created:   {}", rfc3339(schedule.created_at)));
    if upcoming.is_empty() {
        lines.push("next:      -".to_string());
    } else {
        lines.push("next:".to_string());
        lines.extend(
            upcoming
                .iter()
                .map(|(at, local)| format!("  {local}  ({at})")),
        );
    }
    if fires.is_empty() {
        lines.push("fires:     none yet".to_string());
    } else {
        lines.push("fires (newest first):".to_string());
        lines.extend(fires.iter().map(fire_line));
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The next fire times of an active schedule, as `GET /api/schedules/{id}` states them.
pub(super) fn upcoming(schedule: &Schedule, now: DateTime<Utc>) -> Vec<(String, String)> {
    if schedule.status != ScheduleStatus::Active {
        return Vec::new();
    }
    let slots: Vec<DateTime<Utc>> = match schedule.next_fire {
        Some(next) => std::iter::once(next)
            .chain(next_slots(schedule, next, 2))
            .collect(),
        None => next_slots(schedule, now, 3),
    };
    slots
        .into_iter()
        .map(|at| (rfc3339(at), local_label(&schedule.timezone, at)))
        .collect()
}

/// `; next fire Mon 2026-12-07 09:00 CET` when the schedule has one.
pub(super) fn next_clause(schedule: &Schedule) -> String {
    match schedule.next_fire {
        Some(next) => format!("; next fire {}", local_label(&schedule.timezone, next)),
        None => String::new(),
    }
}

fn row(schedule: &Schedule) -> [String; 7] {
    let next = match (schedule.status, schedule.next_fire) {
        (ScheduleStatus::Active, Some(next)) => local_label(&schedule.timezone, next),
        _ => "-".to_string(),
    };
    let mut last = match &schedule.last {
        Some(last) => match &last.detail {
            Some(detail) => cut(&format!("{}: {detail}", last.outcome.as_str()), 40),
            None => last.outcome.as_str().to_string(),
        },
        None => "-".to_string(),
    };
    if schedule.missed > 0 {
        last.push_str(&format!(" ({} missed)", schedule.missed));
    }
    [
        schedule.id.clone(),
        schedule.owner.clone(),
        cut(&schedule.name, 32),
        when_text(&schedule.when),
        next,
        schedule.status.as_str().to_string(),
        last,
    ]
}

fn fire_line(fire: &Fire) -> String {
    let outcome = match (fire.outcome, &fire.detail) {
        (Some(outcome), Some(detail)) => cut(&format!("{}: {detail}", outcome.as_str()), 60),
        (Some(outcome), None) => outcome.as_str().to_string(),
        (None, _) => "running".to_string(),
    };
    format!(
        "  {}  {:<8}  {outcome}",
        rfc3339(fire.slot),
        enum_text(&fire.kind)
    )
}

fn when_text(when: &When) -> String {
    match when {
        When::Cron(cron) => format!("cron {cron}"),
        When::At(at) => format!("at {at}"),
        When::EverySeconds(seconds) => format!("every {seconds}s"),
    }
}

/// A unit enum's serde name (`latest`, `new_thread`, `catch_up`).
fn enum_text<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        _ => "-".to_string(),
    }
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// One line of at most `max` characters.
fn cut(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut short: String = line.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}
