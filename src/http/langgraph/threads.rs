//! Threads as the SDK sees them: create (`if_exists`), get, search, metadata patch, state
//! read and update, state at a checkpoint, history. (List and delete are `http::threads`.)
//!
//! History lists what the checkpoint log can give back: the latest checkpoint, with its full
//! values (see `shapes` for why older versions cannot be folded again).

use std::cmp::Ordering;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use antler_store::ThreadRecord;
use antler_store::state::ThreadState;
use antler_store::threads::ThreadStatus;

use super::errors::{Paging, body_object, checkpoint_not_found, field, unsupported};
use super::shapes;
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::paths::validate_id;

/// Largest page a search answers (DeerFlow asks for 50 at a time).
const MAX_LIMIT: usize = 1000;

const SEARCH_FIELDS: [&str; 10] = [
    "metadata",
    "values",
    "ids",
    "status",
    "limit",
    "offset",
    "sort_by",
    "sort_order",
    "select",
    "extract",
];

/// Fields a create body may carry: Antler's (`thread_id`, `metadata`) and the SDK's
/// (`if_exists`, `supersteps` when empty); anything else is a 422 naming it.
const CREATE_FIELDS: [&str; 4] = ["thread_id", "metadata", "if_exists", "supersteps"];

/// Creates a thread, or answers the caller's existing thread of that id (`if_exists`:
/// `do_nothing`, Antler's behaviour by default; `raise` refuses with 409 as LangGraph does).
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let fields = body_object(&body, &CREATE_FIELDS)?;
    let thread_id: Option<String> = field(&fields, "thread_id", "a string")?;
    let metadata: Map<String, Value> = field(&fields, "metadata", "an object")?.unwrap_or_default();
    let raise =
        match field::<String>(&fields, "if_exists", "\"raise\" or \"do_nothing\"")?.as_deref() {
            None | Some("do_nothing") => false,
            Some("raise") => true,
            Some(other) => {
                return Err(unsupported(
                    "if_exists",
                    format!("{other:?} is not supported; use \"raise\" or \"do_nothing\""),
                ));
            }
        };
    if fields
        .get("supersteps")
        .is_some_and(|steps| steps.as_array().is_none_or(|steps| !steps.is_empty()))
    {
        return Err(unsupported(
            "supersteps",
            "Antler does not replay state updates at creation; create the thread, then POST \
             its state or start a run",
        ));
    }
    if let Some(id) = &thread_id {
        validate_id("thread", id)?;
        if let Some(existing) = state
            .harness
            .threads()
            .get(id)
            .map_err(ApiError::internal)?
        {
            if existing.user_id != user.0 {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "thread_id_taken",
                    "that thread_id cannot be used; omit thread_id to get a fresh one",
                ));
            }
            if raise {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "thread_exists",
                    format!(
                        "thread {id} already exists; omit if_exists (or send \"do_nothing\") \
                         to get it back, or choose another thread_id"
                    ),
                ));
            }
            let (_, values) = shapes::latest(&state, id)?;
            return Ok((
                StatusCode::OK,
                Json(shapes::thread(&state, &existing, Some(&values))),
            ));
        }
    }
    let record = state
        .harness
        .create_thread(&user.0, thread_id, metadata)
        .map_err(ApiError::internal)?;
    Ok((
        StatusCode::OK,
        Json(shapes::thread(
            &state,
            &record,
            Some(&ThreadState::default()),
        )),
    ))
}

/// The thread as the SDK's `Thread` (with its `values`), beside the record's own fields.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = owned_thread(&state, &user, &thread_id)?;
    let (_, values) = shapes::latest(&state, &thread_id)?;
    Ok(Json(shapes::thread(&state, &record, Some(&values))))
}

/// The thread's latest state as the SDK's `ThreadState` (today's `thread_id`, `status` and
/// `values` among its fields).
pub(crate) async fn state(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = owned_thread(&state, &user, &thread_id)?;
    let (head, values) = shapes::latest(&state, &thread_id)?;
    Ok(Json(shapes::state(&state, &record, head.as_ref(), &values)))
}

/// `POST /threads/search`: the caller's threads, filtered (`metadata` and `values` by JSON
/// containment, as LangGraph's JSONB filters, `ids`, `status`), sorted and paged.
pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    body: Bytes,
) -> Result<Json<Vec<Value>>, ApiError> {
    let fields = body_object(&body, &SEARCH_FIELDS)?;
    if fields.contains_key("extract") {
        return Err(unsupported(
            "extract",
            "Antler does not extract values in a search; select \"values\" and read them",
        ));
    }
    let metadata: Option<Value> = field(&fields, "metadata", "an object")?;
    let values_filter: Option<Value> = field(&fields, "values", "an object")?;
    let ids: Option<Vec<String>> = field(&fields, "ids", "a list of thread ids")?;
    let status: Option<ThreadStatus> = field(
        &fields,
        "status",
        "one of \"idle\", \"busy\", \"interrupted\", \"error\"",
    )?;
    let sort_by = field::<String>(&fields, "sort_by", "a string")?;
    let Paging {
        limit,
        offset,
        descending,
        select,
    } = Paging::read(&fields, true, MAX_LIMIT)?;

    let mut records: Vec<ThreadRecord> = state
        .harness
        .list_threads(&user.0)
        .map_err(ApiError::internal)?
        .into_iter()
        .filter(|record| {
            ids.as_ref()
                .is_none_or(|ids| ids.contains(&record.thread_id))
        })
        .filter(|record| status.is_none_or(|status| record.status == status))
        .filter(|record| {
            metadata
                .as_ref()
                .is_none_or(|wanted| contains(&Value::Object(record.metadata.clone()), wanted))
        })
        .collect();
    sort(&mut records, sort_by.as_deref(), descending)?;

    let wants_values = select.as_ref().is_none_or(|select| {
        select
            .iter()
            .any(|name| name == "values" || name == "interrupts")
    });
    let mut page = Vec::new();
    let mut skipped = 0;
    for record in records {
        if page.len() >= limit {
            break;
        }
        // The state is folded only for threads that can still reach the page.
        let values = if wants_values || values_filter.is_some() {
            Some(shapes::latest(&state, &record.thread_id)?.1)
        } else {
            None
        };
        if let (Some(wanted), Some(values)) = (&values_filter, &values)
            && !contains(&json!(values.as_ref()), wanted)
        {
            continue;
        }
        if skipped < offset {
            skipped += 1;
            continue;
        }
        let thread = shapes::thread(&state, &record, values.as_deref());
        page.push(match &select {
            Some(select) => keep_fields(thread, select),
            None => thread,
        });
    }
    Ok(Json(page))
}

/// `PATCH /threads/{id}`: merges `metadata` into the thread's (as the SDK's `threads.update`)
/// and answers the thread.
pub(crate) async fn patch(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let fields = body_object(&body, &["metadata"])?;
    let metadata: Map<String, Value> = field(&fields, "metadata", "an object")?.unwrap_or_default();
    owned_thread(&state, &user, &thread_id)?;
    let record = state
        .harness
        .threads()
        .update(&thread_id, |record| {
            record
                .metadata
                .extend(metadata.iter().map(|(k, v)| (k.clone(), v.clone())));
        })
        .map_err(ApiError::internal)?;
    let (_, values) = shapes::latest(&state, &thread_id)?;
    Ok(Json(shapes::thread(&state, &record, Some(&values))))
}

/// `POST /threads/{id}/state`: changes state values outside a run (today `title`, what
/// DeerFlow's UI renames a chat with) as a checkpoint of its own; answers the new checkpoint.
/// 409 while a run is in flight.
pub(crate) async fn update_state(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let fields = body_object(&body, &["values", "checkpoint", "checkpoint_id", "as_node"])?;
    let record = owned_thread(&state, &user, &thread_id)?;
    let values: Map<String, Value> =
        field(&fields, "values", "an object of state values")?.unwrap_or_default();
    let _as_node: Option<String> = field(&fields, "as_node", "a node name")?;
    let base = requested_checkpoint(&fields)?;
    if let Some(base) = base
        && base != record.last_checkpoint
    {
        return Err(unsupported(
            "checkpoint_id",
            "Antler updates the thread's latest checkpoint only; omit it or send the id \
             GET /threads/{thread_id}/state answers",
        ));
    }
    let mut title: Option<Option<String>> = None;
    for (key, value) in &values {
        match (key.as_str(), value) {
            ("title", Value::String(text)) => title = Some(Some(text.trim().to_string())),
            ("title", Value::Null) => title = Some(None),
            ("title", _) => return Err(unsupported("values.title", "must be a string or null")),
            (other, _) => {
                return Err(unsupported(
                    &format!("values.{other}"),
                    "Antler updates only \"title\" outside a run; send the change as a run's \
                     input instead",
                ));
            }
        }
    }
    let head = state
        .harness
        .update_thread_state(&user.0, &thread_id, |values| {
            if let Some(title) = &title {
                values.title.clone_from(title);
            }
        })
        .map_err(|e| update_error(&thread_id, e))?;
    if let Some(title) = title {
        state
            .harness
            .threads()
            .update(&thread_id, |record| record.title.clone_from(&title))
            .map_err(ApiError::internal)?;
    }
    Ok(Json(
        json!({"checkpoint": shapes::checkpoint(&thread_id, head.version)}),
    ))
}

/// `GET /threads/{id}/state/{checkpoint_id}`: the state at a checkpoint, which Antler can give
/// back for the latest one only.
pub(crate) async fn state_at(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, checkpoint_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    checkpoint_state(&state, &user, &thread_id, &checkpoint_id)
}

/// `POST /threads/{id}/state/checkpoint`: as `state_at`, the checkpoint in the body.
pub(crate) async fn state_at_checkpoint(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let fields = body_object(&body, &["checkpoint", "subgraphs", "select"])?;
    let checkpoint: Value = field(&fields, "checkpoint", "a checkpoint object")?
        .ok_or_else(|| unsupported("checkpoint", "is required"))?;
    let id = checkpoint_id_in(&checkpoint)
        .ok_or_else(|| unsupported("checkpoint", "must carry a checkpoint_id"))?;
    checkpoint_state(&state, &user, &thread_id, &id)
}

/// `POST|GET /threads/{id}/history`: the thread's checkpoints newest first (`limit`, `before`,
/// `metadata` containment): the latest one, with its full values.
pub(crate) async fn history(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    body: Bytes,
) -> Result<Json<Vec<Value>>, ApiError> {
    let fields = body_object(
        &body,
        &["limit", "before", "metadata", "checkpoint", "select"],
    )?;
    let limit = field::<usize>(&fields, "limit", "a non-negative integer")?.unwrap_or(10);
    let metadata: Option<Value> = field(&fields, "metadata", "an object")?;
    let before = match fields.get("before") {
        None => None,
        Some(before) => Some(
            checkpoint_id_in(before)
                .and_then(|id| shapes::version_of(&id))
                .ok_or_else(|| unsupported("before", "must name a checkpoint of this thread"))?,
        ),
    };
    let record = owned_thread(&state, &user, &thread_id)?;
    let (head, values) = shapes::latest(&state, &thread_id)?;
    let Some(head) = head else {
        return Ok(Json(Vec::new()));
    };
    let mut out = Vec::new();
    let wanted = before.is_none_or(|before| head.version < before)
        && metadata.as_ref().is_none_or(|wanted| {
            contains(&shapes::checkpoint_metadata(&record, Some(&head)), wanted)
        });
    if wanted && limit > 0 {
        out.push(shapes::state(&state, &record, Some(&head), &values));
    }
    Ok(Json(out))
}

/// A refused state update: 409 while a run holds the thread, 404 for a thread that is not
/// the caller's.
fn update_error(thread_id: &str, error: crate::harness::RunError) -> ApiError {
    use crate::harness::RunError;
    match error {
        RunError::Busy { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "thread_busy",
            format!(
                "thread {thread_id} is running; wait for the run to end or cancel it with \
                 POST /threads/{thread_id}/runs/{{run_id}}/cancel, then update its state"
            ),
        ),
        RunError::NotFound { .. } => ApiError::thread_not_found(thread_id),
        other => ApiError::internal(other),
    }
}

fn checkpoint_state(
    state: &AppState,
    user: &AuthUser,
    thread_id: &str,
    checkpoint_id: &str,
) -> Result<Json<Value>, ApiError> {
    let record = owned_thread(state, user, thread_id)?;
    let (head, values) = shapes::latest(state, thread_id)?;
    match (&head, shapes::version_of(checkpoint_id)) {
        (Some(head), Some(version)) if head.version == version => {
            Ok(Json(shapes::state(state, &record, Some(head), &values)))
        }
        _ => Err(checkpoint_not_found(checkpoint_id)),
    }
}

/// The checkpoint version a state update names (`checkpoint_id`, or `checkpoint` as an
/// object), if any.
fn requested_checkpoint(fields: &Map<String, Value>) -> Result<Option<u64>, ApiError> {
    let named = fields
        .get("checkpoint_id")
        .map(|id| ("checkpoint_id", id))
        .or_else(|| fields.get("checkpoint").map(|c| ("checkpoint", c)));
    let Some((name, value)) = named else {
        return Ok(None);
    };
    let version = checkpoint_id_in(value)
        .and_then(|id| shapes::version_of(&id))
        .ok_or_else(|| unsupported(name, "must name a checkpoint of this thread"))?;
    Ok(Some(version))
}

/// A checkpoint id given as a string, a `Checkpoint` object or a config
/// (`{"configurable": {"checkpoint_id": …}}`), as the SDKs send them.
fn checkpoint_id_in(value: &Value) -> Option<String> {
    match value {
        Value::String(id) => Some(id.clone()),
        Value::Object(map) => map
            .get("checkpoint_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| map.get("configurable").and_then(checkpoint_id_in)),
        _ => None,
    }
}

fn sort(records: &mut [ThreadRecord], by: Option<&str>, descending: bool) -> Result<(), ApiError> {
    let compare: fn(&ThreadRecord, &ThreadRecord) -> Ordering = match by {
        None | Some("updated_at") => |a, b| a.updated_at.cmp(&b.updated_at),
        Some("created_at") => |a, b| a.created_at.cmp(&b.created_at),
        Some("thread_id") => |a, b| a.thread_id.cmp(&b.thread_id),
        Some("status") => |a, b| status_name(a.status).cmp(status_name(b.status)),
        Some(_) => {
            return Err(unsupported(
                "sort_by",
                "must be one of thread_id, status, created_at, updated_at",
            ));
        }
    };
    records.sort_by(|a, b| {
        let order = compare(a, b).then_with(|| a.thread_id.cmp(&b.thread_id));
        if descending { order.reverse() } else { order }
    });
    Ok(())
}

fn status_name(status: ThreadStatus) -> &'static str {
    match status {
        ThreadStatus::Idle => "idle",
        ThreadStatus::Busy => "busy",
        ThreadStatus::Interrupted => "interrupted",
        ThreadStatus::Error => "error",
    }
}

/// The fields `select` names (`values.title` keeps `values` with only its `title`).
fn keep_fields(thread: Value, select: &[String]) -> Value {
    let Value::Object(mut all) = thread else {
        return thread;
    };
    let mut kept = Map::new();
    for name in select {
        let (top, inner) = match name.split_once('.') {
            Some((top, inner)) => (top, Some(inner)),
            None => (name.as_str(), None),
        };
        match inner {
            None => {
                if let Some(value) = all.remove(top) {
                    kept.insert(top.to_string(), value);
                }
            }
            Some(inner) => {
                let picked = all.get(top).and_then(|v| v.get(inner)).cloned();
                if let (Some(picked), Value::Object(slot)) = (
                    picked,
                    kept.entry(top.to_string()).or_insert_with(|| json!({})),
                ) {
                    slot.insert(inner.to_string(), picked);
                }
            }
        }
    }
    Value::Object(kept)
}

/// JSON containment as PostgreSQL's `@>` (what LangGraph's metadata and values filters are):
/// every key of `needle` is in `haystack` with a contained value; a list contains a list whose
/// every item some item contains; scalars are equal.
pub(crate) fn contains(haystack: &Value, needle: &Value) -> bool {
    match (haystack, needle) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(key, want)| have.get(key).is_some_and(|have| contains(have, want))),
        (Value::Array(have), Value::Array(want)) => want
            .iter()
            .all(|want| have.iter().any(|have| contains(have, want))),
        (have, want) => have == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_follows_jsonb() {
        let have = json!({"a": 1, "tags": ["x", "y"], "nested": {"b": true, "c": "d"}});
        for (want, expected) in [
            (json!({}), true),
            (json!({"a": 1}), true),
            (json!({"a": 2}), false),
            (json!({"tags": ["y"]}), true),
            (json!({"tags": ["z"]}), false),
            (json!({"nested": {"b": true}}), true),
            (json!({"missing": null}), false),
        ] {
            assert_eq!(contains(&have, &want), expected, "{want}");
        }
    }

    #[test]
    fn select_keeps_named_fields_and_value_keys() {
        let thread =
            json!({"thread_id": "t", "status": "idle", "values": {"title": "T", "messages": []}});
        let kept = keep_fields(thread, &["thread_id".into(), "values.title".into()]);
        assert_eq!(kept, json!({"thread_id": "t", "values": {"title": "T"}}));
    }

    #[test]
    fn checkpoint_ids_are_read_from_every_form_the_sdks_send() {
        let id = "00000000-0000-0000-0000-000000000003";
        for form in [
            json!(id),
            json!({"checkpoint_id": id, "thread_id": "t", "checkpoint_ns": ""}),
            json!({"configurable": {"checkpoint_id": id}}),
        ] {
            assert_eq!(checkpoint_id_in(&form).as_deref(), Some(id), "{form}");
        }
        assert_eq!(checkpoint_id_in(&json!(3)), None);
    }
}
