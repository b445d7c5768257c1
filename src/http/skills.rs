//! Skill routes: list the caller's skills, enable or disable one (public skills: admins only),
//! install an archive (a multipart upload, or `{"thread_id", "path"}` naming a file of one of
//! the caller's threads), and delete one of the caller's custom skills.

use std::sync::Arc;

use axum::Json;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::lead_agent::access::is_admin;
use crate::paths::ThreadPaths;
use crate::sandbox::PathMapper;
use crate::skills::{ArchiveError, SkillCatalog, SkillError};

/// Largest archive read from a thread's files (uploads are bounded by `uploads.*`).
const MAX_ARCHIVE_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToggleBody {
    enabled: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FromThreadBody {
    thread_id: String,
    /// A virtual path such as `/mnt/user-data/uploads/report.skill`.
    path: String,
}

fn catalog(state: &AppState) -> SkillCatalog {
    state.harness.skills(&state.config.current())
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
) -> Result<Json<Value>, ApiError> {
    let operator = user.is_operator();
    let (skills, dirs) = blocking(move || {
        let catalog = catalog(&state);
        let dirs = (
            catalog.public_dir().display().to_string(),
            catalog.custom_dir(&user.0)?.display().to_string(),
            user.0.clone(),
        );
        Ok::<_, SkillError>((catalog.list(&user.0)?, dirs))
    })
    .await?;
    let skills: Vec<Value> = skills.iter().map(skill_json).collect();
    let mut body = json!({ "skills": skills });
    // Host paths only to the operator on the local socket (`antler skills list` prints them).
    if operator {
        body["public_dir"] = json!(dirs.0);
        body["custom_dir"] = json!(dirs.1);
        body["user"] = json!(dirs.2);
    }
    Ok(Json(body))
}

pub(crate) async fn update(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
    Json(body): Json<ToggleBody>,
) -> Result<Json<Value>, ApiError> {
    let admin = user.is_operator() || is_admin(&state.config.current(), &user.0);
    let skill =
        blocking(move || catalog(&state).set_enabled(&user.0, &name, body.enabled, admin)).await?;
    Ok(Json(skill_json(&skill)))
}

/// A skill with the fields DeerFlow's UI reads beside Antler's: `category` (`public` or
/// `custom`, its source), `editable` (a custom skill is its owner's), `license` (not read
/// from SKILL.md: empty).
fn skill_json(skill: &crate::skills::Skill) -> Value {
    let mut body = json!(skill);
    body["category"] = json!(skill.source);
    body["editable"] = json!(skill.source == crate::skills::SkillSource::Custom);
    body["license"] = json!("");
    body
}

pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let removed = name.clone();
    blocking(move || catalog(&state).remove(&user.0, &name)).await?;
    Ok(Json(json!({ "success": true, "name": removed })))
}

/// `multipart/form-data` with one file field, or JSON naming a file of the caller's thread.
pub(crate) async fn install(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    request: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let archive = if multipart {
        let multipart = Multipart::from_request(request, &state)
            .await
            .map_err(|e| {
                ApiError::bad_request(format!(
                    "{e}; send multipart/form-data with the .skill file"
                ))
            })?;
        read_upload(multipart).await?
    } else {
        let Json(body) = Json::<FromThreadBody>::from_request(request, &state)
            .await
            .map_err(|e| {
                ApiError::bad_request(format!(
                    "{e}; send the archive as multipart/form-data, or JSON {{\"thread_id\", \"path\"}} naming a .skill file of your thread"
                ))
            })?;
        owned_thread(&state, &user, &body.thread_id)?;
        let paths = ThreadPaths::new(&state.config.current().data_dir(), &user.0, &body.thread_id)?;
        let resolved = PathMapper::for_thread(&paths, None, &[])
            .resolve(&body.path)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        read_thread_file(&resolved.host_path, &body.path).await?
    };
    let skill = blocking(move || catalog(&state).install(&user.0, &archive)).await?;
    // DeerFlow's UI reads `success`, `skill_name` and `message` beside the skill.
    let mut body = skill_json(&skill);
    body["success"] = json!(true);
    body["skill_name"] = json!(skill.name);
    body["message"] = json!(format!("installed the skill {}", skill.name));
    Ok((StatusCode::CREATED, Json(body)))
}

async fn read_upload(mut multipart: Multipart) -> Result<Vec<u8>, ApiError> {
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|e| ApiError::bad_request(format!("the multipart body could not be read ({e})")))?
    {
        if field.file_name().is_none() {
            continue;
        }
        let bytes = field
            .bytes()
            .await
            .map_err(|e| ApiError::bad_request(format!("the upload could not be read ({e})")))?;
        return Ok(bytes.to_vec());
    }
    Err(ApiError::bad_request(
        "no file in the request; send multipart/form-data with the .skill or .zip file",
    ))
}

async fn read_thread_file(host: &std::path::Path, shown: &str) -> Result<Vec<u8>, ApiError> {
    let metadata = tokio::fs::metadata(host).await.map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no file {shown} in that thread; upload it first"),
        )
    })?;
    if metadata.len() > MAX_ARCHIVE_BYTES {
        return Err(ApiError::too_large(format!(
            "{shown} is larger than 256 MiB; that is too large for a skill"
        )));
    }
    tokio::fs::read(host).await.map_err(ApiError::internal)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SkillError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(ApiError::internal)?
        .map_err(skill_error)
}

fn skill_error(error: SkillError) -> ApiError {
    let (status, code) = match &error {
        SkillError::NotFound { .. } => (StatusCode::NOT_FOUND, "skill_not_found"),
        SkillError::AdminOnly { .. } => (StatusCode::FORBIDDEN, "forbidden"),
        SkillError::PublicReadOnly { .. } => (StatusCode::CONFLICT, "skill_read_only"),
        SkillError::Exists { .. } => (StatusCode::CONFLICT, "skill_exists"),
        SkillError::Reserved { .. } | SkillError::InvalidUser(_) => {
            (StatusCode::BAD_REQUEST, "bad_request")
        }
        SkillError::Archive(ArchiveError::TooLarge | ArchiveError::TooManyEntries(_)) => {
            (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
        }
        SkillError::Archive(ArchiveError::Io(_)) | SkillError::Store(_) | SkillError::Io { .. } => {
            return ApiError::internal(error);
        }
        SkillError::Archive(_) => (StatusCode::BAD_REQUEST, "invalid_skill"),
    };
    ApiError::new(status, code, error.to_string())
}
