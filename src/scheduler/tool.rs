//! `schedule_task` (tool group `schedule`): the model creates, lists, cancels, pauses and
//! resumes the person's schedules, from the person's words. Its answer for a creation states
//! the next three fire times in the schedule's timezone, so the model can confirm them.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_api::{Tool, ToolContext, ToolError, ToolOutput, parse_args, schema_for};
use crate::config::AppConfig;
use crate::scheduler::describe::{created_text, list_text};
use crate::scheduler::model::{
    Caller, CatchUp, Deliver, SchedulePatch, ScheduleSpec, ScheduleStatus, Target, When,
};
use crate::scheduler::{Placement, Scheduler, SchedulerError, WHEN_FORMS};

pub const SCHEDULE_TASK: &str = "schedule_task";
/// The tool group it belongs to (in the default groups while `scheduler.enabled`).
pub const SCHEDULE_GROUP: &str = crate::config::scheduler::SCHEDULE_GROUP;
/// Fire times a creation's answer states.
const UPCOMING: usize = 3;

/// Whether an agent with these tool groups (`None`: every group) gets `schedule_task`.
pub fn offered(config: &AppConfig, groups: Option<&[String]>) -> bool {
    config.scheduler.enabled
        && groups.is_none_or(|groups| groups.iter().any(|group| group == SCHEDULE_GROUP))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    Create,
    List,
    Cancel,
    Pause,
    Resume,
}

/// Arguments of `schedule_task`. Kept short: the schema goes into every model request.
#[derive(Debug, Deserialize, JsonSchema)]
struct ScheduleTaskArgs {
    /// `cancel`, `pause` and `resume` need `id`.
    action: Action,
    /// What each run does, written for a run with nobody present.
    #[serde(default)]
    prompt: Option<String>,
    /// Exactly one of `cron` (five fields, "0 9 * * MON"), `at` (once, local time,
    /// "2026-12-06T08:00") or `every_seconds`.
    #[serde(default)]
    #[schemars(with = "Option<WhenArgs>")]
    when: Option<Value>,
    /// IANA zone, e.g. "Europe/Berlin".
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// Slots missed while the service was down (default `latest`: run the latest once).
    #[serde(default)]
    catch_up: Option<CatchUpArg>,
    /// `here` (default) or a fresh thread each run.
    #[serde(default)]
    deliver: Option<DeliverArg>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WhenArgs {
    cron: Option<String>,
    at: Option<String>,
    every_seconds: Option<u64>,
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum CatchUpArg {
    Latest,
    None,
    All,
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum DeliverArg {
    Here,
    NewThread,
}

/// The tool; one per harness, shared by every run.
pub struct ScheduleTaskTool {
    pub(crate) scheduler: Scheduler,
}

impl ScheduleTaskTool {
    pub fn new(scheduler: Scheduler) -> Self {
        Self { scheduler }
    }
}

#[async_trait]
impl Tool for ScheduleTaskTool {
    fn name(&self) -> &str {
        SCHEDULE_TASK
    }

    fn description(&self) -> &str {
        "Run a task on a schedule (each run answers in this conversation), or list, cancel, \
         pause or resume the person's schedules. After create, tell the person the run times \
         the result gives."
    }

    fn parameters(&self) -> Value {
        schema_for::<ScheduleTaskArgs>()
    }

    fn group(&self) -> Option<&str> {
        Some(SCHEDULE_GROUP)
    }

    async fn call(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args: ScheduleTaskArgs = parse_args(args)?;
        let config = &ctx.run.config;
        let speaker = &ctx.run.users.speaker;
        let caller = Caller {
            user_id: speaker.clone(),
            is_admin: crate::identity::is_admin(config, speaker),
        };
        if ctx.run.options.schedule_fire.is_some() && !matches!(args.action, Action::List) {
            return Err(ToolError::Denied(
                "a scheduled run cannot create or change schedules; the person can, in a \
                 conversation with you"
                    .into(),
            ));
        }
        let scheduler = &self.scheduler;
        let text = match args.action {
            Action::Create => {
                let spec = ScheduleSpec {
                    name: args.name,
                    prompt: args.prompt.unwrap_or_default(),
                    when: Some(parse_when(args.when)?),
                    timezone: args.timezone,
                    catch_up: args.catch_up.map(CatchUpArg::into_model),
                    deliver: args.deliver.map(DeliverArg::into_model),
                    agent_name: None,
                    model_name: None,
                };
                let made = scheduler
                    .create(&config.scheduler, &caller, spec, placement(ctx))
                    .map_err(tool_error)?;
                created_text(
                    &made,
                    scheduler.now(),
                    UPCOMING,
                    config.scheduler.max_catch_up,
                )
            }
            Action::List => {
                let schedules = scheduler.list(&caller).map_err(tool_error)?;
                list_text(&schedules, caller.is_admin)
            }
            Action::Cancel => {
                let removed = scheduler
                    .remove(&caller, &required_id(args.id)?)
                    .map_err(tool_error)?;
                format!("Removed schedule `{}` \"{}\".", removed.id, removed.name)
            }
            Action::Pause | Action::Resume => {
                let (status, verb) = match args.action {
                    Action::Pause => (ScheduleStatus::Paused, "Paused"),
                    _ => (ScheduleStatus::Active, "Resumed"),
                };
                let patch = SchedulePatch {
                    status: Some(status),
                    ..Default::default()
                };
                let changed = scheduler
                    .change(&config.scheduler, &caller, &required_id(args.id)?, patch)
                    .map_err(tool_error)?;
                format!(
                    "{verb} schedule `{}` \"{}\".\n{}",
                    changed.id,
                    changed.name,
                    crate::scheduler::describe::list_line(&changed, false)
                )
            }
        };
        Ok(ToolOutput::text(text))
    }
}

impl CatchUpArg {
    fn into_model(self) -> CatchUp {
        match self {
            CatchUpArg::Latest => CatchUp::Latest,
            CatchUpArg::None => CatchUp::None,
            CatchUpArg::All => CatchUp::All,
        }
    }
}

impl DeliverArg {
    fn into_model(self) -> Deliver {
        match self {
            DeliverArg::Here => Deliver::Here,
            DeliverArg::NewThread => Deliver::NewThread,
        }
    }
}

/// Where the run that creates a schedule is: its chat (if any), thread and agent.
fn placement(ctx: &ToolContext<'_>) -> Placement {
    let options = &ctx.run.options;
    let target = match &options.chat {
        Some(chat) => Target::Chat {
            chat_key: chat.chat_key.clone(),
            sender_id: chat.sender_id.clone(),
            sender_name: chat.sender_name.clone(),
            shared: chat.shared,
        },
        None => Target::Thread,
    };
    Placement {
        target,
        thread_id: ctx.run.thread_id.clone(),
        thread_owner: ctx.run.users.owner.clone(),
        agent_name: ctx.run.agent_name.clone().or(options.agent_name.clone()),
        agent_owner: options.agent_owner.clone(),
        model_name: options.model_name.clone(),
    }
}

/// `when` as the model gave it: an object with exactly one of the three forms.
fn parse_when(when: Option<Value>) -> Result<When, ToolError> {
    let invalid =
        |what: &str| ToolError::InvalidArguments(format!("`when` {what}; give {WHEN_FORMS}"));
    let Some(value) = when else {
        return Err(invalid("is missing"));
    };
    if !value.is_object() {
        return Err(invalid("must be an object"));
    }
    let when: WhenArgs = serde_json::from_value(value)
        .map_err(|error| invalid(&format!("is not understood ({error})")))?;
    match (when.cron, when.at, when.every_seconds) {
        (Some(cron), None, None) => Ok(When::Cron(cron)),
        (None, Some(at), None) => Ok(When::At(at)),
        (None, None, Some(seconds)) => Ok(When::EverySeconds(seconds)),
        (None, None, None) => Err(invalid("is empty")),
        _ => Err(invalid("has more than one form")),
    }
}

fn required_id(id: Option<String>) -> Result<String, ToolError> {
    id.map(|id| id.trim().to_string())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            ToolError::InvalidArguments(
                "`id` is missing; call with action `list` to see the schedules' ids".into(),
            )
        })
}

fn tool_error(error: SchedulerError) -> ToolError {
    match error {
        SchedulerError::Invalid(message) => ToolError::InvalidArguments(message),
        SchedulerError::Disabled => ToolError::Denied(error.to_string()),
        other => ToolError::Failed(other.to_string()),
    }
}

#[cfg(test)]
#[path = "tool_tests.rs"]
mod tests;
