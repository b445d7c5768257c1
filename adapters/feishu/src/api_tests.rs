//! The client against a few canned open-API answers: one token refresh at a time, a stale token
//! refreshed and the call retried once, rate limits and refused credentials typed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};

use super::*;

#[derive(Default)]
struct Server {
    /// Token requests so far; the current token is `t-{count}`.
    issued: AtomicUsize,
    /// Answer the token endpoint with this code instead (0 = issue a token).
    token_code: AtomicUsize,
}

impl Server {
    fn current(&self) -> String {
        format!("t-{}", self.issued.load(Ordering::SeqCst))
    }
}

async fn start(server: Arc<Server>) -> FeishuApi {
    let token_server = server.clone();
    let call_server = server.clone();
    let router = Router::new()
        .route(
            "/open-apis/auth/v3/tenant_access_token/internal",
            post(move || {
                let server = token_server.clone();
                async move {
                    // Slow enough that concurrent callers overlap.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let code = server.token_code.load(Ordering::SeqCst);
                    if code != 0 {
                        return axum::Json(json!({"code": code, "msg": "app secret invalid"}));
                    }
                    let n = server.issued.fetch_add(1, Ordering::SeqCst) + 1;
                    axum::Json(json!({"code": 0, "msg": "ok", "tenant_access_token": format!("t-{n}"), "expire": 7200}))
                }
            }),
        )
        .route(
            "/open-apis/echo",
            get(move |headers: HeaderMap| {
                let server = call_server.clone();
                async move {
                    let bearer = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    if bearer != format!("Bearer {}", server.current()) {
                        return axum::Json(json!({"code": 99991663, "msg": "Invalid access token for authorization"}))
                            .into_response();
                    }
                    axum::Json(json!({"code": 0, "msg": "success", "data": {"ok": true}}))
                        .into_response()
                }
            }),
        )
        .route(
            "/open-apis/limited",
            get(|| async {
                let mut headers = HeaderMap::new();
                headers.insert("x-ogw-ratelimit-reset", "7".parse().expect("header"));
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    headers,
                    axum::Json(json!({"code": 99991400, "msg": "request trigger frequency limit"})),
                )
            }),
        )
        .route(
            "/open-apis/limited-by-code",
            get(|| async { axum::Json(json!({"code": 99991400, "msg": "request trigger frequency limit"})) }),
        )
        .route(
            "/open-apis/file.json",
            get(|| async { axum::Json(json!({"a": 1, "list": [1, 2, 3]})) }),
        )
        .route(
            "/open-apis/missing",
            get(|| async {
                (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"code": 234003, "msg": "File not in msg."})),
                )
            }),
        )
        .route(
            "/open-apis/refused",
            get(|| async { axum::Json(json!({"code": 230002, "msg": "Bot/User can NOT be out of the chat."})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let base = url::Url::parse(&format!("http://{addr}/")).expect("url");
    FeishuApi::new(base, "cli_test", Secret::new("secret")).expect("api")
}

#[tokio::test]
async fn concurrent_calls_share_one_token_request() {
    let server = Arc::new(Server::default());
    let api = Arc::new(start(server.clone()).await);
    let calls = (0..8).map(|_| {
        let api = api.clone();
        tokio::spawn(async move { api.token().await })
    });
    for call in futures::future::join_all(calls).await {
        assert_eq!(call.expect("task").expect("token"), "t-1");
    }
    assert_eq!(server.issued.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_stale_token_is_refreshed_and_the_call_retried_once() {
    let server = Arc::new(Server::default());
    let api = start(server.clone()).await;
    let answer = api
        .json("echo", Method::GET, "open-apis/echo", None)
        .await
        .expect("first call");
    assert_eq!(data(&answer)["ok"], true);
    // Feishu invalidates the token (expired early, app re-published): one refresh, one retry.
    server.issued.fetch_add(1, Ordering::SeqCst);
    api.json("echo", Method::GET, "open-apis/echo", None)
        .await
        .expect("after the refresh");
    assert_eq!(server.issued.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn limits_refusals_and_bad_credentials_are_typed() {
    let server = Arc::new(Server::default());
    let api = start(server.clone()).await;
    let limited = api
        .json("limited", Method::GET, "open-apis/limited", None)
        .await;
    assert!(
        matches!(limited, Err(ChannelError::RateLimited { retry_after_secs }) if retry_after_secs == 7.0),
        "{limited:?}"
    );
    let by_code = api
        .json("limited", Method::GET, "open-apis/limited-by-code", None)
        .await;
    assert!(
        matches!(by_code, Err(ChannelError::RateLimited { .. })),
        "{by_code:?}"
    );
    let refused = api
        .json("refused", Method::GET, "open-apis/refused", None)
        .await;
    match refused {
        Err(ChannelError::Platform(why)) => assert!(why.contains("230002"), "{why}"),
        other => panic!("{other:?}"),
    }

    let server = Arc::new(Server::default());
    server.token_code.store(10014, Ordering::SeqCst);
    let api = start(server).await;
    match api.token().await {
        Err(error @ ChannelError::Unauthorized(_)) => {
            assert!(error.is_fatal());
            assert!(error.to_string().contains("app_secret"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn tokens_are_replaced_before_they_expire() {
    let server = Arc::new(Server::default());
    let api = start(server.clone()).await;
    assert_eq!(api.token().await.expect("token"), "t-1");
    tokio::time::advance(Duration::from_secs(7200 - 6 * 60)).await;
    assert_eq!(api.token().await.expect("cached"), "t-1");
    tokio::time::advance(Duration::from_secs(2 * 60)).await;
    assert_eq!(api.token().await.expect("refreshed"), "t-2");
}

#[tokio::test]
async fn downloads_are_capped_and_a_json_file_is_not_an_error() {
    let server = Arc::new(Server::default());
    let api = start(server).await;
    let file = api.url("open-apis/file.json").expect("url");
    let bytes = api
        .download("file", file.clone(), 1024)
        .await
        .expect("file");
    assert_eq!(&bytes[..], br#"{"a":1,"list":[1,2,3]}"#);
    assert!(matches!(
        api.download("file", file, 5).await,
        Err(ChannelError::TooLarge { limit: 5, .. })
    ));
    let missing = api.url("open-apis/missing").expect("url");
    match api.download("file", missing, 1024).await {
        Err(ChannelError::Platform(why)) => assert!(why.contains("234003"), "{why}"),
        other => panic!("{other:?}"),
    }
}
