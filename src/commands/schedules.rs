//! `/schedules` and `/unschedule ID`: a person's scheduled tasks from any chat (an admin's
//! list is everyone's, with their owners), through [`crate::scheduler::Scheduler`] like the
//! tool and the HTTP API.

use crate::commands::surface::CommandError;
use crate::config::AppConfig;
use crate::harness::Harness;
use crate::lead_agent::access::is_admin;
use crate::scheduler::describe::list_text;
use crate::scheduler::{Caller, SchedulerError};

pub(crate) const UNSCHEDULE_USAGE: &str =
    "Usage: /unschedule ID (the ids are listed by /schedules)";

/// `/schedules`: id, name, when, next fire in the schedule's zone, status, last outcome and
/// missed slots of each.
pub(crate) fn list(
    harness: &Harness,
    config: &AppConfig,
    user_id: &str,
) -> Result<String, CommandError> {
    let caller = caller(config, user_id);
    let schedules = harness.scheduler().list(&caller).map_err(surface_error)?;
    let mut text = list_text(&schedules, caller.is_admin);
    if !config.scheduler.enabled && !schedules.is_empty() {
        text.push_str(
            "\nScheduled tasks are turned off (`scheduler.enabled: false`): none of these fires.",
        );
    }
    Ok(text)
}

/// `/unschedule ID`: removes one of the person's schedules (any, for an admin); another
/// person's is "no schedule", like a missing one.
pub(crate) fn unschedule(
    harness: &Harness,
    config: &AppConfig,
    user_id: &str,
    id: &str,
) -> Result<String, CommandError> {
    let id = id.trim().trim_matches('`');
    if id.is_empty() || id.contains(char::is_whitespace) {
        return Ok(UNSCHEDULE_USAGE.into());
    }
    match harness.scheduler().remove(&caller(config, user_id), id) {
        Ok(removed) => Ok(format!(
            "Removed schedule `{}` \"{}\"; it will not run again.",
            removed.id, removed.name
        )),
        Err(error @ SchedulerError::NotFound { .. }) => Ok(error.to_string()),
        Err(error) => Err(surface_error(error)),
    }
}

fn caller(config: &AppConfig, user_id: &str) -> Caller {
    Caller {
        user_id: user_id.to_string(),
        is_admin: is_admin(config, user_id),
    }
}

fn surface_error(error: SchedulerError) -> CommandError {
    CommandError::Surface(error.to_string())
}

#[cfg(test)]
#[path = "schedules_tests.rs"]
mod tests;
