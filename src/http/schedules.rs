//! Schedule routes: `GET/POST /api/schedules`, `GET/PATCH/DELETE /api/schedules/{id}` and
//! `POST /api/schedules/{id}/run`, the same fields as the `schedule_task` tool.
//!
//! Everything goes through [`crate::scheduler::Scheduler`], which holds users to their own
//! schedules (another user's id reads as absent: 404) and admins (and the local operator over
//! the socket) to none. A schedule created here answers only in its thread (`Target::Thread`):
//! the caller's thread named by `thread_id`, or a fresh one made for it.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::identity::is_admin;
use crate::paths::validate_id;
use crate::scheduler::timing::{local_label, upcoming};
use crate::scheduler::{
    Caller, Placement, Schedule, SchedulePatch, ScheduleSpec, ScheduleStatus, SchedulerError,
    Target,
};

/// Recent fires `GET /api/schedules/{id}` shows.
const RECENT_FIRES: usize = 20;
/// Next fire times a creation (and `GET /api/schedules/{id}`) states.
const UPCOMING: usize = 3;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only the schedules of this conversation (the web chat's panel).
    thread_id: Option<String>,
    /// Admins: only this user's schedules.
    user: Option<String>,
}

/// `GET /api/schedules`: the caller's schedules (an admin's: everyone's, or one user's with
/// `?user=`), oldest first; `?thread_id=` keeps one conversation's.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let caller = caller(&state, &user);
    if let Some(thread_id) = &query.thread_id {
        validate_id("thread", thread_id)?;
    }
    let owner = match query.user.map(|u| u.trim().to_string()) {
        Some(other) if !other.is_empty() && other != caller.user_id => {
            if !caller.is_admin {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "only admins may list another user's schedules; leave out `user`",
                ));
            }
            validate_id("user", &other)?;
            Some(other)
        }
        Some(own) if !own.is_empty() => Some(own),
        _ => None,
    };
    let scheduler = state.harness.scheduler();
    let schedules = match &query.thread_id {
        Some(thread_id) if caller.is_admin => scheduler
            .store()
            .list_thread(thread_id)
            .map_err(scheduler_error)?,
        _ => scheduler.list(&caller).map_err(scheduler_error)?,
    };
    let views: Vec<Value> = schedules
        .iter()
        .filter(|s| owner.as_ref().is_none_or(|owner| &s.owner == owner))
        .filter(|s| query.thread_id.as_ref().is_none_or(|t| &s.thread_id == t))
        .map(view)
        .collect();
    Ok(Json(json!({"schedules": views})))
}

/// `POST /api/schedules`: the tool's creation fields, plus an optional `thread_id` (the
/// caller's thread the runs answer in; without it a new thread is made for the schedule).
/// 201 with the schedule and its next three fire times.
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let config = state.config.current();
    if !config.scheduler.enabled {
        return Err(disabled());
    }
    let (thread_id, spec) = creation(body)?;
    let caller = caller(&state, &user);
    let existing = match &thread_id {
        Some(thread_id) => Some(owned_thread(&state, &user, thread_id)?),
        None => None,
    };
    let thread = match existing {
        Some(thread) => thread,
        None => {
            let mut metadata = Map::new();
            metadata.insert("schedule".into(), Value::Bool(true));
            state
                .harness
                .create_thread(&user.0, None, metadata)
                .map_err(ApiError::internal)?
        }
    };
    let placement = Placement {
        target: Target::Thread,
        thread_id: thread.thread_id.clone(),
        thread_owner: thread.user_id.clone(),
        agent_name: spec.agent_name.clone().or(thread.agent_name.clone()),
        agent_owner: None,
        model_name: spec.model_name.clone(),
    };
    let created = state
        .harness
        .scheduler()
        .create(&config.scheduler, &caller, spec, placement);
    let schedule = match created {
        Ok(schedule) => schedule,
        Err(error) => {
            // A thread made only for this schedule goes with the refused creation.
            if thread_id.is_none()
                && let Err(cleanup) = state.harness.delete_thread(&user.0, &thread.thread_id)
            {
                tracing::warn!(%cleanup, thread_id = %thread.thread_id, "Failed to remove the thread of a refused schedule");
            }
            return Err(scheduler_error(error));
        }
    };
    let now = state.harness.scheduler().now();
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "schedule": view(&schedule),
            "upcoming": upcoming_view(&schedule, now),
        })),
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetQuery {
    /// How many of the newest fires to include (default 20; 0: every one on record).
    fires: Option<usize>,
}

/// `GET /api/schedules/{id}`: the schedule, its next fire times and its recent fires (newest
/// first; `?fires=N`, `0` for all).
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
    Query(query): Query<GetQuery>,
) -> Result<Json<Value>, ApiError> {
    let caller = caller(&state, &user);
    let scheduler = state.harness.scheduler();
    let schedule = scheduler.get(&caller, &id).map_err(scheduler_error)?;
    let fires = scheduler
        .store()
        .fires(&schedule.id, query.fires.unwrap_or(RECENT_FIRES))
        .map_err(scheduler_error)?;
    Ok(Json(json!({
        "schedule": view(&schedule),
        "upcoming": upcoming_view(&schedule, scheduler.now()),
        "fires": fires,
    })))
}

/// `PATCH /api/schedules/{id}`: the fields given change (`status: paused|active` pauses and
/// resumes); checked like a creation.
pub(crate) async fn change(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, ApiError> {
    let patch: SchedulePatch = fields(body)?;
    if patch.status == Some(ScheduleStatus::Done) {
        return Err(invalid(
            "`status` may be `active` (resume) or `paused`; `done` is set by a one-time schedule's run",
        ));
    }
    let config = state.config.current();
    let caller = caller(&state, &user);
    let scheduler = state.harness.scheduler();
    let schedule = scheduler
        .change(&config.scheduler, &caller, &id, patch)
        .map_err(scheduler_error)?;
    Ok(Json(json!({
        "schedule": view(&schedule),
        "upcoming": upcoming_view(&schedule, scheduler.now()),
    })))
}

/// `DELETE /api/schedules/{id}`: 204; its fires stay on record.
pub(crate) async fn remove(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let caller = caller(&state, &user);
    state
        .harness
        .scheduler()
        .remove(&caller, &id)
        .map_err(scheduler_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/schedules/{id}/run`: fires the schedule now (a manual fire, recorded like any
/// slot); 202 with the fire, whose run goes on in the background.
pub(crate) async fn run_now(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if !state.config.current().scheduler.enabled {
        return Err(disabled());
    }
    let caller = caller(&state, &user);
    let fire = state
        .harness
        .run_schedule_now(&caller, &id)
        .await
        .map_err(scheduler_error)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"fire": fire, "fire_key": fire.key()})),
    ))
}

/// Who is asking: admins (and the local operator) see every schedule.
fn caller(state: &AppState, user: &AuthUser) -> Caller {
    Caller {
        user_id: user.0.clone(),
        is_admin: user.is_operator() || is_admin(&state.config.current(), &user.0),
    }
}

/// A schedule as answered: its record, with its next fire as the schedule's local time.
pub(crate) fn view(schedule: &Schedule) -> Value {
    let mut value = json!(schedule);
    if let (Some(next), Some(object)) = (schedule.next_fire, value.as_object_mut()) {
        object.insert(
            "next_fire_local".into(),
            Value::String(local_label(&schedule.timezone, next)),
        );
    }
    value
}

/// The next fire times of an active schedule (from its pending `next_fire` on), as RFC 3339
/// and as the schedule's local time.
fn upcoming_view(schedule: &Schedule, now: DateTime<Utc>) -> Vec<Value> {
    if schedule.status != ScheduleStatus::Active {
        return Vec::new();
    }
    let slots: Vec<DateTime<Utc>> = match schedule.next_fire {
        Some(next) => std::iter::once(next)
            .chain(upcoming(schedule, next, UPCOMING - 1))
            .collect(),
        None => upcoming(schedule, now, UPCOMING),
    };
    slots
        .into_iter()
        .map(|at| {
            json!({
                "at": at.to_rfc3339_opts(SecondsFormat::Secs, true),
                "local": local_label(&schedule.timezone, at),
            })
        })
        .collect()
}

/// Splits a creation body into its `thread_id` and the tool's fields; an unknown or mistyped
/// field is a 400 naming it.
fn creation(body: Value) -> Result<(Option<String>, ScheduleSpec), ApiError> {
    let Value::Object(mut object) = body else {
        return Err(invalid(
            "the body must be a JSON object with at least `prompt` and `when`",
        ));
    };
    let thread_id = match object.remove("thread_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => {
            validate_id("thread", &id)?;
            Some(id)
        }
        Some(_) => {
            return Err(invalid(
                "`thread_id` must be a string (a thread id of yours)",
            ));
        }
    };
    let known = known_spec_fields();
    if let Some(unknown) = object.keys().find(|key| !known.contains(key)) {
        return Err(invalid(format!(
            "unknown field `{unknown}`; the fields are thread_id, {}",
            known.join(", ")
        )));
    }
    let spec: ScheduleSpec = fields(Value::Object(object))?;
    if spec.prompt.trim().is_empty() {
        return Err(invalid(
            "`prompt` is required: what the agent should do at each run",
        ));
    }
    if spec.when.is_none() {
        return Err(invalid(
            "`when` is required: one of {\"cron\": \"0 9 * * MON\"}, {\"at\": \"2026-12-06T08:00:00\"} or {\"every_seconds\": 1800}",
        ));
    }
    Ok((thread_id, spec))
}

/// The creation fields, as the tool's `ScheduleSpec` names them.
fn known_spec_fields() -> Vec<String> {
    match serde_json::to_value(ScheduleSpec::default()) {
        Ok(Value::Object(fields)) => fields.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Reads `body` as `T`; a field that does not fit is a 400 naming its path.
fn fields<T: DeserializeOwned>(body: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(body).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path == "." {
            invalid(inner.to_string())
        } else {
            invalid(format!("`{path}`: {inner}"))
        }
    })
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_schedule", message)
}

fn disabled() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "scheduler_disabled",
        "scheduled tasks are turned off (`scheduler.enabled: false` in the config); an admin can turn them on",
    )
}

/// A schedule the caller cannot see reads as one that does not exist.
fn scheduler_error(error: SchedulerError) -> ApiError {
    match error {
        SchedulerError::NotFound { id } => ApiError::new(
            StatusCode::NOT_FOUND,
            "schedule_not_found",
            format!("no schedule {id}; list yours with GET /api/schedules"),
        ),
        SchedulerError::Invalid(message) => invalid(message),
        SchedulerError::TooMany { limit } => ApiError::new(
            StatusCode::CONFLICT,
            "too_many_schedules",
            format!(
                "you have {limit} schedules already (`scheduler.max_per_user`); remove one with DELETE /api/schedules/{{id}} first"
            ),
        ),
        SchedulerError::Disabled => disabled(),
        SchedulerError::Store(detail) => ApiError::internal(detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<(Option<String>, ScheduleSpec), ApiError>) -> String {
        let error = result.expect_err("an error");
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        error.message
    }

    #[test]
    fn a_creation_body_splits_into_its_thread_and_the_tools_fields() {
        let (thread, spec) = creation(json!({
            "thread_id": "t1",
            "prompt": "post the merged PRs",
            "when": {"cron": "0 9 * * MON"},
            "timezone": "Europe/Berlin",
            "catch_up": "none",
        }))
        .unwrap();
        assert_eq!(thread.as_deref(), Some("t1"));
        assert_eq!(
            spec.when,
            Some(crate::scheduler::When::Cron("0 9 * * MON".into()))
        );
        assert_eq!(spec.catch_up, Some(crate::scheduler::CatchUp::None));
        assert_eq!(spec.timezone.as_deref(), Some("Europe/Berlin"));
    }

    #[test]
    fn bad_creation_bodies_name_the_field() {
        let unknown = message(creation(json!({"prompt": "x", "every": 5})));
        assert!(unknown.contains("unknown field `every`"), "{unknown}");
        assert!(unknown.contains("when"), "{unknown}");
        let mistyped = message(creation(
            json!({"prompt": "x", "when": {"every_seconds": "soon"}}),
        ));
        assert!(mistyped.contains("`when.every_seconds`"), "{mistyped}");
        let no_when = message(creation(json!({"prompt": "x"})));
        assert!(no_when.contains("`when` is required"), "{no_when}");
        let no_prompt = message(creation(json!({"when": {"every_seconds": 600}})));
        assert!(no_prompt.contains("`prompt` is required"), "{no_prompt}");
        let bad_thread = message(creation(json!({"thread_id": "../x", "prompt": "x"})));
        assert!(bad_thread.contains("thread"), "{bad_thread}");
        let bad_catch_up = message(creation(
            json!({"prompt": "x", "when": {"at": "2030-01-01T08:00"}, "catch_up": "some"}),
        ));
        assert!(bad_catch_up.contains("`catch_up`"), "{bad_catch_up}");
    }

    #[test]
    fn a_patch_refuses_unknown_fields_by_name() {
        let error = fields::<SchedulePatch>(json!({"status": "paused", "owner": "mallory"}))
            .expect_err("an unknown field");
        assert!(error.message.contains("owner"), "{}", error.message);
        let patch: SchedulePatch = fields(json!({"status": "paused"})).unwrap();
        assert_eq!(patch.status, Some(ScheduleStatus::Paused));
    }
}
