//! `GET /api/threads/{id}/artifacts/{virtual_path}`: serves a thread's output or upload with byte
//! ranges. Only passive types (images, PDF, plain text, media) are shown inline; everything else
//! (HTML, XHTML, SVG, XML, unknown types) is a download, and every file comes with a sandboxing
//! policy and `nosniff`, so an agent-written file can never run script in the API's origin.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use tower::ServiceExt;
use tower_http::services::ServeFile;

use crate::files::artifacts::{ARTIFACT_CSP, content_disposition, must_download, resolve_artifact};
use crate::http::threads::owned_thread;
use crate::http::{ApiError, AppState, AuthUser};
use crate::paths::ThreadPaths;

/// Characters kept as they are in one URL path segment (RFC 3986 unreserved); everything else,
/// `/`, `?`, `#`, `%` and spaces included, is percent-encoded.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The URL serving a thread's file at `virtual_path`, one encoded segment per path segment, so
/// a name such as `report #1?.txt` stays one path (the route decodes it back).
pub fn artifact_url(thread_id: &str, virtual_path: &str) -> String {
    let mut url = format!(
        "/api/threads/{}/artifacts",
        utf8_percent_encode(thread_id, PATH_SEGMENT)
    );
    for segment in virtual_path.split('/').filter(|s| !s.is_empty()) {
        url.push('/');
        url.extend(utf8_percent_encode(segment, PATH_SEGMENT));
    }
    url
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ArtifactQuery {
    download: Option<String>,
}

pub(crate) async fn serve(
    State(state): State<Arc<AppState>>,
    user: AuthUser,
    Path((thread_id, virtual_path)): Path<(String, String)>,
    Query(query): Query<ArtifactQuery>,
    request: Request,
) -> Result<Response, ApiError> {
    owned_thread(&state, &user, &thread_id)?;
    let paths = ThreadPaths::new(&state.config.current().data_dir(), &user.0, &thread_id)?;
    let file = resolve_artifact(&paths.outputs(), &paths.uploads(), &virtual_path)?;
    let mime = mime_guess::from_path(&file).first_or_octet_stream();
    let download = matches!(query.download.as_deref(), Some("true" | "1" | "yes"));
    let attachment = must_download(mime.essence_str(), download);
    let filename = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifact".into());
    // ServeFile handles Range / If-Modified-Since and sets Content-Type from the extension.
    let (parts, _) = request.into_parts();
    let served = ServeFile::new(&file)
        .oneshot(Request::from_parts(parts, Body::empty()))
        .await
        .map_err(ApiError::internal)?;
    let mut response = served.map(Body::new).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_disposition(&filename, attachment)) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(ARTIFACT_CSP),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_urls_encode_each_segment() {
        assert_eq!(
            artifact_url("t-1", "/mnt/user-data/uploads/report #1?.txt"),
            "/api/threads/t-1/artifacts/mnt/user-data/uploads/report%20%231%3F.txt"
        );
        assert_eq!(
            artifact_url("t", "/mnt/user-data/outputs/100%/a&b=c;d.md"),
            "/api/threads/t/artifacts/mnt/user-data/outputs/100%25/a%26b%3Dc%3Bd.md"
        );
        assert_eq!(
            artifact_url("t", "/mnt/user-data/uploads/报告.pdf"),
            "/api/threads/t/artifacts/mnt/user-data/uploads/%E6%8A%A5%E5%91%8A.pdf"
        );
    }
}
