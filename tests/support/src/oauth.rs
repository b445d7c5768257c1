//! An OAuth 2.0 token endpoint (RFC 6749 §4.4 client credentials, §6 refresh) and an
//! authorization-checking reverse proxy in front of an MCP server, for MCP client tests.
//!
//! The endpoint issues `tok-1`, `tok-2`, … with the configured `expires_in` and records every
//! form it received; the proxy records each request's `Authorization` header, answers 401
//! without one, and forwards everything else (streaming the answer, SSE included).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

#[derive(Default)]
struct TokenState {
    forms: Vec<Vec<(String, String)>>,
    expires_in: u64,
}

/// The token endpoint at `{url}/token`.
#[derive(Clone)]
pub struct FakeTokenEndpoint {
    pub url: String,
    state: Arc<Mutex<TokenState>>,
}

impl FakeTokenEndpoint {
    /// Tokens live `expires_in` seconds.
    pub async fn start(expires_in: u64) -> Self {
        let state = Arc::new(Mutex::new(TokenState {
            forms: Vec::new(),
            expires_in,
        }));
        let app = Router::new()
            .route("/token", post(issue))
            .with_state(state.clone());
        let addr = serve(app).await;
        Self {
            url: format!("http://{addr}/token"),
            state,
        }
    }

    /// Every form posted so far, as (key, value) pairs in order.
    pub fn forms(&self) -> Vec<Vec<(String, String)>> {
        self.state.lock().unwrap().forms.clone()
    }
}

async fn issue(State(state): State<Arc<Mutex<TokenState>>>, body: String) -> Response {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let grant = field("grant_type").unwrap_or_default();
    let mut state = state.lock().unwrap();
    let valid = match grant.as_str() {
        "client_credentials" => {
            field("client_id").as_deref() == Some("antler")
                && field("client_secret").as_deref() == Some("s3cret")
        }
        "refresh_token" => field("refresh_token").is_some(),
        _ => false,
    };
    state.forms.push(form);
    if !valid {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let number = state.forms.len();
    axum::Json(serde_json::json!({
        "access_token": format!("tok-{number}"),
        "token_type": "bearer",
        "expires_in": state.expires_in,
        "refresh_token": format!("refresh-{number}"),
    }))
    .into_response()
}

#[derive(Clone)]
struct ProxyState {
    upstream: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
    http: reqwest::Client,
}

/// A reverse proxy to `upstream` (an MCP server's base URL) that demands `Authorization`.
pub struct AuthProxy {
    pub url: String,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl AuthProxy {
    pub async fn start(upstream: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = ProxyState {
            upstream: upstream.trim_end_matches('/').to_string(),
            seen: seen.clone(),
            http: reqwest::Client::new(),
        };
        let app = Router::new().fallback(forward).with_state(state);
        let addr = serve(app).await;
        Self {
            url: format!("http://{addr}"),
            seen,
        }
    }

    /// The `Authorization` header of every request, in order (`None` when absent).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.seen.lock().unwrap().clone()
    }
}

async fn forward(State(state): State<ProxyState>, request: Request) -> Response {
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    state.seen.lock().unwrap().push(auth.clone());
    if auth.is_none() {
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", "Bearer")]).into_response();
    }
    let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes()).unwrap();
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in request.headers() {
        if matches!(name.as_str(), "host" | "authorization" | "content-length") {
            continue;
        }
        headers.insert(name.clone(), value.clone());
    }
    let body = axum::body::to_bytes(request.into_body(), 10 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let upstream = state
        .http
        .request(method, format!("{}{path}", state.upstream))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let upstream = match upstream {
        Ok(response) => response,
        Err(error) => return (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    };
    let mut response = Response::builder().status(upstream.status().as_u16());
    let mut copied = HeaderMap::new();
    for (name, value) in upstream.headers() {
        if matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            continue;
        }
        copied.insert(name.clone(), value.clone());
    }
    if let Some(headers) = response.headers_mut() {
        headers.extend(copied);
    }
    response
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}
