//! What a schedule is, as every surface speaks it: the record in the `schedules` tree, the
//! fields a creation or a change gives (the tool's, the HTTP API's, the CLI's), and the record
//! of each fired slot.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// When a schedule fires: exactly one of the three, written as `{"cron": "0 9 * * MON"}`,
/// `{"at": "2026-12-06T08:00:00"}` or `{"every_seconds": 1800}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Five fields (minute hour day-of-month month day-of-week), in the schedule's timezone.
    Cron(String),
    /// Once, at this local time in the schedule's timezone (`YYYY-MM-DDTHH:MM[:SS]`; an
    /// offset or `Z`, if given, wins over the timezone).
    At(String),
    /// Every N seconds from the schedule's creation.
    EverySeconds(u64),
}

/// What a schedule does with slots whose time passed while the daemon was down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Fire once, for the most recent missed slot; the older ones are recorded as missed.
    #[default]
    Latest,
    /// Fire none: every missed slot is recorded as missed, the next future slot is next.
    None,
    /// Fire each missed slot, up to `scheduler.max_catch_up`; older ones recorded as missed.
    All,
}

/// Where each run of a schedule happens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Deliver {
    /// In the conversation where it was created (its thread, its chat).
    #[default]
    Here,
    /// A fresh thread each run (answered in the same chat, if it was created in one).
    NewThread,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleStatus {
    #[default]
    Active,
    /// By its owner, or by itself after `scheduler.max_consecutive_failures` failures.
    Paused,
    /// A one-shot (`at`) whose slot fired or was recorded: kept for its record.
    Done,
}

impl ScheduleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleStatus::Active => "active",
            ScheduleStatus::Paused => "paused",
            ScheduleStatus::Done => "done",
        }
    }
}

/// Where a schedule's runs answer: the chat it was created in, or only its thread (created
/// over HTTP, in the web chat or the console).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    Chat {
        /// The chat key's string form (`channel:chat[:topic]`).
        chat_key: String,
        /// The owner's platform account there: a scheduled turn is journalled as theirs.
        sender_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sender_name: Option<String>,
        /// A group's conversation (its thread is the chat's, the owner a member).
        #[serde(default)]
        shared: bool,
    },
    Thread,
}

impl Target {
    pub fn chat_key(&self) -> Option<&str> {
        match self {
            Target::Chat { chat_key, .. } => Some(chat_key),
            Target::Thread => None,
        }
    }
}

/// How a slot ended (or why it did not run). `caught_up` in the metrics is `Ran` of a
/// `FireKind::CatchUp` fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FireOutcome {
    Ran,
    Failed,
    /// The owner's budget was spent: skipped with a notice, not queued.
    SkippedBudget,
    /// Its time passed while the daemon was down and the catch-up policy did not run it.
    Missed,
}

impl FireOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            FireOutcome::Ran => "ran",
            FireOutcome::Failed => "failed",
            FireOutcome::SkippedBudget => "skipped_budget",
            FireOutcome::Missed => "missed",
        }
    }
}

/// Why a slot fired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FireKind {
    /// Its time came.
    #[default]
    Due,
    /// Its time passed while the daemon was down; the catch-up policy runs it now.
    CatchUp,
    /// Someone asked (`POST /api/schedules/{id}/run`, `antler schedules run`).
    Manual,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FireStatus {
    /// Claimed by an instance: its run is starting or running (a restart finishes it).
    #[default]
    Claimed,
    Done,
}

/// One slot of a schedule, from its claim to its end: tree `schedule_fires`, key
/// `{schedule id}\0{slot ms, big-endian}`. Written by the claim (one conditional batch with
/// the schedule's next fire), so a slot has a record before anything runs, and one at most.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fire {
    pub schedule_id: String,
    /// The slot's nominal time (for `Manual`: when it was asked).
    pub slot: DateTime<Utc>,
    pub kind: FireKind,
    pub status: FireStatus,
    /// The thread the run uses: the schedule's (`here`), or one derived from the schedule and
    /// the slot (`new_thread`), so a run resumed after a restart finds the same thread.
    pub thread_id: String,
    /// Who owns that thread (the chat's owner for a group, else the schedule's owner).
    pub thread_owner: String,
    pub claimed_at: DateTime<Utc>,
    /// The instance that claimed it (`cluster.instance_id`).
    pub claimed_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<FireOutcome>,
    /// A failure's reason, a skip's notice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

impl Fire {
    /// `{schedule id}@{slot, RFC 3339}`: `RunOptions::schedule_fire`, journal entry ids.
    pub fn key(&self) -> String {
        fire_key(&self.schedule_id, self.slot)
    }
}

pub fn fire_key(schedule_id: &str, slot: DateTime<Utc>) -> String {
    format!(
        "{schedule_id}@{}",
        slot.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// The last slot's end, shown by `/schedules`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastFire {
    pub slot: DateTime<Utc>,
    pub outcome: FireOutcome,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A schedule: tree `schedules`, key `{id}`; its JSON is also what the HTTP API returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Eight lowercase hex digits (typed after `/unschedule`).
    pub id: String,
    /// The Antler user whose schedule it is: runs act as them (memory, agent, usage, budget).
    pub owner: String,
    pub name: String,
    /// What to do at each run, written by the model from the person's request.
    pub prompt: String,
    pub when: When,
    /// IANA name; cron and `at` are read in it.
    pub timezone: String,
    pub catch_up: CatchUp,
    pub deliver: Deliver,
    pub target: Target,
    /// The conversation it was created in (`deliver: here` runs there).
    pub thread_id: String,
    /// That thread's owner (a group chat's `chat-…` id, else `owner`).
    pub thread_owner: String,
    /// The agent, model and chooser of a shared conversation's agent at creation (changeable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    pub status: ScheduleStatus,
    /// The next slot not yet claimed; `None` once nothing is left (a one-shot that fired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<DateTime<Utc>>,
    #[serde(default)]
    pub consecutive_failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<LastFire>,
    /// Slots recorded as missed so far (shown by `/schedules`).
    #[serde(default)]
    pub missed: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The fields a creation gives: the tool's arguments, `POST /api/schedules`'s body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScheduleSpec {
    pub name: Option<String>,
    pub prompt: String,
    pub when: Option<When>,
    pub timezone: Option<String>,
    pub catch_up: Option<CatchUp>,
    pub deliver: Option<Deliver>,
    pub agent_name: Option<String>,
    pub model_name: Option<String>,
}

/// The fields a change may give (`PATCH /api/schedules/{id}`); absent = unchanged. A new
/// `when` or `timezone` recomputes the next fire from now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulePatch {
    pub name: Option<String>,
    pub prompt: Option<String>,
    pub when: Option<When>,
    pub timezone: Option<String>,
    pub catch_up: Option<CatchUp>,
    pub deliver: Option<Deliver>,
    pub agent_name: Option<String>,
    pub model_name: Option<String>,
    /// `active` resumes (the next fire from now), `paused` pauses.
    pub status: Option<ScheduleStatus>,
}

/// Who is asking, as a surface knows them: their own schedules only, unless an admin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub user_id: String,
    pub is_admin: bool,
}

impl Caller {
    pub fn may_see(&self, schedule: &Schedule) -> bool {
        self.is_admin || schedule.owner == self.user_id
    }
}
