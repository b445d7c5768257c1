//! The rewrite layer on a small router that produces each kind of non-JSON error for real.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query};
use axum::http::{Request, StatusCode};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::Value;
use tower::ServiceExt;
use tower_http::services::ServeFile;
use tower_http::timeout::TimeoutLayer;

use super::*;

#[derive(Debug, Deserialize)]
struct Body1 {
    #[allow(dead_code)]
    count: u32,
}

#[derive(Debug, Deserialize)]
struct Page {
    #[allow(dead_code)]
    limit: u32,
}

fn app(file: std::path::PathBuf) -> Router {
    let routes = Router::new()
        .route(
            "/api/json",
            post(|axum::Json(_): axum::Json<Body1>| async { "ok" }),
        )
        .route("/api/only-get", get(|| async { "ok" }))
        .route(
            "/api/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .route("/api/number/{n}", get(|Path(_): Path<u32>| async { "ok" }))
        .route("/api/page", get(|Query(_): Query<Page>| async { "ok" }))
        .route(
            "/api/api-error",
            get(|| async { ApiError::bad_request("already json; keep me") }),
        )
        .route(
            "/api/broken",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "secret internals") }),
        )
        .route_service("/api/file", ServeFile::new(file))
        .layer(DefaultBodyLimit::max(64))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(50),
        ));
    with_json_errors(routes)
}

async fn call(request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ten.txt");
    std::fs::write(&file, "0123456789").unwrap();
    let response = app(file).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    assert_eq!(
        headers[header::CONTENT_TYPE],
        "application/json",
        "{status}"
    );
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    (status, headers, body)
}

fn post_json(content_type: Option<&str>, body: &str) -> Request<Body> {
    let mut builder = Request::post("/api/json");
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    builder.body(Body::from(body.to_owned())).unwrap()
}

fn get_request(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn each_rejection_becomes_a_json_error_that_says_what_to_do() {
    let cases: Vec<(Request<Body>, StatusCode, &str, &[&str])> = vec![
        (
            post_json(None, r#"{"count": 1}"#),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            &["content-type", "application/json", "--json"],
        ),
        (
            post_json(Some("application/json"), r#"{"count": "#),
            StatusCode::BAD_REQUEST,
            "bad_request",
            &[
                "failed to parse the request body as json",
                "fix the request",
            ],
        ),
        (
            post_json(Some("application/json"), r#"{"count": "x"}"#),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            &["count", "fix the named field"],
        ),
        (
            post_json(Some("application/json"), &format!("[{}]", "1,".repeat(64))),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            &["1 MiB", "send a smaller body"],
        ),
        (
            Request::delete("/api/only-get")
                .body(Body::empty())
                .unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &["DELETE is not allowed on /api/only-get", "use GET"],
        ),
        (
            get_request("/api/number/seven"),
            StatusCode::BAD_REQUEST,
            "bad_request",
            &["invalid url", "fix the request"],
        ),
        (
            get_request("/api/page?limit=many"),
            StatusCode::BAD_REQUEST,
            "bad_request",
            &["query string", "limit"],
        ),
        (
            get_request("/api/slow"),
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            &["30 seconds", "retry"],
        ),
        (
            Request::get("/api/file")
                .header(header::RANGE, "bytes=50-60")
                .body(Body::empty())
                .unwrap(),
            StatusCode::RANGE_NOT_SATISFIABLE,
            "range_not_satisfiable",
            &["10 bytes", "bytes=0-9", "no Range header"],
        ),
        (
            get_request("/api/broken"),
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &["check the daemon log"],
        ),
    ];
    for (request, status, code, needles) in cases {
        let label = format!("{} {}", request.method(), request.uri());
        let (got_status, _, body) = call(request).await;
        assert_eq!(got_status, status, "{label}: {body}");
        assert_eq!(body["error"]["code"], code, "{label}: {body}");
        let text = message(&body).to_lowercase();
        for needle in needles {
            assert!(
                text.contains(&needle.to_lowercase()),
                "{label}: {needle:?} missing from {text:?}"
            );
        }
        assert!(!text.contains("secret internals"), "{label}: {text}");
    }
}

#[tokio::test]
async fn headers_of_the_original_answer_are_kept() {
    let (_, headers, _) = call(Request::post("/api/only-get").body(Body::empty()).unwrap()).await;
    assert_eq!(headers[header::ALLOW], "GET,HEAD");
    let (_, headers, _) = call(
        Request::get("/api/file")
            .header(header::RANGE, "bytes=50-60")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(headers[header::CONTENT_RANGE], "bytes */10");
}

#[tokio::test]
async fn json_errors_and_successes_pass_through_untouched() {
    let (status, _, body) = call(get_request("/api/api-error")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(message(&body), "already json; keep me");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ten.txt");
    std::fs::write(&file, "0123456789").unwrap();
    let ok = app(file)
        .oneshot(get_request("/api/only-get"))
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(ok.into_body(), 64).await.unwrap();
    assert_eq!(&bytes[..], b"ok");
}

#[test]
fn run_routes_and_uploads_get_their_own_limits_in_the_message() {
    assert!(timeout_message("/api/threads/t/runs/wait").contains("60 minutes"));
    assert!(timeout_message("/api/threads/t/state").contains("30 seconds"));
    assert!(too_large_message("/api/threads/t/uploads").contains("uploads.max_total_size"));
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_RANGE, "bytes */0".parse().unwrap());
    assert!(range_message(&headers).contains("empty"));
}
