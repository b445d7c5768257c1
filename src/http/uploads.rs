//! Upload routes: multipart upload with count/size limits, list, delete.

use std::sync::Arc;

use axum::Json;
use axum::extract::multipart::MultipartError;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::files::uploads;
use crate::files::uploads::convert::{MARKDOWN_PATH, conversion_notices, convert_listed_uploads};
use crate::files::uploads::limits::{LimitError, UploadBudget};
use crate::http::artifacts::artifact_url;
use crate::http::json_errors::UPLOAD_TOO_LARGE;
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::paths::ThreadPaths;

fn thread_paths(
    state: &AppState,
    user: &AuthUser,
    thread_id: &str,
) -> Result<ThreadPaths, ApiError> {
    owned_thread(state, user, thread_id)?;
    Ok(ThreadPaths::new(
        &state.config.current().data_dir(),
        &user.0,
        thread_id,
    )?)
}

/// A broken multipart body: one over the route's limit is a 413, anything else a client error
/// named as such.
fn multipart_error(error: MultipartError) -> ApiError {
    let status = error.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::too_large(UPLOAD_TOO_LARGE);
    }
    ApiError::new(
        status,
        "bad_request",
        format!(
            "the multipart body could not be read ({}); send multipart/form-data with one file \
             field per file (curl: -F 'files=@report.pdf')",
            error.body_text()
        ),
    )
}

pub(crate) async fn upload(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
    mut multipart: Multipart,
) -> Result<Json<Value>, ApiError> {
    let paths = thread_paths(&state, &user, &thread_id)?;
    // One snapshot for the whole request: the limits and the conversion settings.
    let config = state.config.current();
    let limits = &config.uploads;
    let uploads_dir = paths.uploads();
    let store_dir = uploads_dir.clone();
    let mut budget = UploadBudget::new(limits, uploads::total_size(&uploads_dir)?);
    let over_limit = |error: LimitError| ApiError::too_large(error.to_string());
    // Read every part first so a limit violation stores nothing.
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        let Some(name) = field.file_name().map(str::to_string) else {
            continue;
        };
        budget.take_slot().map_err(over_limit)?;
        let mut bytes = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            bytes.extend_from_slice(&chunk);
            budget
                .check_size(&name, bytes.len() as u64)
                .map_err(over_limit)?;
        }
        uploads::normalize_filename(&name)?;
        budget.add(bytes.len() as u64);
        files.push((name, bytes));
    }
    if files.is_empty() {
        return Err(ApiError::bad_request(
            "no files in the request; send multipart/form-data with one or more file fields",
        ));
    }
    let infos = tokio::task::spawn_blocking(move || {
        files
            .iter()
            .map(|(name, bytes)| uploads::store_upload(&store_dir, name, bytes))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(ApiError::internal)??;
    let mut stored: Vec<Value> = infos
        .into_iter()
        .map(|info| {
            let artifact_url = artifact_url(&thread_id, &info.path);
            json!({
                "filename": info.filename,
                "size": info.size,
                "path": info.path,
                "virtual_path": info.path,
                "is_image": info.is_image,
                "artifact_url": artifact_url,
            })
        })
        .collect();
    convert_listed_uploads(
        state.harness.converter(),
        &config,
        &uploads_dir,
        &mut stored,
    )
    .await;
    for entry in &mut stored {
        if let Some(path) = entry.get(MARKDOWN_PATH).and_then(Value::as_str) {
            let url = artifact_url(&thread_id, path);
            entry["markdown_artifact_url"] = Value::String(url);
        }
    }
    let count = stored.len();
    let mut message = format!("Successfully uploaded {count} file(s)");
    for notice in conversion_notices(&stored) {
        message.push_str(&format!("; {notice}"));
    }
    Ok(Json(json!({
        "success": true,
        "files": stored,
        "message": message,
        // DeerFlow's field: an upload here stores every file or none (a limit refuses all).
        "skipped_files": [],
    })))
}

/// `GET /api/threads/{id}/uploads/limits`: the limits an upload to the thread obeys (DeerFlow's
/// UI checks files against them before it sends them).
pub(crate) async fn limits(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    thread_paths(&state, &user, &thread_id)?;
    let config = state.config.current();
    let limits = &config.uploads;
    Ok(Json(json!({
        "max_files": limits.max_files,
        "max_file_size": limits.max_file_size,
        "max_total_size": limits.max_total_size,
    })))
}

pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path(thread_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let paths = thread_paths(&state, &user, &thread_id)?;
    let files: Vec<Value> = uploads::list_uploads(&paths.uploads())?
        .into_iter()
        .map(|info| {
            // DeerFlow's UI links each file by `artifact_url` and shows its `extension`.
            let mut entry = json!(info);
            entry["virtual_path"] = json!(info.path);
            entry["artifact_url"] = json!(artifact_url(&thread_id, &info.path));
            entry["extension"] = json!(
                std::path::Path::new(&info.filename)
                    .extension()
                    .map(|ext| format!(".{}", ext.to_string_lossy()))
                    .unwrap_or_default()
            );
            entry
        })
        .collect();
    Ok(Json(json!({"files": files, "count": files.len()})))
}

pub(crate) async fn remove(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, filename)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let paths = thread_paths(&state, &user, &thread_id)?;
    uploads::delete_upload(&paths.uploads(), &filename)?;
    Ok(Json(
        json!({"success": true, "message": format!("Deleted {filename}")}),
    ))
}
