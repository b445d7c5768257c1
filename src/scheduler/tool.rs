//! `schedule_task` (tool group `schedule`): the model creates, lists, cancels, pauses and
//! resumes the person's schedules, from the person's words. Its answer for a creation states
//! the next three fire times in the schedule's timezone, so the model can confirm them.

use crate::scheduler::Scheduler;

pub const SCHEDULE_TASK: &str = "schedule_task";
/// The tool group it belongs to (in the default groups while `scheduler.enabled`).
pub const SCHEDULE_GROUP: &str = "schedule";

/// The tool; one per harness, shared by every run.
pub struct ScheduleTaskTool {
    pub(crate) scheduler: Scheduler,
}

impl ScheduleTaskTool {
    pub fn new(scheduler: Scheduler) -> Self {
        Self { scheduler }
    }
}
